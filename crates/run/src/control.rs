//! Control tools: tools the model calls to steer the run itself, answered by the pure core and
//! never run by the sandbox (they change nothing outside the run's state).
//!
//! - `block{reason}` — the model cannot proceed: the phase ends `blocked` (offered with every
//!   call unless `[agents] offer_block_tool = false`).
//! - `work_complete{summary}` — the model declares the task complete; the completion checks
//!   then decide (offered in a phase that completes the task under the `strict_automation`
//!   stop mode, which requires it, or when the agent's allowlist names it).
//! - `complete{summary, findings, learnings, escalations}` — the model is done and reports
//!   what it found (seed 003's `Complete` decision and `WorkerTurnReport`): the phase ends
//!   `done` (the completion checks permitting) with the report recorded; it also counts as
//!   the `work_complete` declaration. Offered with every call unless `[agents]
//!   offer_complete_tool = false`.
//! - the work-item tools ([`crate::work_items`]) — offered when `[agents] work_items = true`
//!   or the agent's allowlist names them.
//!
//! Hooks are not asked about control tools: they are the harness's own vocabulary, not
//! actions on the world.

use std::sync::{Arc, LazyLock};

use crate::message::ToolDefinition;
use serde_json::json;

use crate::work_items::{WORK_ITEM_TOOLS, definition};

/// The reserved control tool: the model calls `block{reason}` to say it cannot proceed.
pub const BLOCK_TOOL: &str = "block";

/// The control tool with which the model declares the task complete.
pub const WORK_COMPLETE_TOOL: &str = "work_complete";

/// The control tool with which the model ends its work with a report.
pub const COMPLETE_TOOL: &str = "complete";

/// Whether `name` is a control tool.
pub fn is_control_tool(name: &str) -> bool {
    name == BLOCK_TOOL
        || name == WORK_COMPLETE_TOOL
        || name == COMPLETE_TOOL
        || WORK_ITEM_TOOLS.contains(&name)
}

/// Every control tool's name (for listings).
pub fn control_tool_names() -> Vec<&'static str> {
    let mut names = vec![BLOCK_TOOL, COMPLETE_TOOL, WORK_COMPLETE_TOOL];
    names.extend(WORK_ITEM_TOOLS);
    names
}

/// A control tool's definition, made once and shared by every request that offers it.
pub(crate) fn shared_control_tool_definition(name: &str) -> Option<Arc<ToolDefinition>> {
    static SHARED: LazyLock<Vec<Arc<ToolDefinition>>> = LazyLock::new(|| {
        control_tool_names()
            .into_iter()
            .filter_map(control_tool_definition)
            .map(Arc::new)
            .collect()
    });
    SHARED.iter().find(|t| t.name == name).cloned()
}

/// A control tool's definition.
pub fn control_tool_definition(name: &str) -> Option<ToolDefinition> {
    match name {
        BLOCK_TOOL => Some(ToolDefinition {
            name: BLOCK_TOOL.to_string(),
            description: "Call this when you cannot proceed with the task at all (missing \
                          information, a contradiction, no permitted way forward). Give the reason."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {"reason": {"type": "string", "description": "Why you cannot proceed."}},
                "required": ["reason"],
                "additionalProperties": false
            }),
        }),
        WORK_COMPLETE_TOOL => Some(ToolDefinition {
            name: WORK_COMPLETE_TOOL.to_string(),
            description: "Call this once the task is fully done, with a short summary of what \
                          you did. The harness then checks the task's completion conditions; if \
                          one is not met you are told which, and continue."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {"summary": {"type": "string", "description": "What was done."}},
                "required": ["summary"],
                "additionalProperties": false
            }),
        }),
        COMPLETE_TOOL => Some(ToolDefinition {
            name: COMPLETE_TOOL.to_string(),
            description: "Call this when your work is done, to end it with a report: a summary, \
                          the findings (each a claim, your confidence from 0 to 1, and the \
                          evidence: call ids of your tool results, or the file paths, URLs or \
                          source ids they returned), what you learned, and what needs a \
                          decision above you."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "summary": {"type": "string", "description": "What was done."},
                    "findings": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "claim": {"type": "string"},
                            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                            "evidence_refs": {"type": "array", "items": {"type": "string"}}
                        },
                        "required": ["claim"],
                        "additionalProperties": false
                    }},
                    "learnings": {"type": "array", "items": {"type": "string"}},
                    "escalations": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["summary"],
                "additionalProperties": false
            }),
        }),
        other => definition(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_tool_has_a_definition_under_its_name() {
        for name in control_tool_names() {
            assert!(is_control_tool(name));
            assert_eq!(control_tool_definition(name).unwrap().name, name);
        }
        assert!(!is_control_tool("write_file"));
        assert!(control_tool_definition("write_file").is_none());
    }
}
