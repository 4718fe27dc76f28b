//! Human-in-the-loop requests: permission, clarification, feedback and confirmation, with a
//! two-phase timeout — a request a person is reading does not time out under them.
//!
//! An [`InteractionChannel`] belongs to one run. The run's sandbox asks it for permission
//! (it implements [`lsm_sandbox::PermissionAsker`]); the [`AskUserTool`] asks it
//! clarifications. Front ends (the CLI prompt, the TUI, the runtime manager) learn of a
//! request through [`InteractionChannel::subscribe`], call
//! [`InteractionChannel::acknowledge_request`] when they show it, and answer with
//! [`InteractionChannel::respond`].
//!
//! - One request is pending at a time; posting a second is refused with
//!   [`InteractionError::Busy`].
//! - An unacknowledged request waits up to `timeout_seconds`; once acknowledged, up to
//!   `acknowledged_timeout_seconds` (0: forever). A timeout answers per `timeout_action`
//!   (a denial, or an approval that says it was automatic).
//! - `approve_session` approves that tool at once for the rest of the run.
//! - [`InteractionChannel::cancel_pending`] and [`InteractionChannel::shutdown`] release the
//!   waiter with a denial; nothing can be posted after a shutdown.
//! - Every request, acknowledgement, timeout and answer goes to the channel's
//!   [`InteractionObserver`] (the run's transcript), in order.
//!
//! # What this crate must never do
//!
//! - Depend on any other `lsm-*` crate except the sandbox, whose permission trait and tool
//!   trait it implements.
//! - Answer a request twice, or lose one: every request ends in exactly one answer.
//! - Poll or busy-wait: waiters sleep until an answer, an acknowledgement or a deadline.

mod answers;
mod ask_user;
mod channel;
mod config;
mod error;
mod events;
mod types;

pub use answers::permission_decision;
pub use ask_user::{ASK_USER_TOOL, AskUserTool};
pub use channel::{AUTO_CONTINUE_REPLY, InteractionChannel};
pub use config::{InteractionConfig, TimeoutAction, Timeouts};
pub use error::InteractionError;
pub use events::{InteractionEvent, InteractionObserver};
pub use types::{
    Answer, AnswerSource, Decision, InteractionRequest, InteractionResponse, PendingView,
    RequestType, new_request_id,
};
