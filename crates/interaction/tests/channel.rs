//! Seed 001 §6.3 layer 1 and the REFERENCE behaviours of the interaction channel. Timing
//! tests run on paused tokio time: nothing here sleeps for real or asserts on a wall clock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lsm_interaction::{
    Answer, AnswerSource, Decision, InteractionChannel, InteractionConfig, InteractionError,
    InteractionEvent, InteractionObserver, InteractionRequest, RequestType, TimeoutAction,
    Timeouts,
};
use lsm_sandbox::{PermissionRequest, RiskLevel};
use tokio::task::JoinHandle;

/// Records every event.
#[derive(Default)]
struct Log(Mutex<Vec<InteractionEvent>>);

impl InteractionObserver for Log {
    fn on_event(&self, event: &InteractionEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

impl Log {
    fn names(&self) -> Vec<&'static str> {
        self.0.lock().unwrap().iter().map(|e| e.name()).collect()
    }
}

fn channel(config: InteractionConfig) -> (Arc<InteractionChannel>, Arc<Log>) {
    let ch = Arc::new(InteractionChannel::new(&config).unwrap());
    let log = Arc::new(Log::default());
    ch.set_observer(log.clone());
    (ch, log)
}

fn defaults() -> (Arc<InteractionChannel>, Arc<Log>) {
    channel(InteractionConfig::default())
}

fn perm(tool: &str) -> PermissionRequest {
    PermissionRequest {
        tool_name: tool.into(),
        risk_level: RiskLevel::WritesWorkspace,
        reason: format!("tool '{tool}' needs permission by default"),
        args_summary: r#"{"content":"x","path":"out.md"}"#.into(),
        preview: None,
    }
}

fn perm_request(tool: &str) -> InteractionRequest {
    InteractionRequest::permission(&perm(tool))
}

fn post(ch: &Arc<InteractionChannel>, req: InteractionRequest) -> JoinHandle<Answer> {
    let ch = Arc::clone(ch);
    tokio::spawn(async move { ch.post_request(req).await.unwrap() })
}

/// Let spawned tasks run until they block.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

async fn advance(secs: u64) {
    tokio::time::advance(Duration::from_secs(secs)).await;
    settle().await;
}

// ---------- request shape ----------

#[test]
fn a_permission_request_has_the_reference_fields() {
    let r = perm_request("write_file");
    assert!(r.request_id.starts_with("perm-"), "{}", r.request_id);
    assert_eq!(r.request_id.len(), "perm-".len() + 12);
    assert!(r.request_id[5..].chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(
        r.prompt,
        "Allow tool 'write_file' (risk: writes_workspace)?"
    );
    let v = serde_json::to_value(&r).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "args_summary",
            "prompt",
            "reason",
            "request_id",
            "request_type",
            "risk_level",
            "timestamp",
            "tool_name"
        ]
    );
    assert_eq!(v["request_type"], "permission");
    assert_eq!(v["risk_level"], "writes_workspace");
    assert!(v["timestamp"].as_str().unwrap().ends_with('Z'));
    let c = InteractionRequest::clarification("ask_user", "Which file?", None);
    assert!(c.request_id.starts_with("clarify-"));
    assert_eq!(c.request_type, RequestType::Clarification);
    assert_eq!(c.prompt, "Which file?");
}

#[test]
fn timeout_seconds_must_be_at_least_one() {
    let config = InteractionConfig {
        timeout_seconds: 0,
        ..InteractionConfig::default()
    };
    let e = InteractionChannel::new(&config).unwrap_err();
    assert!(e.to_string().contains("timeout_seconds"), "{e}");
    let d = InteractionConfig::default();
    assert_eq!(
        (
            d.timeout_seconds,
            d.timeout_action,
            d.acknowledged_timeout_seconds,
            d.auto_continue
        ),
        (300, TimeoutAction::Deny, 0, false)
    );
}

// ---------- the two-phase state machine (seed 001 §6.3 layer 1) ----------

#[tokio::test(start_paused = true)]
async fn an_unacknowledged_request_times_out_after_timeout_seconds() {
    let (ch, log) = defaults();
    let waiter = post(&ch, perm_request("write_file"));
    settle().await;
    assert!(ch.pending().is_some());
    advance(299).await;
    assert!(!waiter.is_finished(), "timed out early");
    advance(1).await;
    assert!(waiter.is_finished(), "did not time out at 300 s");
    let answer = waiter.await.unwrap();
    assert_eq!(answer.source, AnswerSource::Timeout);
    assert_eq!(answer.response.decision, Decision::Deny);
    let msg = &answer.response.user_message;
    assert!(msg.contains("timed out") && msg.contains("300 s"), "{msg}");
    assert!(ch.pending().is_none());
    assert_eq!(
        log.names(),
        [
            "interaction_request",
            "interaction_timeout",
            "interaction_response"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn acknowledging_moves_the_request_to_the_acknowledged_timeout() {
    let (ch, _log) = channel(InteractionConfig {
        acknowledged_timeout_seconds: 600,
        ..InteractionConfig::default()
    });
    let req = perm_request("write_file");
    let id = req.request_id.clone();
    let waiter = post(&ch, req);
    settle().await;
    advance(100).await;
    assert!(ch.pending().unwrap().acknowledged_at.is_none());
    assert_eq!(ch.acknowledge_request(&id), Ok(true));
    assert!(ch.pending().unwrap().acknowledged_at.is_some());
    // Acknowledging again changes nothing.
    assert_eq!(ch.acknowledge_request(&id), Ok(false));
    settle().await;
    advance(300).await; // t = 400 s: past timeout_seconds, within the second phase
    assert!(
        !waiter.is_finished(),
        "the first-phase timeout still applied"
    );
    advance(299).await; // t = 699 s
    assert!(!waiter.is_finished());
    advance(1).await; // t = 700 s = ack + 600 s
    let answer = waiter.await.unwrap();
    assert_eq!(answer.source, AnswerSource::Timeout);
    let msg = &answer.response.user_message;
    assert!(
        msg.contains("600 s after it was acknowledged"),
        "the message says which limit ran out: {msg}"
    );
}

#[tokio::test(start_paused = true)]
async fn after_acknowledgement_zero_means_waiting_forever() {
    let (ch, log) = defaults();
    let req = perm_request("write_file");
    let id = req.request_id.clone();
    let waiter = post(&ch, req);
    settle().await;
    ch.acknowledge_request(&id).unwrap();
    settle().await;
    advance(60 * 60 * 24 * 30).await; // a month
    assert!(!waiter.is_finished(), "an acknowledged request timed out");
    ch.respond(&id, Decision::Approve, "").unwrap();
    let answer = waiter.await.unwrap();
    assert_eq!(answer.source, AnswerSource::Person);
    assert_eq!(answer.response.decision, Decision::Approve);
    assert_eq!(
        log.names(),
        [
            "interaction_request",
            "interaction_acknowledged",
            "interaction_response"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn acknowledging_a_mismatched_id_does_not_acknowledge_the_pending_request() {
    let (ch, log) = defaults();
    let waiter = post(&ch, perm_request("write_file"));
    settle().await;
    let e = ch.acknowledge_request("perm-000000000000").unwrap_err();
    assert!(matches!(e, InteractionError::NotPending { .. }), "{e}");
    assert!(ch.pending().unwrap().acknowledged_at.is_none());
    advance(300).await;
    assert_eq!(waiter.await.unwrap().source, AnswerSource::Timeout);
    assert!(!log.names().contains(&"interaction_acknowledged"));
}

#[tokio::test(start_paused = true)]
async fn an_acknowledgement_just_before_the_deadline_wins() {
    let (ch, _log) = defaults();
    let req = perm_request("write_file");
    let id = req.request_id.clone();
    let waiter = post(&ch, req);
    settle().await;
    tokio::time::advance(Duration::from_secs(299)).await;
    // Acknowledge, then let the deadline pass before the waiter has run at all.
    ch.acknowledge_request(&id).unwrap();
    advance(5).await;
    assert!(
        !waiter.is_finished(),
        "timed out although acknowledged first"
    );
    ch.respond(&id, Decision::Deny, "not today").unwrap();
    let a = waiter.await.unwrap();
    assert_eq!(
        (a.source, a.response.decision),
        (AnswerSource::Person, Decision::Deny)
    );
}

#[tokio::test(start_paused = true)]
async fn timeout_action_approve_says_the_approval_was_automatic() {
    let (ch, _log) = channel(InteractionConfig {
        timeout_seconds: 5,
        timeout_action: TimeoutAction::Approve,
        ..InteractionConfig::default()
    });
    let decision = {
        let ch = Arc::clone(&ch);
        tokio::spawn(async move { ch.ask_permission(&perm("write_file")).await })
    };
    settle().await;
    advance(5).await;
    let d = decision.await.unwrap();
    assert!(d.allowed);
    assert!(
        d.reason.starts_with("Auto-approved because") && d.reason.contains("5 s"),
        "{}",
        d.reason
    );
}

// ---------- REFERENCE behaviours ----------

#[tokio::test(start_paused = true)]
async fn only_one_request_may_be_pending() {
    let (ch, _log) = defaults();
    let first = perm_request("write_file");
    let first_id = first.request_id.clone();
    let waiter = post(&ch, first);
    settle().await;
    let e = ch
        .post_request(perm_request("bash"))
        .await
        .expect_err("a second request was accepted");
    assert_eq!(
        e,
        InteractionError::Busy {
            pending: first_id.clone()
        }
    );
    assert!(e.to_string().contains("only one request"), "{e}");
    // The refusal changed nothing about the first.
    assert_eq!(ch.pending().unwrap().request.request_id, first_id);
    // Through the permission asker, a busy channel is a denial that says why.
    let d = ch.ask_permission(&perm("bash")).await;
    assert!(!d.allowed && d.reason.contains("already waiting"), "{d:?}");
    ch.respond(&first_id, Decision::Approve, "").unwrap();
    assert_eq!(waiter.await.unwrap().response.decision, Decision::Approve);
    // Now free again.
    assert!(ch.pending().is_none());
}

#[tokio::test(start_paused = true)]
async fn approve_session_is_remembered_for_that_tool_for_the_rest_of_the_run() {
    let (ch, log) = defaults();
    let first = {
        let ch = Arc::clone(&ch);
        tokio::spawn(async move { ch.ask_permission(&perm("write_file")).await })
    };
    settle().await;
    let id = ch.pending().unwrap().request.request_id;
    ch.respond(&id, Decision::ApproveSession, "").unwrap();
    let d = first.await.unwrap();
    assert!(d.allowed && d.reason.contains("rest of the run"), "{d:?}");
    assert!(ch.is_session_approved("write_file"));
    // Approved again at once: nothing becomes pending, no time passes.
    let again = ch.ask_permission(&perm("write_file")).await;
    assert!(again.allowed && again.reason.contains("approve_session"));
    // Recorded as a request answered by the session approval.
    let events = log.0.lock().unwrap().clone();
    let last = events.last().unwrap();
    assert!(
        matches!(
            last,
            InteractionEvent::Answered {
                source: AnswerSource::SessionApproval,
                ..
            }
        ),
        "{last:?}"
    );
    // Another tool still asks.
    let other = {
        let ch = Arc::clone(&ch);
        tokio::spawn(async move { ch.ask_permission(&perm("bash")).await })
    };
    settle().await;
    assert_eq!(ch.pending().unwrap().request.tool_name, "bash");
    ch.cancel_pending("test over");
    assert!(!other.await.unwrap().allowed);
}

#[tokio::test(start_paused = true)]
async fn a_plain_approve_is_not_remembered() {
    let (ch, _log) = defaults();
    let first = {
        let ch = Arc::clone(&ch);
        tokio::spawn(async move { ch.ask_permission(&perm("write_file")).await })
    };
    settle().await;
    let id = ch.pending().unwrap().request.request_id;
    ch.respond(&id, Decision::Approve, "").unwrap();
    assert!(first.await.unwrap().allowed);
    assert!(!ch.is_session_approved("write_file"));
}

#[tokio::test(start_paused = true)]
async fn cancel_pending_releases_the_waiter_with_a_denial() {
    let (ch, log) = defaults();
    let req = perm_request("write_file");
    let id = req.request_id.clone();
    let waiter = post(&ch, req);
    settle().await;
    assert!(ch.cancel_pending("stop requested"));
    let a = waiter.await.unwrap();
    assert_eq!(a.source, AnswerSource::Cancelled);
    assert_eq!(a.response.decision, Decision::Deny);
    assert!(a.response.user_message.contains("stop requested"));
    assert!(!ch.cancel_pending("again"), "nothing left to cancel");
    // A late answer finds nothing.
    assert!(matches!(
        ch.respond(&id, Decision::Approve, ""),
        Err(InteractionError::NotPending { .. })
    ));
    // The channel still works.
    let next = post(&ch, perm_request("bash"));
    settle().await;
    assert!(ch.pending().is_some());
    ch.cancel_pending("done");
    next.await.unwrap();
    assert_eq!(
        log.names()
            .iter()
            .filter(|n| **n == "interaction_response")
            .count(),
        2
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_releases_the_waiter_and_refuses_later_posts() {
    let (ch, _log) = defaults();
    let waiter = post(&ch, perm_request("write_file"));
    settle().await;
    ch.shutdown("the run finished");
    let a = waiter.await.unwrap();
    assert_eq!(
        (a.source, a.response.decision),
        (AnswerSource::Shutdown, Decision::Deny)
    );
    assert!(a.response.user_message.contains("the run finished"));
    let e = ch.post_request(perm_request("bash")).await.unwrap_err();
    assert!(matches!(e, InteractionError::ShutDown { .. }), "{e}");
    let d = ch.ask_permission(&perm("bash")).await;
    assert!(!d.allowed && d.reason.contains("shut down"), "{d:?}");
    ch.shutdown("twice is fine");
    assert!(ch.is_shut_down());
}

#[tokio::test(start_paused = true)]
async fn a_wrong_or_stale_id_changes_nothing() {
    let (ch, log) = defaults();
    let req = perm_request("write_file");
    let id = req.request_id.clone();
    let waiter = post(&ch, req);
    settle().await;
    for wrong in ["perm-ffffffffffff", "", "clarify-000000000000"] {
        assert!(matches!(
            ch.respond(wrong, Decision::Approve, ""),
            Err(InteractionError::NotPending { .. })
        ));
        assert!(ch.acknowledge_request(wrong).is_err());
    }
    assert_eq!(ch.pending().unwrap().request.request_id, id);
    assert!(!waiter.is_finished());
    // A decision that does not fit the type is refused and changes nothing either.
    let e = ch.respond(&id, Decision::Reply, "maybe").unwrap_err();
    assert!(matches!(e, InteractionError::InvalidDecision { .. }), "{e}");
    assert!(ch.pending().is_some());
    ch.respond(&id, Decision::Deny, "no").unwrap();
    let a = waiter.await.unwrap();
    assert_eq!(a.response.user_message, "no");
    // Stale: the request was answered.
    assert!(ch.respond(&id, Decision::Approve, "").is_err());
    assert!(ch.acknowledge_request(&id).is_err());
    assert_eq!(log.names(), ["interaction_request", "interaction_response"]);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_frees_the_channel_and_the_request_still_gets_an_answer() {
    let (ch, log) = defaults();
    let waiter = post(&ch, perm_request("write_file"));
    settle().await;
    waiter.abort();
    settle().await;
    assert!(ch.pending().is_none());
    let events = log.0.lock().unwrap().clone();
    assert!(matches!(
        events.last().unwrap(),
        InteractionEvent::Answered {
            source: AnswerSource::Cancelled,
            ..
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn subscribers_learn_of_a_request_the_moment_it_is_posted() {
    let (ch, _log) = defaults();
    let mut rx = ch.subscribe();
    assert!(rx.borrow_and_update().is_none());
    let req = perm_request("write_file");
    let id = req.request_id.clone();
    let waiter = post(&ch, req);
    rx.changed().await.unwrap();
    assert_eq!(rx.borrow_and_update().as_ref().unwrap().request_id, id);
    ch.respond(&id, Decision::Approve, "").unwrap();
    rx.changed().await.unwrap();
    assert!(rx.borrow().is_none());
    waiter.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn clarifications_get_the_reply_or_the_auto_continue_answer() {
    let (ch, _log) = defaults();
    let asked = {
        let ch = Arc::clone(&ch);
        tokio::spawn(async move {
            ch.ask_clarification("ask_user", "Which file?", Some("two candidates"))
                .await
                .unwrap()
        })
    };
    settle().await;
    let p = ch.pending().unwrap().request;
    assert_eq!(p.request_type, RequestType::Clarification);
    assert_eq!(p.reason, "two candidates");
    assert!(
        ch.respond(&p.request_id, Decision::ApproveSession, "")
            .is_err()
    );
    ch.respond(&p.request_id, Decision::Reply, "notes.md")
        .unwrap();
    assert_eq!(asked.await.unwrap().response.user_message, "notes.md");

    let (auto, log) = channel(InteractionConfig {
        auto_continue: true,
        ..InteractionConfig::default()
    });
    let a = auto
        .ask_clarification("ask_user", "Which file?", None)
        .await
        .unwrap();
    assert_eq!(a.source, AnswerSource::AutoContinue);
    assert_eq!(a.response.user_message, "Continue with your best judgment.");
    assert_eq!(log.names(), ["interaction_request", "interaction_response"]);
}

#[test]
fn transcript_fields_of_each_event() {
    let req = perm_request("write_file");
    let e = InteractionEvent::Requested {
        request: req.clone(),
    };
    assert_eq!(e.fields()["status"], "waiting_user");
    assert_eq!(e.fields()["request_id"], req.request_id.as_str());
    let a = InteractionEvent::Answered {
        request_type: RequestType::Permission,
        tool_name: "write_file".into(),
        response: lsm_interaction::InteractionResponse {
            request_id: req.request_id.clone(),
            decision: Decision::ApproveSession,
            user_message: String::new(),
        },
        source: AnswerSource::Person,
    };
    assert_eq!(a.name(), "interaction_response");
    assert_eq!(a.fields()["decision"], "approve_session");
    assert_eq!(a.fields()["source"], "person");
    assert_eq!(a.request_id(), req.request_id);
}

// ---------- races ----------

/// Counts, per request, the events that must happen exactly once.
#[derive(Default)]
struct Tally(Mutex<Vec<InteractionEvent>>);

impl InteractionObserver for Tally {
    fn on_event(&self, event: &InteractionEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

/// Acknowledge, respond, timeout and cancel race on a multi-threaded runtime, thousands of
/// times with random orders: every request ends in exactly one answer, the waiter gets that
/// answer, and exactly one contender (or the timeout) won.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledge_respond_timeout_and_cancel_race_without_lost_or_double_answers() {
    const ROUNDS: u64 = 3000;
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut wins = [0u32; 4];
    for round in 0..ROUNDS {
        let action = if next() % 2 == 0 {
            TimeoutAction::Deny
        } else {
            TimeoutAction::Approve
        };
        let ch = Arc::new(InteractionChannel::with_timeouts(
            Timeouts {
                unacknowledged: Duration::from_micros(next() % 1500),
                acknowledged: (next() % 3 != 0).then(|| Duration::from_micros(next() % 1500)),
                action,
            },
            false,
        ));
        let tally = Arc::new(Tally::default());
        ch.set_observer(tally.clone());
        let req = perm_request("write_file");
        let id = req.request_id.clone();
        let waiter = {
            let ch = Arc::clone(&ch);
            tokio::spawn(async move { ch.post_request(req).await })
        };
        let spins = [next() % 8, next() % 8, next() % 8];
        let acker = {
            let (ch, id, n) = (Arc::clone(&ch), id.clone(), spins[0]);
            tokio::spawn(async move {
                for _ in 0..n {
                    tokio::task::yield_now().await;
                }
                ch.acknowledge_request(&id).is_ok()
            })
        };
        let responder = {
            let (ch, id, n) = (Arc::clone(&ch), id.clone(), spins[1]);
            tokio::spawn(async move {
                for _ in 0..n {
                    tokio::task::yield_now().await;
                }
                ch.respond(&id, Decision::Approve, "yes").is_ok()
            })
        };
        let use_cancel = round % 2 == 0;
        let canceller = {
            let (ch, n) = (Arc::clone(&ch), spins[2]);
            tokio::spawn(async move {
                for _ in 0..n {
                    tokio::task::yield_now().await;
                }
                use_cancel && ch.cancel_pending("stop")
            })
        };
        let responded = responder.await.unwrap();
        let cancelled = canceller.await.unwrap();
        let _acked = acker.await.unwrap();
        // Whatever is left is ended by the timeout (or a final cancel when the second phase
        // waits forever).
        let answer = match tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if waiter.is_finished() {
                    break;
                }
                tokio::task::yield_now().await;
                if ch.pending().is_some_and(|p| p.acknowledged_at.is_some())
                    && ch.timeouts().acknowledged.is_none()
                {
                    ch.cancel_pending("cleanup");
                }
            }
        })
        .await
        {
            Ok(()) => waiter.await.unwrap().unwrap(),
            Err(_) => panic!("round {round}: the waiter never got an answer"),
        };
        let late_cancel = answer.source == AnswerSource::Cancelled && !cancelled;
        let winners = usize::from(responded)
            + usize::from(cancelled)
            + usize::from(answer.source == AnswerSource::Timeout)
            + usize::from(late_cancel);
        assert_eq!(
            winners, 1,
            "round {round}: {answer:?} responded={responded} cancelled={cancelled}"
        );
        match answer.source {
            AnswerSource::Person => {
                assert!(responded);
                wins[0] += 1;
            }
            AnswerSource::Cancelled => wins[1] += 1,
            AnswerSource::Timeout => {
                let expected = match action {
                    TimeoutAction::Deny => Decision::Deny,
                    TimeoutAction::Approve => Decision::Approve,
                };
                assert_eq!(answer.response.decision, expected);
                wins[2] += 1;
            }
            other => panic!("round {round}: unexpected source {other:?}"),
        }
        // Nothing pending, and a late answer finds nothing.
        assert!(ch.pending().is_none());
        assert!(ch.respond(&id, Decision::Deny, "late").is_err());
        let events = tally.0.lock().unwrap().clone();
        let count = |name: &str| events.iter().filter(|e| e.name() == name).count();
        assert_eq!(count("interaction_request"), 1, "round {round}");
        assert_eq!(count("interaction_response"), 1, "round {round}");
        assert!(count("interaction_acknowledged") <= 1, "round {round}");
        assert_eq!(
            count("interaction_timeout"),
            usize::from(answer.source == AnswerSource::Timeout),
            "round {round}"
        );
        let Some(InteractionEvent::Answered {
            response, source, ..
        }) = events.last()
        else {
            panic!("round {round}: the last event is not the answer: {events:?}");
        };
        assert_eq!((response, *source), (&answer.response, answer.source));
        wins[3] += 1;
    }
    assert_eq!(wins[3], u32::try_from(ROUNDS).unwrap());
    // The races really happened: each kind of outcome won some rounds.
    assert!(wins[0] > 0 && wins[1] > 0 && wins[2] > 0, "{wins:?}");
}
