//! What a person running lsm should be told while work goes on — not an error, not a run
//! event: a stop asked from elsewhere, a worker's progress, a part that could not be listed.
//! This crate says it with a [`Notice`] to the front end's [`Notify`]; the front end decides
//! how it is shown (`lsm` prints its text on stderr, on one line, secrets masked).

use std::fmt;
use std::sync::Arc;

/// One thing to tell.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// Someone asked the run to stop (`lsm runs cancel`): it stops at its next step.
    CancelRequested {
        /// The run.
        run_id: String,
    },
    /// Another process took the run over: this one stops driving it.
    LeaseLost {
        /// The run.
        run_id: String,
    },
    /// A resumed run's journal repair said something worth knowing.
    ResumeWarning(String),
    /// A worker started.
    WorkerStarted {
        /// Its name as a lease owner.
        owner: String,
        /// The database it works on.
        target: String,
        /// Runs it drives at once.
        concurrency: usize,
    },
    /// A worker could not claim a run (it tries again).
    ClaimFailed(String),
    /// A worker handed an unfinished run back (it was stopped).
    HandedBack {
        /// The run.
        run_id: String,
    },
    /// A worker could not hand a run back.
    HandBackFailed {
        /// The run.
        run_id: String,
        /// Why.
        error: String,
    },
    /// A queued run's stored request cannot be read: the run is ended as failed.
    UnreadableRequest {
        /// The run.
        run_id: String,
        /// Why.
        error: String,
    },
    /// A worker starts (or resumes) a claimed run.
    Driving {
        /// The run.
        run_id: String,
        /// Its agent.
        agent: String,
        /// For a resume: the last journal line written, and the attempt.
        resuming: Option<(i64, i32)>,
    },
    /// A claimed run cannot be started: it is ended as failed.
    CannotStart {
        /// The run.
        run_id: String,
        /// Why.
        error: String,
    },
    /// A worker's run ended: its status, or `None` without records.
    Ended {
        /// The run.
        run_id: String,
        /// Its summary's status.
        status: Option<String>,
    },
    /// A worker's run failed.
    Failed {
        /// The run.
        run_id: String,
        /// Why.
        error: String,
    },
    /// The configured MCP servers could not be listed.
    McpNotListed(String),
    /// One MCP server failed to start or list its tools.
    McpServerFailed {
        /// The server.
        name: String,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::CancelRequested { run_id } => {
                write!(
                    f,
                    "run {run_id}: cancel requested; stopping at the next step"
                )
            }
            Notice::LeaseLost { run_id } => write!(
                f,
                "run {run_id}: its lease was lost (another process holds it); stopping"
            ),
            Notice::ResumeWarning(w) => write!(f, "note: {w}"),
            Notice::WorkerStarted {
                owner,
                target,
                concurrency,
            } => write!(f, "worker {owner} on {target} (concurrency {concurrency})"),
            Notice::ClaimFailed(e) => write!(f, "worker: cannot claim a run: {e}"),
            Notice::HandedBack { run_id } => write!(f, "worker: handed run {run_id} back"),
            Notice::HandBackFailed { run_id, error } => {
                write!(f, "worker: cannot hand run {run_id} back: {error}")
            }
            Notice::UnreadableRequest { run_id, error } => write!(
                f,
                "run {run_id}: its request cannot be read ({error}); ending it as failed"
            ),
            Notice::Driving {
                run_id,
                agent,
                resuming,
            } => match resuming {
                Some((last_seq, attempts)) => write!(
                    f,
                    "run {run_id} ({agent}): resuming after line {last_seq} (attempt {attempts})"
                ),
                None => write!(f, "run {run_id} ({agent}): starting"),
            },
            Notice::CannotStart { run_id, error } => {
                write!(f, "run {run_id}: cannot be started: {error}")
            }
            Notice::Ended { run_id, status } => write!(
                f,
                "run {run_id}: {}",
                status.as_deref().unwrap_or("ended without records")
            ),
            Notice::Failed { run_id, error } => write!(f, "run {run_id}: failed: {error}"),
            Notice::McpNotListed(why) => write!(f, "note: MCP servers not listed: {why}"),
            Notice::McpServerFailed { name, reason } => {
                write!(f, "note: MCP server '{name}' failed: {reason}")
            }
        }
    }
}

/// Where a front end takes notices.
pub type Notify = Arc<dyn Fn(Notice) + Send + Sync>;

/// A [`Notify`] that sends them to the log (`tracing`), for callers with nobody to tell.
pub fn to_log() -> Notify {
    Arc::new(|notice| tracing::info!("{notice}"))
}
