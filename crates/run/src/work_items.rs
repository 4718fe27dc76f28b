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

mod apply;
mod artifact;
mod definitions;

pub use apply::{Applied, WorkItemAction, WorkItemError, apply_call};
pub use artifact::{ArtifactError, clean_artifact_path};
pub use definitions::definition;

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

/// What an item is for (seed 004 §4.1's roles). The role decides what becomes of the item's
/// artifact: a deliverable's is listed in the run's final result; a control item's is the
/// run's own working file, never a deliverable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Part of what the task asked for (the default).
    #[default]
    Deliverable,
    /// The run's own working material: a plan, notes, a checklist.
    Control,
    /// A check of other items' work: a review, a test run.
    Check,
}

impl Role {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Deliverable => "deliverable",
            Role::Control => "control",
            Role::Check => "check",
        }
    }
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
    /// What it is for (absent on the wire for a deliverable, and in ledgers written before
    /// roles existed).
    #[serde(default, skip_serializing_if = "is_deliverable")]
    pub role: Role,
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

fn is_deliverable(role: &Role) -> bool {
    *role == Role::Deliverable
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

    /// One line: `w2 [doing, high, control] Write the plan (artifact: plan.md)`.
    pub fn line(&self) -> String {
        let mut tags = vec![self.status.as_str()];
        if self.priority != Priority::Normal {
            tags.push(if self.priority == Priority::High {
                "high"
            } else {
                "low"
            });
        }
        if self.role != Role::Deliverable {
            tags.push(self.role.as_str());
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

/// A finished deliverable: a done item of role [`Role::Deliverable`] with an artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Deliverable {
    /// The item's id.
    pub id: String,
    /// What it was.
    pub title: String,
    /// The file it produced.
    pub artifact: String,
}

/// The run's deliverables, in ledger order: the artifacts of its completed deliverable items
/// (seed 004 §4.1, "deliverable extraction in final result").
pub fn deliverables(items: &[WorkItem]) -> Vec<Deliverable> {
    items
        .iter()
        .filter(|i| i.is_done() && i.role == Role::Deliverable)
        .filter_map(|i| {
            i.artifact.as_ref().map(|artifact| Deliverable {
                id: i.id.clone(),
                title: i.title.clone(),
                artifact: artifact.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
