//! [`HarnessError`]: what can go wrong in the harness itself (as opposed to a tool or the
//! model, whose failures are values fed back to the model).

use lsm_run::event::UnknownEvent;

/// A failure of the harness: its records, or a model call that ends the phase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HarnessError {
    /// The run's log folder cannot be created.
    #[error(
        "cannot create the run's log folder {path}: {reason}; check that the agents folder is writable"
    )]
    CreateFolder {
        /// The folder.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The transcript cannot be opened.
    #[error("cannot open the transcript {path}: {reason}")]
    OpenTranscript {
        /// The file.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// A line cannot be appended to (or flushed to) the transcript.
    #[error("cannot append to the transcript {path}: {reason}")]
    Append {
        /// The file.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// An event or the summary cannot be serialized.
    #[error("cannot serialize {what}: {reason}")]
    Serialize {
        /// What.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// The run summary cannot be written.
    #[error("cannot write the run summary {path}: {reason}")]
    Summary {
        /// The file.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The transcript cannot be read back.
    #[error("cannot read the transcript {path}: {reason}")]
    ReadJournal {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A model call failed after the provider's retries; the phase ends as `error`.
    #[error("LLM call failed: {0}")]
    Llm(String),
    /// Another live process drives the run.
    #[error(
        "the run in {run_dir} is being driven by process {}; wait for it to end or stop it, then resume",
        pid.map_or_else(|| "(unknown pid)".to_string(), |p| p.to_string())
    )]
    Locked {
        /// The run folder.
        run_dir: String,
        /// The owner's pid, when its lock file says.
        pid: Option<u32>,
    },
    /// Another process holds the run's lease in a shared store (a worker on this machine or
    /// another): wait for it to end, or for its lease to run out if it died.
    #[error("run {run_id} is held by {holder}; wait for it to end or for its lease to run out")]
    Leased {
        /// The run.
        run_id: String,
        /// Who holds it, and until when.
        holder: String,
    },
    /// The run's lock file cannot be used.
    #[error("cannot lock the run with {path}: {reason}")]
    Lock {
        /// The lock file.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The run cannot be resumed (nothing recorded, already finished, …).
    #[error("cannot resume the run in {run_dir}: {reason}")]
    Resume {
        /// The run folder.
        run_dir: String,
        /// Why.
        reason: String,
    },
    /// The project instructions cannot be read (the run does not start).
    #[error(transparent)]
    Context(#[from] crate::context::ContextError),
    /// An event given by name is not one of the schema.
    #[error(transparent)]
    UnknownEvent(#[from] UnknownEvent),
}
