//! Human-in-the-loop requests: permission, clarification, feedback and confirmation, with a
//! two-phase timeout (a request a person is reading does not time out under them).
//!
//! This crate holds the request and response vocabulary today; the channel itself (one
//! pending request at a time, acknowledgement, event-driven waiting) is built on top of it.
//!
//! # What this crate must never do
//!
//! - Depend on any other `lsm-*` crate except the sandbox's permission trait it implements.
//! - Answer a request twice, or lose one: every request ends in exactly one decision.

use serde::{Deserialize, Serialize};

/// What kind of question a request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestType {
    /// May a tool run?
    Permission,
    /// The agent needs information.
    Clarification,
    /// The agent wants an opinion on its work.
    Feedback,
    /// The agent wants a yes/no before going on.
    Confirmation,
}

/// How a person answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Yes, this once.
    Approve,
    /// No.
    Deny,
    /// Yes, for this tool, for the rest of the run.
    ApproveSession,
    /// A free-text answer.
    Reply,
}
