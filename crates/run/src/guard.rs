//! [`ToolCallGuard`]: a check of a tool call's arguments that the core runs after the
//! allowlist and the phase's `tool_names`, before the driver hands the call to the sandbox.

use serde_json::Value;

/// Checks a tool call's arguments before the sandbox runs it — for example a knowledge-base
/// mode an agent composed, against the allowed retrieval profiles and URL access (seed 002
/// §13.2). A refusal goes back to the model as the tool's error result and is recorded as a
/// denial; the tool does not run.
pub trait ToolCallGuard: Send + Sync {
    /// `Err(refusal)` refuses the call of `tool` with `arguments`; other tools pass.
    ///
    /// # Errors
    /// Why the call is refused, in words the model can act on.
    fn check(&self, tool: &str, arguments: &Value) -> Result<(), GuardRefusal>;
}

/// A [`ToolCallGuard`]'s refusal: the reason, as the model is told it (the call's error
/// result) and as the denial is recorded. Say what to change so that the next call passes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct GuardRefusal {
    /// Why the call is refused.
    pub reason: String,
}

impl GuardRefusal {
    /// A refusal for `reason`.
    pub fn new(reason: impl Into<String>) -> Self {
        GuardRefusal {
            reason: reason.into(),
        }
    }
}
