//! Answering a run's requests: the loop that hands each new request of a run's channel to
//! whoever answers it ([`Answerer`]), and the answer given when nobody can ([`answer_unattended`]):
//! a permission request approved when the run was started with `--yes`, anything else denied
//! at once, saying why. A front end with a person (the terminal, the TUI) brings its own
//! [`Answerer`]; headless runs (a worker's, `run_agent`'s, `run-many`'s, the conductor's
//! workers) use [`spawn_unattended`].

use std::future::Future;
use std::sync::Arc;

use lsm_interaction::{
    AnswerSource, Decision, InteractionChannel, InteractionError, InteractionRequest, RequestType,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Why nobody answers a headless run's requests.
pub const UNATTENDED: &str =
    "no one can answer: stdin is not a terminal and no front end is attached";

/// Answers one request of a run.
pub trait Answerer: Send + 'static {
    /// Answer `request` of `channel`. `pending` follows the channel's pending request (to
    /// notice it answered elsewhere or timed out while a person reads it).
    fn answer(
        &mut self,
        channel: &InteractionChannel,
        pending: &mut watch::Receiver<Option<InteractionRequest>>,
        request: &InteractionRequest,
    ) -> impl Future<Output = ()> + Send;
}

/// Hand every request posted on `channel` to `answerer`, once each, until the channel's run
/// ends (abort the task).
pub fn spawn<A: Answerer>(channel: Arc<InteractionChannel>, mut answerer: A) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut pending = channel.subscribe();
        let mut handled: Option<String> = None;
        loop {
            let request = pending.borrow_and_update().clone();
            if let Some(request) = request
                && handled.as_deref() != Some(request.request_id.as_str())
            {
                handled = Some(request.request_id.clone());
                answerer.answer(&channel, &mut pending, &request).await;
                // A newer request may have been posted meanwhile: look again before waiting.
                continue;
            }
            if pending.changed().await.is_err() {
                return;
            }
        }
    })
}

/// Answer `request` without a person: approved when `auto_approve` (`--yes`) and it asks
/// for permission, otherwise denied (fail closed), saying `why` nobody answered.
///
/// # Errors
/// When the request was answered by someone else in the meantime (a timeout, a stop).
pub fn answer_unattended(
    channel: &InteractionChannel,
    request: &InteractionRequest,
    auto_approve: bool,
    why: &str,
) -> Result<(), InteractionError> {
    let is_permission = request.request_type == RequestType::Permission;
    if is_permission && auto_approve {
        return channel.respond_as(
            &request.request_id,
            Decision::Approve,
            format!("approved automatically by --yes ({})", request.reason),
            AnswerSource::AutoApprove,
        );
    }
    let hint = if is_permission {
        " (pass --yes to approve permission requests automatically)"
    } else {
        " (set [agents.interaction] auto_continue = true to let the agent go on)"
    };
    channel.respond_as(
        &request.request_id,
        Decision::Deny,
        format!("Denied: {why}{hint}"),
        AnswerSource::Unattended,
    )
}

/// Nobody: every request answered by [`answer_unattended`].
#[derive(Debug, Clone, Copy)]
pub struct Unattended {
    /// `--yes`: approve permission requests.
    pub auto_approve: bool,
}

impl Answerer for Unattended {
    async fn answer(
        &mut self,
        channel: &InteractionChannel,
        _pending: &mut watch::Receiver<Option<InteractionRequest>>,
        request: &InteractionRequest,
    ) {
        if let Err(e) = answer_unattended(channel, request, self.auto_approve, UNATTENDED) {
            // Answered by someone else in the meantime (a timeout, a stop): nothing to do.
            tracing::debug!("request {} was not answered here: {e}", request.request_id);
        }
    }
}

/// Answer `channel`'s requests without a person until its run ends (abort the task).
pub fn spawn_unattended(channel: Arc<InteractionChannel>, auto_approve: bool) -> JoinHandle<()> {
    spawn(channel, Unattended { auto_approve })
}
