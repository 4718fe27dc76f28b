//! Work items: the run's ledger of planned work, kept by the model through five control tools
//! (seed 004 §4.1) and part of [`crate::RunState`].
//!
//! The tools never reach the sandbox: a call changes nothing outside the run, so the pure core
//! answers it itself ([`apply_call`]) and records the change as a `work_item_changed` event
//! carrying the whole item after the change; the fold upserts it by id. While items are open,
//! one compact reminder of the ledger ([`reminder`]) is appended to each model request — in
//! one place, never also in the system prompt (seed 004 §6.5) — and not kept in the history.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::message::ToolDefinition;

/// Adds an item.
pub const WORK_ITEM_ADD: &str = "work_item_add";
/// Changes an item's status, title, priority or note.
pub const WORK_ITEM_UPDATE: &str = "work_item_update";
/// Lists the items.
pub const WORK_ITEM_LIST: &str = "work_item_list";
/// Records the file an item produced.
pub const WORK_ITEM_SET_ARTIFACT: &str = "work_item_set_artifact";
/// Flags an item for revision.
pub const WORK_ITEM_FLAG_REVISION: &str = "work_item_flag_revision";

/// The five work-item tools.
pub const WORK_ITEM_TOOLS: [&str; 5] = [
    WORK_ITEM_ADD,
    WORK_ITEM_UPDATE,
    WORK_ITEM_LIST,
    WORK_ITEM_SET_ARTIFACT,
    WORK_ITEM_FLAG_REVISION,
];

/// Most items a run's ledger holds.
pub const MAX_ITEMS: usize = 100;
/// Longest title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;
/// Longest note, reason or artifact path, in characters.
pub const MAX_NOTE_CHARS: usize = 500;
/// Most items the reminder lists.
const REMINDER_ITEMS: usize = 30;

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkStatus {
    /// Not started.
    Todo,
    /// Under way.
    Doing,
    /// Finished.
    Done,
    /// Cannot be done (the note says why).
    Blocked,
}

impl WorkStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkStatus::Todo => "todo",
            WorkStatus::Doing => "doing",
            WorkStatus::Done => "done",
            WorkStatus::Blocked => "blocked",
        }
    }
}

/// How urgent an item is.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// First.
    High,
    /// The default.
    #[default]
    Normal,
    /// Last.
    Low,
}

/// One item of the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkItem {
    /// `w1`, `w2`, … in the order added.
    pub id: String,
    /// What is to be done.
    pub title: String,
    /// Where it stands.
    pub status: WorkStatus,
    /// How urgent.
    #[serde(default)]
    pub priority: Priority,
    /// The file it produced, if recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
    /// Flagged for revision (cleared when it is marked done again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_revision: bool,
    /// The last note: progress, why it is blocked, or what to revise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl WorkItem {
    /// Still to be worked on: not done, or done but flagged for revision.
    pub fn is_open(&self) -> bool {
        self.needs_revision || matches!(self.status, WorkStatus::Todo | WorkStatus::Doing)
    }

    /// Finished: done and not flagged.
    pub fn is_done(&self) -> bool {
        self.status == WorkStatus::Done && !self.needs_revision
    }

    /// One line: `w2 [doing, high] Write the summary (artifact: summary.md)`.
    pub fn line(&self) -> String {
        let mut tags = vec![self.status.as_str()];
        if self.priority != Priority::Normal {
            tags.push(if self.priority == Priority::High {
                "high"
            } else {
                "low"
            });
        }
        if self.needs_revision {
            tags.push("needs revision");
        }
        let mut line = format!("{} [{}] {}", self.id, tags.join(", "), self.title);
        if let Some(a) = &self.artifact {
            line.push_str(&format!(" (artifact: {a})"));
        }
        if let Some(n) = &self.note {
            line.push_str(&format!(" — {n}"));
        }
        line
    }
}

/// What a work-item call did to the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkItemAction {
    /// A new item.
    Added,
    /// Status, title, priority or note changed.
    Updated,
    /// Its artifact was recorded.
    ArtifactSet,
    /// It was flagged for revision.
    RevisionFlagged,
}

/// The outcome of one work-item call.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The change, with the item as it is after it (`None` for a listing).
    pub change: Option<(WorkItemAction, WorkItem)>,
    /// What the model is told (JSON).
    pub result: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddArgs {
    title: String,
    #[serde(default)]
    priority: Option<Priority>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    id: String,
    #[serde(default)]
    status: Option<WorkStatus>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    priority: Option<Priority>,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArtifactArgs {
    id: String,
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlagArgs {
    id: String,
    reason: String,
}

fn args<T: serde::de::DeserializeOwned>(tool: &str, arguments: &Value) -> Result<T, String> {
    let value = match arguments {
        Value::Null => json!({}),
        other => other.clone(),
    };
    serde_json::from_value(value).map_err(|e| format!("invalid arguments for {tool}: {e}"))
}

fn bounded(what: &str, text: &str, max: usize) -> Result<String, String> {
    let t = text.trim();
    if t.is_empty() {
        Err(format!("{what} must not be empty"))
    } else if t.chars().count() > max {
        Err(format!("{what} is longer than {max} characters"))
    } else {
        Ok(t.to_string())
    }
}

fn find<'a>(items: &'a [WorkItem], id: &str) -> Result<&'a WorkItem, String> {
    items.iter().find(|i| i.id == id).ok_or_else(|| {
        let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        if ids.is_empty() {
            format!(
                "there is no work item '{id}': the ledger is empty (add one with {WORK_ITEM_ADD})"
            )
        } else {
            format!(
                "there is no work item '{id}'; the items are {}",
                ids.join(", ")
            )
        }
    })
}

fn changed(action: WorkItemAction, item: WorkItem) -> Applied {
    let result = json!({"ok": true, "action": action, "item": item}).to_string();
    Applied {
        change: Some((action, item)),
        result,
    }
}

/// Carry out the call of work-item tool `tool` with `arguments` on the ledger `items`
/// (unchanged: the change is returned, for the fold to apply).
///
/// # Errors
/// Arguments that do not fit the tool, an unknown id, a full ledger, an empty or overlong
/// text: the message the model gets.
pub fn apply_call(items: &[WorkItem], tool: &str, arguments: &Value) -> Result<Applied, String> {
    match tool {
        WORK_ITEM_ADD => {
            let a: AddArgs = args(tool, arguments)?;
            if items.len() >= MAX_ITEMS {
                return Err(format!(
                    "the ledger holds {MAX_ITEMS} items, its limit; update existing ones instead"
                ));
            }
            let item = WorkItem {
                id: format!("w{}", items.len() + 1),
                title: bounded("title", &a.title, MAX_TITLE_CHARS)?,
                status: WorkStatus::Todo,
                priority: a.priority.unwrap_or_default(),
                artifact: None,
                needs_revision: false,
                note: None,
            };
            Ok(changed(WorkItemAction::Added, item))
        }
        WORK_ITEM_UPDATE => {
            let a: UpdateArgs = args(tool, arguments)?;
            let mut item = find(items, &a.id)?.clone();
            if a.status.is_none() && a.title.is_none() && a.priority.is_none() && a.note.is_none() {
                return Err(format!(
                    "{tool} needs at least one of status, title, priority, note"
                ));
            }
            if let Some(status) = a.status {
                item.status = status;
                if status == WorkStatus::Done {
                    item.needs_revision = false;
                }
            }
            if let Some(title) = a.title {
                item.title = bounded("title", &title, MAX_TITLE_CHARS)?;
            }
            if let Some(priority) = a.priority {
                item.priority = priority;
            }
            if let Some(note) = a.note {
                item.note = Some(bounded("note", &note, MAX_NOTE_CHARS)?);
            }
            Ok(changed(WorkItemAction::Updated, item))
        }
        WORK_ITEM_LIST => {
            let _: ListArgs = args(tool, arguments)?;
            let open = items.iter().filter(|i| i.is_open()).count();
            Ok(Applied {
                change: None,
                result: json!({"items": items, "open": open, "total": items.len()}).to_string(),
            })
        }
        WORK_ITEM_SET_ARTIFACT => {
            let a: ArtifactArgs = args(tool, arguments)?;
            let mut item = find(items, &a.id)?.clone();
            item.artifact = Some(bounded("path", &a.path, MAX_NOTE_CHARS)?);
            Ok(changed(WorkItemAction::ArtifactSet, item))
        }
        WORK_ITEM_FLAG_REVISION => {
            let a: FlagArgs = args(tool, arguments)?;
            let mut item = find(items, &a.id)?.clone();
            item.note = Some(bounded("reason", &a.reason, MAX_NOTE_CHARS)?);
            item.needs_revision = true;
            if item.status == WorkStatus::Done {
                item.status = WorkStatus::Todo;
            }
            Ok(changed(WorkItemAction::RevisionFlagged, item))
        }
        other => Err(format!("'{other}' is not a work-item tool")),
    }
}

/// Put `item` in the ledger: replace the item of its id, or add it.
pub fn upsert(items: &mut Vec<WorkItem>, item: &WorkItem) {
    match items.iter_mut().find(|i| i.id == item.id) {
        Some(existing) => existing.clone_from(item),
        None => items.push(item.clone()),
    }
}

/// The reminder appended to a model request while items are open: the ledger's current
/// state, most urgent open items first. `None` when nothing is open.
pub fn reminder(items: &[WorkItem]) -> Option<String> {
    let open: Vec<&WorkItem> = items.iter().filter(|i| i.is_open()).collect();
    if open.is_empty() {
        return None;
    }
    let mut shown: Vec<&WorkItem> = items.iter().collect();
    // Open items first, by priority; then the settled ones, in ledger order.
    shown.sort_by_key(|i| (!i.is_open(), i.is_open().then_some(i.priority)));
    let mut text = format!(
        "[work items: {} open of {} — the run's current plan, kept by the harness]\n",
        open.len(),
        items.len()
    );
    for item in shown.iter().take(REMINDER_ITEMS) {
        text.push_str("- ");
        text.push_str(&item.line());
        text.push('\n');
    }
    if shown.len() > REMINDER_ITEMS {
        text.push_str(&format!(
            "- … {} more ({WORK_ITEM_LIST} shows all)\n",
            shown.len() - REMINDER_ITEMS
        ));
    }
    text.push_str(&format!(
        "Keep them current with {WORK_ITEM_UPDATE}; mark an item done when it is finished."
    ));
    Some(text)
}

/// The items that keep a phase that completes the task from stopping: still to be worked on
/// (todo, doing, or flagged for revision), one line each. A blocked item is settled: the
/// model said why it cannot be done, as the objection asks it to; it stays in the ledger.
pub fn unsettled(items: &[WorkItem]) -> Vec<String> {
    items
        .iter()
        .filter(|i| i.is_open())
        .map(|i| format!("work item {}", i.line()))
        .collect()
}

/// The items that are not done (a blocked one included), one line each: what the
/// `work_items_done` contract predicate requires.
pub fn unfinished(items: &[WorkItem]) -> Vec<String> {
    items
        .iter()
        .filter(|i| !i.is_done())
        .map(|i| format!("work item {}", i.line()))
        .collect()
}

/// The definitions the model is offered.
pub fn definition(tool: &str) -> Option<ToolDefinition> {
    let status = json!({"type": "string", "enum": ["todo", "doing", "done", "blocked"]});
    let priority = json!({"type": "string", "enum": ["high", "normal", "low"]});
    let (description, parameters) = match tool {
        WORK_ITEM_ADD => (
            "Add an item to the run's work-item ledger (your plan). It starts as todo.",
            json!({"type": "object",
                   "properties": {"title": {"type": "string", "description": "What is to be done."},
                                  "priority": priority},
                   "required": ["title"], "additionalProperties": false}),
        ),
        WORK_ITEM_UPDATE => (
            "Change a work item: its status (todo, doing, done, blocked), title, priority, or a note (say why when blocked).",
            json!({"type": "object",
                   "properties": {"id": {"type": "string", "description": "The item's id, e.g. w1."},
                                  "status": status, "title": {"type": "string"},
                                  "priority": priority, "note": {"type": "string"}},
                   "required": ["id"], "additionalProperties": false}),
        ),
        WORK_ITEM_LIST => (
            "List the run's work items with their status.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        WORK_ITEM_SET_ARTIFACT => (
            "Record the file a work item produced.",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(items: &mut Vec<WorkItem>, tool: &str, args: Value) -> Result<Applied, String> {
        let applied = apply_call(items, tool, &args)?;
        if let Some((_, item)) = &applied.change {
            upsert(items, item);
        }
        Ok(applied)
    }

    #[test]
    fn items_are_added_updated_flagged_and_listed() {
        let mut items = Vec::new();
        apply(&mut items, WORK_ITEM_ADD, json!({"title": "Read notes.md"})).unwrap();
        apply(
            &mut items,
            WORK_ITEM_ADD,
            json!({"title": " Write summary.md ", "priority": "high"}),
        )
        .unwrap();
        assert_eq!(items[1].id, "w2");
        assert_eq!(items[1].title, "Write summary.md");
        assert_eq!(items[1].priority, Priority::High);
        apply(
            &mut items,
            WORK_ITEM_UPDATE,
            json!({"id": "w1", "status": "done"}),
        )
        .unwrap();
        apply(
            &mut items,
            WORK_ITEM_SET_ARTIFACT,
            json!({"id": "w2", "path": "summary.md"}),
        )
        .unwrap();
        assert_eq!(items[1].artifact.as_deref(), Some("summary.md"));
        apply(
            &mut items,
            WORK_ITEM_UPDATE,
            json!({"id": "w2", "status": "done"}),
        )
        .unwrap();
        assert!(items.iter().all(WorkItem::is_done));
        assert!(reminder(&items).is_none(), "nothing open, no reminder");
        let flagged = apply(
            &mut items,
            WORK_ITEM_FLAG_REVISION,
            json!({"id": "w2", "reason": "too long"}),
        )
        .unwrap();
        assert_eq!(
            flagged.change.map(|c| c.0),
            Some(WorkItemAction::RevisionFlagged)
        );
        assert_eq!(items[1].status, WorkStatus::Todo);
        assert!(items[1].needs_revision && items[1].is_open());
        let listed = apply(&mut items, WORK_ITEM_LIST, Value::Null).unwrap();
        assert!(listed.change.is_none());
        let v: Value = serde_json::from_str(&listed.result).unwrap();
        assert_eq!(
            (v["open"].clone(), v["total"].clone()),
            (json!(1), json!(2))
        );
        let r = reminder(&items).unwrap();
        assert!(r.starts_with("[work items: 1 open of 2"), "{r}");
        assert!(
            r.find("w2").unwrap() < r.find("w1").unwrap(),
            "open first: {r}"
        );
        assert_eq!(unfinished(&items).len(), 1);
        // Marking it done again clears the flag.
        apply(
            &mut items,
            WORK_ITEM_UPDATE,
            json!({"id": "w2", "status": "done"}),
        )
        .unwrap();
        assert!(!items[1].needs_revision);
    }

    #[test]
    fn bad_calls_are_clear_errors_and_change_nothing() {
        let mut items = Vec::new();
        let e = apply(&mut items, WORK_ITEM_UPDATE, json!({"id": "w9"})).unwrap_err();
        assert!(e.contains("ledger is empty"), "{e}");
        apply(&mut items, WORK_ITEM_ADD, json!({"title": "x"})).unwrap();
        let e = apply(
            &mut items,
            WORK_ITEM_UPDATE,
            json!({"id": "w9", "status": "done"}),
        )
        .unwrap_err();
        assert!(e.contains("the items are w1"), "{e}");
        let e = apply(&mut items, WORK_ITEM_UPDATE, json!({"id": "w1"})).unwrap_err();
        assert!(e.contains("at least one of"), "{e}");
        let e = apply(&mut items, WORK_ITEM_ADD, json!({"title": "  "})).unwrap_err();
        assert!(e.contains("must not be empty"), "{e}");
        let e = apply(&mut items, WORK_ITEM_ADD, json!({"name": "x"})).unwrap_err();
        assert!(e.contains("invalid arguments for work_item_add"), "{e}");
        let e = apply(
            &mut items,
            WORK_ITEM_UPDATE,
            json!({"id": "w1", "status": "finished"}),
        )
        .unwrap_err();
        assert!(e.contains("finished"), "{e}");
        let long = "x".repeat(MAX_TITLE_CHARS + 1);
        assert!(apply(&mut items, WORK_ITEM_ADD, json!({"title": long})).is_err());
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].status, WorkStatus::Todo);
    }

    #[test]
    fn the_ledger_is_bounded() {
        let mut items = Vec::new();
        for k in 0..MAX_ITEMS {
            apply(&mut items, WORK_ITEM_ADD, json!({"title": format!("t{k}")})).unwrap();
        }
        let e = apply(&mut items, WORK_ITEM_ADD, json!({"title": "one more"})).unwrap_err();
        assert!(e.contains("limit"), "{e}");
        let r = reminder(&items).unwrap();
        assert!(r.contains("… 70 more"), "{r}");
    }

    #[test]
    fn every_tool_has_a_definition_whose_required_arguments_exist() {
        for tool in WORK_ITEM_TOOLS {
            let d = definition(tool).unwrap();
            let props = d.parameters["properties"].as_object().unwrap();
            for r in d.parameters["required"].as_array().into_iter().flatten() {
                assert!(props.contains_key(r.as_str().unwrap()), "{tool}: {r}");
            }
        }
        assert!(definition("write_file").is_none());
    }
}
