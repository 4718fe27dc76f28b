//! The conductor's agenda: read from the model's answer, extended by follow-ups, shown back
//! to the model as text.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Item, MAX_ITEMS, Status};
use crate::parse::{clip, json_objects};

fn text_of(map: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
    map.get(key)
        .and_then(Value::as_str)
        .map(|s| clip(s.trim(), 500))
        .filter(|s| !s.is_empty())
}

fn ids_of(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|d| d.as_str().map(|s| s.trim().to_string()))
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// An id not yet taken by `items`: `wanted` itself, or `wanted-2`, `wanted-3`, …
fn unique_id(items: &[Item], wanted: &str) -> String {
    let base = if wanted.is_empty() { "item" } else { wanted };
    let mut id = base.to_string();
    let mut n = 1;
    while items.iter().any(|i| i.id == id) {
        n += 1;
        id = format!("{base}-{n}");
    }
    id
}

fn new_item(items: &[Item], map: &serde_json::Map<String, Value>) -> Option<Item> {
    let objective = text_of(map, "objective")?;
    let wanted = text_of(map, "id").unwrap_or_else(|| format!("a{}", items.len() + 1));
    Some(Item {
        id: unique_id(items, &clip(&wanted, 40)),
        objective,
        capability: text_of(map, "capability")
            .map(|c| c.to_ascii_lowercase())
            .unwrap_or_else(|| "researcher".into()),
        depends_on: ids_of(map.get("depends_on")),
        attempts: 0,
        status: Status::Pending,
    })
}

/// The plan's agenda; a plan that gives none is one researcher item doing the whole task.
/// Dependencies on ids not in the agenda are dropped.
pub(super) fn parse_agenda(text: &str, task: &str) -> Vec<Item> {
    let mut items: Vec<Item> = Vec::new();
    for map in json_objects(text).unwrap_or_default() {
        if items.len() >= MAX_ITEMS {
            break;
        }
        if let Some(item) = new_item(&items, &map) {
            items.push(item);
        }
    }
    if items.is_empty() {
        items.push(Item {
            id: "a1".into(),
            objective: task.to_string(),
            capability: "researcher".into(),
            depends_on: Vec::new(),
            attempts: 0,
            status: Status::Pending,
        });
    }
    let ids: BTreeSet<String> = items.iter().map(|i| i.id.clone()).collect();
    for item in &mut items {
        let own = item.id.clone();
        item.depends_on.retain(|d| ids.contains(d) && *d != own);
    }
    items
}

/// Apply a review's follow-ups: new items, and retries of failed items with a changed
/// objective. Returns how many changed.
pub(super) fn follow_ups(items: &mut Vec<Item>, verdict: &serde_json::Map<String, Value>) -> usize {
    let mut changed = 0;
    if let Some(Value::Array(new)) = verdict.get("new_items") {
        for v in new {
            if items.len() >= MAX_ITEMS {
                break;
            }
            if let Some(map) = v.as_object()
                && let Some(mut item) = new_item(items, map)
            {
                let ids: BTreeSet<&str> = items.iter().map(|i| i.id.as_str()).collect();
                item.depends_on.retain(|d| ids.contains(d.as_str()));
                items.push(item);
                changed += 1;
            }
        }
    }
    if let Some(Value::Array(retries)) = verdict.get("retry") {
        for v in retries.iter().filter_map(Value::as_object) {
            let Some(id) = text_of(v, "id") else { continue };
            if let Some(item) = items
                .iter_mut()
                .find(|i| i.id == id && matches!(i.status, Status::Failed(_) | Status::Skipped(_)))
            {
                if let Some(objective) = text_of(v, "objective") {
                    item.objective = objective;
                }
                item.status = Status::Pending;
                changed += 1;
            }
        }
        if changed > 0 {
            // Items skipped for a dependency get another chance: the skip is decided again
            // before the next wave.
            for item in items.iter_mut() {
                if matches!(&item.status, Status::Skipped(why) if why.contains("dependency")) {
                    item.status = Status::Pending;
                }
            }
        }
    }
    changed
}

/// Items waiting on a dependency that failed or was skipped are skipped, with the reason.
pub(super) fn skip_items_whose_dependencies_failed(items: &mut [Item]) {
    loop {
        let failed: BTreeMap<String, String> = items
            .iter()
            .filter(|i| matches!(i.status, Status::Failed(_) | Status::Skipped(_)))
            .map(|i| (i.id.clone(), i.id.clone()))
            .collect();
        let mut changed = false;
        for item in items.iter_mut().filter(|i| i.status == Status::Pending) {
            if let Some(d) = item.depends_on.iter().find(|d| failed.contains_key(*d)) {
                item.status =
                    Status::Skipped(format!("not run: its dependency {d} did not succeed"));
                changed = true;
            }
        }
        if !changed {
            return;
        }
    }
}

/// The agenda with each item's outcome, for the model.
pub(super) fn agenda_text(items: &[Item]) -> String {
    let mut out = String::new();
    for item in items {
        out.push_str(&format!(
            "- {} [{}] {}{}\n",
            item.id,
            item.capability,
            item.objective,
            if item.depends_on.is_empty() {
                String::new()
            } else {
                format!(" (after {})", item.depends_on.join(", "))
            }
        ));
        match &item.status {
            Status::Pending => out.push_str("  pending\n"),
            Status::Done(o) | Status::Failed(o) => {
                let verdict = if matches!(item.status, Status::Done(_)) {
                    "done"
                } else {
                    "FAILED"
                };
                out.push_str(&format!(
                    "  {verdict} ({}): {}\n",
                    o.stop_reason,
                    clip(&o.report.summary, 400).replace('\n', " ")
                ));
                for f in &o.report.findings {
                    out.push_str(&format!(
                        "  finding: {} (confidence {:.2})\n",
                        clip(&f.claim, 300),
                        f.confidence
                    ));
                }
                for e in &o.report.escalations {
                    out.push_str(&format!("  escalation: {}\n", clip(e, 300)));
                }
            }
            Status::Skipped(why) => out.push_str(&format!("  skipped: {why}\n")),
        }
    }
    out
}
