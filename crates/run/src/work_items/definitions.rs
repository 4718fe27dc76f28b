//! The definitions of the five work-item tools, as the model is offered them.

use serde_json::json;

use super::{
    WORK_ITEM_ADD, WORK_ITEM_FLAG_REVISION, WORK_ITEM_LIST, WORK_ITEM_SET_ARTIFACT,
    WORK_ITEM_UPDATE,
};
use crate::message::ToolDefinition;

/// The definitions the model is offered.
pub fn definition(tool: &str) -> Option<ToolDefinition> {
    let status = json!({"type": "string", "enum": ["todo", "doing", "done", "blocked"]});
    let priority = json!({"type": "string", "enum": ["high", "normal", "low"]});
    let role = json!({"type": "string", "enum": ["deliverable", "control", "check"]});
    let (description, parameters) = match tool {
        WORK_ITEM_ADD => (
            "Add an item to the run's work-item ledger (your plan). It starts as todo. Its role: deliverable (part of what the task asks for; the default), control (your own plan or notes), or check (a review or test run).",
            json!({"type": "object",
                   "properties": {"title": {"type": "string", "description": "What is to be done."},
                                  "priority": priority, "role": role},
                   "required": ["title"], "additionalProperties": false}),
        ),
        WORK_ITEM_UPDATE => (
            "Change a work item: its status (todo, doing, done, blocked), title, priority, role, or a note (say why when blocked).",
            json!({"type": "object",
                   "properties": {"id": {"type": "string", "description": "The item's id, e.g. w1."},
                                  "status": status, "title": {"type": "string"},
                                  "priority": priority, "role": role, "note": {"type": "string"}},
                   "required": ["id"], "additionalProperties": false}),
        ),
        WORK_ITEM_LIST => (
            "List the run's work items with their status.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        WORK_ITEM_SET_ARTIFACT => (
            "Record the file a work item produced: its path, relative to the working folder. The artifacts of done deliverable items are listed in the run's result.",
            json!({"type": "object",
                   "properties": {"id": {"type": "string"},
                                  "path": {"type": "string", "description": "The file's path."}},
                   "required": ["id", "path"], "additionalProperties": false}),
        ),
        WORK_ITEM_FLAG_REVISION => (
            "Flag a work item as needing revision, with the reason; a done item becomes todo again.",
            json!({"type": "object",
                   "properties": {"id": {"type": "string"}, "reason": {"type": "string"}},
                   "required": ["id", "reason"], "additionalProperties": false}),
        ),
        _ => return None,
    };
    Some(ToolDefinition {
        name: tool.to_string(),
        description: description.to_string(),
        parameters,
    })
}
