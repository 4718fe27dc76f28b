//! Deferred tools (`[agents.deferred_tools]`): tools handled outside `lsm`. The model is
//! offered them like any other; a call of one pauses the run (status `deferred`, exit code
//! 10) with the call in its summary, and `lsm runs resume RUN --tool-result ID=FILE` gives
//! the call its result. This is how a person or another system performs an action `lsm` must
//! not perform itself. Such a tool is never executed here.

use std::collections::BTreeMap;
use std::sync::Arc;

use lsm_sandbox::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde::Deserialize;

/// One deferred tool's definition: what the model is told.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeferredToolConfig {
    /// What it does, for the model (say who performs it).
    pub description: String,
    /// JSON schema of its arguments (default: an object of any keys).
    #[serde(default = "any_object")]
    pub parameters: serde_json::Value,
}

fn any_object() -> serde_json::Value {
    serde_json::json!({"type": "object"})
}

/// A tool a run offers and never executes.
struct DeferredTool {
    name: String,
    config: DeferredToolConfig,
}

#[async_trait::async_trait]
impl Tool for DeferredTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.config.description
    }
    fn parameters(&self) -> serde_json::Value {
        self.config.parameters.clone()
    }
    fn risk(&self) -> RiskLevel {
        // What it does happens outside: treat it as the riskiest kind (never run together
        // with other calls).
        RiskLevel::Exec
    }
    fn deferred(&self) -> bool {
        true
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        // The run pauses before a deferred call reaches the sandbox; reaching here is a
        // wiring fault, answered as a refusal rather than acted on.
        Err(ToolError::Failed(format!(
            "'{}' is handled outside lsm; its result is supplied with `lsm runs resume --tool-result`",
            self.name
        )))
    }
}

/// `registry` with the deferred tools of `tools`.
pub fn with_deferred_tools(
    mut registry: ToolRegistry,
    tools: &BTreeMap<String, DeferredToolConfig>,
) -> ToolRegistry {
    for (name, config) in tools {
        registry.register(Arc::new(DeferredTool {
            name: name.clone(),
            config: config.clone(),
        }));
    }
    registry
}

/// The deferred tools of `tools`, as tools (for `lsm tools list`).
pub fn listed(tools: &BTreeMap<String, DeferredToolConfig>) -> ToolRegistry {
    with_deferred_tools(ToolRegistry::new(), tools)
}
