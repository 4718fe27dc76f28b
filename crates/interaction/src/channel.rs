//! [`InteractionChannel`]: one pending request at a time, a two-phase timeout, one answer.
//!
//! The state lives under one mutex that is never held across an `.await`. Whoever takes the
//! pending request out of that state — a person's answer, a cancellation, a shutdown, or the
//! waiter's own timeout — is the only one who answers it; everyone else finds nothing to take.
//! That is what makes a second answer impossible. The waiter sleeps on a `oneshot` (the
//! answer), a `watch` (the acknowledgement) and a deadline at once, so it wakes on events and
//! never polls; a `watch` keeps its latest value, so no wake-up can be lost between checks.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use lsm_sandbox::{PermissionAsker, PermissionDecision, PermissionRequest};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::answers::{check_decision, permission_decision};
use crate::config::seconds;
use crate::events::{InteractionEvent, InteractionObserver};
use crate::{
    Answer, AnswerSource, Decision, InteractionConfig, InteractionError, InteractionRequest,
    InteractionResponse, PendingView, TimeoutAction, Timeouts,
};

/// The answer `auto_continue` gives to a clarification.
pub const AUTO_CONTINUE_REPLY: &str = "Continue with your best judgment.";

struct Pending {
    request: InteractionRequest,
    acknowledged_at: Option<DateTime<Utc>>,
    ack: watch::Sender<Option<Instant>>,
    reply: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct State {
    pending: Option<Pending>,
    shutdown: Option<String>,
    session_tools: BTreeSet<String>,
    observer: Option<Arc<dyn InteractionObserver>>,
}

/// The human-in-the-loop channel of one run. Share it as `Arc<InteractionChannel>`: the run's
/// sandbox asks through it ([`PermissionAsker`]), front ends answer through it.
pub struct InteractionChannel {
    timeouts: Timeouts,
    auto_continue: bool,
    state: Mutex<State>,
    pending_tx: watch::Sender<Option<InteractionRequest>>,
}

impl std::fmt::Debug for InteractionChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InteractionChannel")
            .field("timeouts", &self.timeouts)
            .field("auto_continue", &self.auto_continue)
            .finish_non_exhaustive()
    }
}

impl InteractionChannel {
    /// A channel with these settings.
    ///
    /// # Errors
    /// [`InteractionError::InvalidConfig`] when a setting is out of range.
    pub fn new(config: &InteractionConfig) -> Result<Self, InteractionError> {
        config.validate()?;
        Ok(Self::with_timeouts(config.timeouts(), config.auto_continue))
    }

    /// A channel with explicit timings (any durations, for tests and embedders).
    pub fn with_timeouts(timeouts: Timeouts, auto_continue: bool) -> Self {
        InteractionChannel {
            timeouts,
            auto_continue,
            state: Mutex::new(State::default()),
            pending_tx: watch::channel(None).0,
        }
    }

    /// Send every event to `observer` from now on (replacing any earlier one).
    pub fn set_observer(&self, observer: Arc<dyn InteractionObserver>) {
        self.lock().observer = Some(observer);
    }

    /// The timings.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Whether clarifications are answered without asking.
    pub fn auto_continue(&self) -> bool {
        self.auto_continue
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock cannot leave the state half-changed in a
        // way that matters more than answering: keep going.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pending request, if any, and whether it was acknowledged.
    pub fn pending(&self) -> Option<PendingView> {
        self.lock().pending.as_ref().map(|p| PendingView {
            request: p.request.clone(),
            acknowledged_at: p.acknowledged_at,
        })
    }

    /// A receiver that changes whenever a request becomes pending or stops being pending:
    /// how a front end learns of a request the moment it is posted.
    pub fn subscribe(&self) -> watch::Receiver<Option<InteractionRequest>> {
        self.pending_tx.subscribe()
    }

    /// Whether `tool` was approved for the rest of the run.
    pub fn is_session_approved(&self, tool: &str) -> bool {
        self.lock().session_tools.contains(tool)
    }

    /// Whether [`InteractionChannel::shutdown`] was called.
    pub fn is_shut_down(&self) -> bool {
        self.lock().shutdown.is_some()
    }

    /// Post `request` and wait for its one answer: up to the unacknowledged timeout until a
    /// front end acknowledges it, then up to the acknowledged timeout (forever when that is
    /// 0). A timeout answers per `timeout_action`.
    ///
    /// # Errors
    /// [`InteractionError::Busy`] when another request is pending,
    /// [`InteractionError::ShutDown`] after [`InteractionChannel::shutdown`].
    pub async fn post_request(
        &self,
        request: InteractionRequest,
    ) -> Result<Answer, InteractionError> {
        let (reply_tx, mut reply_rx) = oneshot::channel();
        let (ack_tx, mut ack_rx) = watch::channel(None);
        let posted = Instant::now();
        let request_id = request.request_id.clone();
        {
            let mut st = self.lock();
            if let Some(reason) = &st.shutdown {
                return Err(InteractionError::ShutDown {
                    reason: reason.clone(),
                });
            }
            if let Some(p) = &st.pending {
                return Err(InteractionError::Busy {
                    pending: p.request.request_id.clone(),
                });
            }
            emit(
                &st,
                &InteractionEvent::Requested {
                    request: request.clone(),
                },
            );
            tracing::info!(request_id = %request_id, kind = %request.request_type, "waiting for a person");
            st.pending = Some(Pending {
                request: request.clone(),
                acknowledged_at: None,
                ack: ack_tx,
                reply: reply_tx,
            });
            self.pending_tx.send_replace(Some(request));
        }
        let mut guard = WaitGuard {
            channel: self,
            request_id: request_id.clone(),
            armed: true,
        };

        let mut deadline = Some(posted + self.timeouts.unacknowledged);
        let mut acknowledged = false;
        let mut ack_open = true;
        loop {
            let sleep = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                answer = &mut reply_rx => {
                    guard.armed = false;
                    return answer.map_err(|_| InteractionError::Lost);
                }
                changed = ack_rx.changed(), if ack_open && !acknowledged => {
                    match changed {
                        // The sender goes away only when the request was taken: its answer
                        // is on the way.
                        Err(_) => ack_open = false,
                        Ok(()) => {
                            if let Some(at) = *ack_rx.borrow_and_update() {
                                acknowledged = true;
                                deadline = self.timeouts.acknowledged.map(|d| at + d);
                            }
                        }
                    }
                }
                () = sleep => match self.time_out(&request_id, acknowledged) {
                    Expiry::TimedOut(answer) => {
                        guard.armed = false;
                        return Ok(answer);
                    }
                    // Someone answered at the same moment: their answer is in the oneshot.
                    Expiry::AlreadyTaken => deadline = None,
                    // Acknowledged just before the deadline: the acknowledgement (already in
                    // the watch, so the next turn of the loop sees it first) sets a new one.
                    Expiry::JustAcknowledged => {}
                },
            }
        }
    }

    /// The waiter's deadline passed: answer per `timeout_action`, unless someone else took
    /// the request first, or acknowledged it after the waiter last looked.
    fn time_out(&self, request_id: &str, waiter_saw_ack: bool) -> Expiry {
        let mut st = self.lock();
        let acknowledged = match st.pending.as_ref() {
            Some(p) if p.request.request_id == request_id => p.acknowledged_at.is_some(),
            _ => return Expiry::AlreadyTaken,
        };
        if acknowledged && !waiter_saw_ack {
            return Expiry::JustAcknowledged;
        }
        let Some(pending) = take_if(&mut st, request_id) else {
            return Expiry::AlreadyTaken;
        };
        let limit = if acknowledged {
            self.timeouts
                .acknowledged
                .map_or_else(|| "?".into(), seconds)
        } else {
            seconds(self.timeouts.unacknowledged)
        };
        let action = self.timeouts.action;
        emit(
            &st,
            &InteractionEvent::TimedOut {
                request_id: request_id.to_string(),
                acknowledged,
                after: limit.clone(),
                action,
            },
        );
        let when = if acknowledged {
            format!("{limit} after it was acknowledged")
        } else {
            format!("after {limit} without being acknowledged")
        };
        let (decision, message) = match action {
            TimeoutAction::Deny => (
                Decision::Deny,
                format!(
                    "Denied: the request timed out {when}, with no answer (timeout_action = deny)"
                ),
            ),
            TimeoutAction::Approve => (
                Decision::Approve,
                format!(
                    "Auto-approved because the request timed out {when}, with no answer (timeout_action = approve)"
                ),
            ),
        };
        tracing::info!(request_id, "request timed out: {message}");
        Expiry::TimedOut(self.finish(&mut st, pending, decision, message, AnswerSource::Timeout))
    }

    /// Answer the pending request and wake its waiter. Called with the request already taken.
    fn finish(
        &self,
        st: &mut State,
        pending: Pending,
        decision: Decision,
        user_message: String,
        source: AnswerSource,
    ) -> Answer {
        let answer = Answer {
            response: InteractionResponse {
                request_id: pending.request.request_id.clone(),
                decision,
                user_message,
            },
            source,
        };
        if decision == Decision::ApproveSession {
            st.session_tools.insert(pending.request.tool_name.clone());
        }
        emit(
            st,
            &InteractionEvent::Answered {
                request_type: pending.request.request_type,
                tool_name: pending.request.tool_name.clone(),
                response: answer.response.clone(),
                source,
            },
        );
        // The waiter may be gone (its call was dropped); the answer is still recorded.
        let _ = pending.reply.send(answer.clone());
        self.pending_tx.send_replace(None);
        answer
    }

    /// A front end showed the pending request `request_id` to a person: from now on it waits
    /// up to the acknowledged timeout. Returns whether this call acknowledged it (`false`
    /// when it already was).
    ///
    /// # Errors
    /// [`InteractionError::NotPending`] when `request_id` is not the pending request; nothing
    /// changes then.
    pub fn acknowledge_request(&self, request_id: &str) -> Result<bool, InteractionError> {
        let mut st = self.lock();
        let Some(p) = st
            .pending
            .as_mut()
            .filter(|p| p.request.request_id == request_id)
        else {
            return Err(InteractionError::NotPending {
                request_id: request_id.to_string(),
            });
        };
        if p.acknowledged_at.is_some() {
            return Ok(false);
        }
        let at = Utc::now();
        p.acknowledged_at = Some(at);
        p.ack.send_replace(Some(Instant::now()));
        emit(
            &st,
            &InteractionEvent::Acknowledged {
                request_id: request_id.to_string(),
                acknowledged_at: at,
            },
        );
        Ok(true)
    }

    /// A person's answer to the pending request `request_id`.
    ///
    /// # Errors
    /// [`InteractionError::NotPending`] when `request_id` is not pending (already answered,
    /// timed out, cancelled); [`InteractionError::InvalidDecision`] when `decision` does not
    /// answer this type of request. Nothing changes in either case.
    pub fn respond(
        &self,
        request_id: &str,
        decision: Decision,
        user_message: impl Into<String>,
    ) -> Result<(), InteractionError> {
        self.respond_as(request_id, decision, user_message, AnswerSource::Person)
    }

    /// [`InteractionChannel::respond`], naming who answered (`--yes`, an unattended run).
    ///
    /// # Errors
    /// As [`InteractionChannel::respond`].
    pub fn respond_as(
        &self,
        request_id: &str,
        decision: Decision,
        user_message: impl Into<String>,
        source: AnswerSource,
    ) -> Result<(), InteractionError> {
        let mut st = self.lock();
        let Some(p) = st
            .pending
            .as_ref()
            .filter(|p| p.request.request_id == request_id)
        else {
            return Err(InteractionError::NotPending {
                request_id: request_id.to_string(),
            });
        };
        check_decision(p.request.request_type, decision)?;
        let Some(pending) = take_if(&mut st, request_id) else {
            return Err(InteractionError::NotPending {
                request_id: request_id.to_string(),
            });
        };
        self.finish(&mut st, pending, decision, user_message.into(), source);
        Ok(())
    }

    /// Release the waiter of the pending request, if any, with a denial citing `reason` (a
    /// stop was requested). Returns whether a request was pending.
    pub fn cancel_pending(&self, reason: &str) -> bool {
        let mut st = self.lock();
        let Some(pending) = st.pending.take() else {
            return false;
        };
        self.finish(
            &mut st,
            pending,
            Decision::Deny,
            format!("Cancelled: {reason}"),
            AnswerSource::Cancelled,
        );
        true
    }

    /// Shut the channel down: the pending request (if any) is denied citing `reason`, and
    /// every later post is refused. Idempotent.
    pub fn shutdown(&self, reason: &str) {
        let mut st = self.lock();
        if st.shutdown.is_none() {
            st.shutdown = Some(reason.to_string());
        }
        if let Some(pending) = st.pending.take() {
            self.finish(
                &mut st,
                pending,
                Decision::Deny,
                format!("Denied: the interaction channel shut down ({reason})"),
                AnswerSource::Shutdown,
            );
        }
    }

    /// Record `request` together with an answer given without waiting (a session approval,
    /// `auto_continue`). The request never becomes pending.
    ///
    /// # Errors
    /// [`InteractionError::ShutDown`] after [`InteractionChannel::shutdown`].
    pub fn answer_at_once(
        &self,
        request: InteractionRequest,
        decision: Decision,
        user_message: impl Into<String>,
        source: AnswerSource,
    ) -> Result<Answer, InteractionError> {
        let st = self.lock();
        if let Some(reason) = &st.shutdown {
            return Err(InteractionError::ShutDown {
                reason: reason.clone(),
            });
        }
        let answer = Answer {
            response: InteractionResponse {
                request_id: request.request_id.clone(),
                decision,
                user_message: user_message.into(),
            },
            source,
        };
        emit(
            &st,
            &InteractionEvent::Requested {
                request: request.clone(),
            },
        );
        emit(
            &st,
            &InteractionEvent::Answered {
                request_type: request.request_type,
                tool_name: request.tool_name,
                response: answer.response.clone(),
                source,
            },
        );
        Ok(answer)
    }

    /// Ask permission for a sandbox call: approved at once when the tool was approved for the
    /// session, otherwise posted and waited for. Always a decision: an error (busy, shut
    /// down) is a denial that says why.
    pub async fn ask_permission(&self, request: &PermissionRequest) -> PermissionDecision {
        let posted = InteractionRequest::permission(request);
        let answer = if self.is_session_approved(&request.tool_name) {
            self.answer_at_once(
                posted,
                Decision::Approve,
                format!(
                    "approved for the rest of the run (approve_session given earlier for '{}')",
                    request.tool_name
                ),
                AnswerSource::SessionApproval,
            )
        } else {
            self.post_request(posted).await
        };
        match answer {
            Ok(answer) => permission_decision(&answer),
            Err(e) => PermissionDecision::deny(e.to_string()),
        }
    }

    /// Ask the person a question (a clarification from `tool_name`): with `auto_continue`,
    /// answered at once with [`AUTO_CONTINUE_REPLY`].
    ///
    /// # Errors
    /// As [`InteractionChannel::post_request`].
    pub async fn ask_clarification(
        &self,
        tool_name: &str,
        question: &str,
        context: Option<&str>,
    ) -> Result<Answer, InteractionError> {
        let request = InteractionRequest::clarification(tool_name, question, context);
        if self.auto_continue {
            return self.answer_at_once(
                request,
                Decision::Reply,
                AUTO_CONTINUE_REPLY,
                AnswerSource::AutoContinue,
            );
        }
        self.post_request(request).await
    }
}

#[async_trait::async_trait]
impl PermissionAsker for InteractionChannel {
    async fn ask(&self, request: PermissionRequest) -> PermissionDecision {
        self.ask_permission(&request).await
    }
}

/// What a waiter's passed deadline turned out to mean.
enum Expiry {
    /// The request timed out; this is its answer.
    TimedOut(Answer),
    /// Someone else answered it first.
    AlreadyTaken,
    /// It was acknowledged after the waiter last looked: wait on.
    JustAcknowledged,
}

/// Releases a request whose waiting call was dropped (its run was stopped mid-wait), so the
/// channel is free for the next one and the request still gets its one recorded answer.
struct WaitGuard<'a> {
    channel: &'a InteractionChannel,
    request_id: String,
    armed: bool,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut st = self.channel.lock();
        if let Some(pending) = take_if(&mut st, &self.request_id) {
            self.channel.finish(
                &mut st,
                pending,
                Decision::Deny,
                "Cancelled: the waiting call was abandoned (the run stopped)".to_string(),
                AnswerSource::Cancelled,
            );
        }
    }
}

fn take_if(st: &mut State, request_id: &str) -> Option<Pending> {
    if st
        .pending
        .as_ref()
        .is_some_and(|p| p.request.request_id == request_id)
    {
        st.pending.take()
    } else {
        None
    }
}

fn emit(st: &State, event: &InteractionEvent) {
    if let Some(observer) = &st.observer {
        observer.on_event(event);
    }
}
