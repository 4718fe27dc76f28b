//! [`Noop`]: a read-only tool that does nothing and says so.

use lsm_sandbox::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};

/// A tool named `noop` that takes an optional integer `n` and answers `ok`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Noop;

#[async_trait::async_trait]
impl Tool for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn description(&self) -> &str {
        "Does nothing."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}},
               "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

/// A sandbox confined to `dir` holding only [`Noop`], with a rate limit no benchmark
/// reaches and no one to ask.
///
/// # Errors
/// When the sandbox refuses `dir` (it does not exist).
pub fn noop_sandbox(
    dir: &std::path::Path,
) -> Result<std::sync::Arc<lsm_sandbox::Sandbox>, lsm_sandbox::SandboxConfigError> {
    let mut config = lsm_sandbox::SandboxConfig::confined_to(dir);
    config.rate_limit = lsm_sandbox::RateLimit {
        calls: u32::MAX,
        per_seconds: 1,
    };
    let registry = lsm_sandbox::ToolRegistry::new().with(std::sync::Arc::new(Noop));
    lsm_sandbox::Sandbox::new(config, registry, None).map(std::sync::Arc::new)
}
