//! Why the channel refused a call.

/// A refused post, acknowledgement or answer. Each message says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InteractionError {
    /// A request is already waiting; only one may be pending at a time. Answer (or cancel)
    /// the pending one first.
    #[error(
        "another request ({pending}) is already waiting for an answer; only one request may be pending at a time — answer or cancel it first"
    )]
    Busy {
        /// The id of the request that is waiting.
        pending: String,
    },
    /// The channel was shut down; nothing can be asked any more. Start a new run.
    #[error("the interaction channel is shut down ({reason}); no request can be posted")]
    ShutDown {
        /// Why it was shut down.
        reason: String,
    },
    /// The id does not name the pending request (it was answered, timed out, cancelled, or
    /// never existed). Look at the pending request again and use its id.
    #[error("request {request_id} is not pending (already answered, timed out or unknown)")]
    NotPending {
        /// The id given.
        request_id: String,
    },
    /// The decision does not answer this kind of request (a reply to a permission request,
    /// approve_session for a clarification). Use one the request type takes.
    #[error("decision '{decision}' does not answer a {request_type} request; {hint}")]
    InvalidDecision {
        /// The decision given.
        decision: String,
        /// The pending request's type.
        request_type: String,
        /// What would answer it.
        hint: &'static str,
    },
    /// A setting is out of range. Fix it in `[agents.interaction]`.
    #[error("invalid [agents.interaction] {key}: {message}")]
    InvalidConfig {
        /// The key.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The channel dropped the request without answering it. This is a bug; the waiting call
    /// is treated as denied.
    #[error("the request was dropped without an answer")]
    Lost,
}
