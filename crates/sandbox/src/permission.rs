//! Asking a person whether a tool call may run.

use serde::{Deserialize, Serialize};

use crate::RiskLevel;

/// A question to a person: may this call run?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionRequest {
    /// The tool.
    pub tool_name: String,
    /// Its risk level.
    pub risk_level: RiskLevel,
    /// Why permission is needed (which setting asked for it).
    pub reason: String,
    /// The arguments as sorted JSON, at most 500 characters.
    pub args_summary: String,
    /// What the call would change, when the tool can say (a unified diff of the file a
    /// `write_file`, `edit_file` or `append_file` call would write), for the person to judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

/// A person's (or a policy's) answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionDecision {
    /// Whether the call may run.
    pub allowed: bool,
    /// Why (shown to the model on denial, recorded in the run summary).
    pub reason: String,
}

impl PermissionDecision {
    /// Allow.
    pub fn allow(reason: impl Into<String>) -> Self {
        PermissionDecision {
            allowed: true,
            reason: reason.into(),
        }
    }
    /// Deny.
    pub fn deny(reason: impl Into<String>) -> Self {
        PermissionDecision {
            allowed: false,
            reason: reason.into(),
        }
    }
}

/// Something that can ask a person (the interaction channel, a CLI prompt, a test).
#[async_trait::async_trait]
pub trait PermissionAsker: Send + Sync {
    /// Ask and wait for the answer. Implementations decide how long to wait and what a
    /// timeout means; they must always return a decision.
    async fn ask(&self, request: PermissionRequest) -> PermissionDecision;
}

/// A permission or policy decision about one call, for the run's approvals/denials record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionEvent {
    /// The tool.
    pub tool_name: String,
    /// Whether the call was let through.
    pub allowed: bool,
    /// Why.
    pub reason: String,
}
