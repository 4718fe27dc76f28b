//! [`apply_call`]: what one call of a work-item tool does to the ledger, or why it does
//! nothing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::artifact::{self, ArtifactError, clean_artifact_path};
use super::{
    MAX_ITEMS, MAX_NOTE_CHARS, MAX_TITLE_CHARS, Priority, Role, WORK_ITEM_ADD,
    WORK_ITEM_FLAG_REVISION, WORK_ITEM_LIST, WORK_ITEM_SET_ARTIFACT, WORK_ITEM_UPDATE, WorkItem,
    WorkStatus,
};

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
    #[serde(default)]
    role: Option<Role>,
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
    role: Option<Role>,
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

/// Why a work-item call changed nothing. The message is what the model is told: it says
/// what to correct.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkItemError {
    /// The arguments do not fit the tool's schema.
    #[error("invalid arguments for {tool}: {message}")]
    InvalidArguments {
        /// The work-item tool.
        tool: String,
        /// What the JSON reader said.
        message: String,
    },
    /// A text argument is empty.
    #[error("{what} must not be empty")]
    Empty {
        /// The argument.
        what: &'static str,
    },
    /// A text argument is too long.
    #[error("{what} is longer than {max} characters")]
    TooLong {
        /// The argument.
        what: &'static str,
        /// Its limit.
        max: usize,
    },
    /// No item has the id, and the ledger is empty.
    #[error("there is no work item '{id}': the ledger is empty (add one with {WORK_ITEM_ADD})")]
    NoItems {
        /// The id asked for.
        id: String,
    },
    /// No item has the id.
    #[error("there is no work item '{id}'; the items are {ids}")]
    UnknownId {
        /// The id asked for.
        id: String,
        /// The ids there are, comma-separated.
        ids: String,
    },
    /// The ledger holds [`MAX_ITEMS`] items.
    #[error("the ledger holds {MAX_ITEMS} items, its limit; update existing ones instead")]
    Full,
    /// `work_item_update` changed nothing.
    #[error("{tool} needs at least one of status, title, priority, role, note")]
    NothingToUpdate {
        /// The tool.
        tool: String,
    },
    /// The artifact path cannot be recorded.
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    /// The tool is not one of the five.
    #[error("'{0}' is not a work-item tool")]
    NotAWorkItemTool(String),
}

fn args<T: serde::de::DeserializeOwned>(tool: &str, arguments: &Value) -> Result<T, WorkItemError> {
    let value = match arguments {
        Value::Null => json!({}),
        other => other.clone(),
    };
    serde_json::from_value(value).map_err(|e| WorkItemError::InvalidArguments {
        tool: tool.to_string(),
        message: e.to_string(),
    })
}

fn bounded(what: &'static str, text: &str, max: usize) -> Result<String, WorkItemError> {
    let t = text.trim();
    if t.is_empty() {
        Err(WorkItemError::Empty { what })
    } else if t.chars().count() > max {
        Err(WorkItemError::TooLong { what, max })
    } else {
        Ok(t.to_string())
    }
}

fn find<'a>(items: &'a [WorkItem], id: &str) -> Result<&'a WorkItem, WorkItemError> {
    items.iter().find(|i| i.id == id).ok_or_else(|| {
        let ids: Vec<&str> = items.iter().map(|i| i.id.as_str()).collect();
        if ids.is_empty() {
            WorkItemError::NoItems { id: id.to_string() }
        } else {
            WorkItemError::UnknownId {
                id: id.to_string(),
                ids: ids.join(", "),
            }
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
pub fn apply_call(
    items: &[WorkItem],
    tool: &str,
    arguments: &Value,
) -> Result<Applied, WorkItemError> {
    match tool {
        WORK_ITEM_ADD => {
            let a: AddArgs = args(tool, arguments)?;
            if items.len() >= MAX_ITEMS {
                return Err(WorkItemError::Full);
            }
            let item = WorkItem {
                id: format!("w{}", items.len() + 1),
                title: bounded("title", &a.title, MAX_TITLE_CHARS)?,
                status: WorkStatus::Todo,
                priority: a.priority.unwrap_or_default(),
                role: a.role.unwrap_or_default(),
                artifact: None,
                needs_revision: false,
                note: None,
            };
            Ok(changed(WorkItemAction::Added, item))
        }
        WORK_ITEM_UPDATE => {
            let a: UpdateArgs = args(tool, arguments)?;
            let mut item = find(items, &a.id)?.clone();
            if a.status.is_none()
                && a.title.is_none()
                && a.priority.is_none()
                && a.role.is_none()
                && a.note.is_none()
            {
                return Err(WorkItemError::NothingToUpdate {
                    tool: tool.to_string(),
                });
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
            if let Some(role) = a.role {
                if let Some(path) = &item.artifact {
                    artifact::check_role(items, &item.id, role, path)?;
                }
                item.role = role;
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
            let path = bounded("path", &a.path, MAX_NOTE_CHARS)?;
            let clean = clean_artifact_path(&path)?;
            artifact::check_role(items, &item.id, item.role, &clean)?;
            item.artifact = Some(clean.clone());
            let mut applied = changed(WorkItemAction::ArtifactSet, item);
            if clean != path {
                // Say what was recorded, so the model does not repeat the noise.
                applied.result = json!({"ok": true, "action": WorkItemAction::ArtifactSet,
                    "item": applied.change.as_ref().map(|c| &c.1),
                    "cleaned_from": path})
                .to_string();
            }
            Ok(applied)
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
        other => Err(WorkItemError::NotAWorkItemTool(other.to_string())),
    }
}
