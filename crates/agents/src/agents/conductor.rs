//! The conductor (seed 003): plans a task as an agenda of items (objective, capability,
//! dependencies), runs worker agents on the items whose dependencies are done — concurrently,
//! through [`crate::AgentCore::run_workers`] —, weighs their reports, decides follow-ups
//! (new items, retries with a changed objective) or completion, and writes a final report that
//! cites the findings it uses.
//!
//! A worker that fails, blocks or stalls is an escalation the conductor sees and reports;
//! items depending on it are skipped, with the reason. The conductor itself calls no tool.

use std::collections::{BTreeMap, BTreeSet};

use lsm_phase::{LlmTier, PhaseRequest, StopReason, WorkerOutcome, WorkerRequest};
use serde_json::Value;

use crate::agents::{answer_of, card_from_core, halts};
use crate::parse::{as_flag, clip, json_object, json_objects};
use crate::{Agent, AgentContext, AgentCore, AgentError, AgentOutput, Card, TaskInput};

/// Items an agenda may hold (the plan's and the follow-ups' together).
pub const MAX_ITEMS: usize = 12;

/// The conductor's card.
pub const CONDUCTOR: Card = Card {
    name: "conductor",
    description: "Conductor: plans a task as an agenda, runs researcher and terminal workers on it concurrently, and writes a final report citing their findings.",
    tier: LlmTier::Normal,
    tools: &[],
    input: TaskInput::Task,
    system_prompt: "You are a conductor. You plan work, delegate every item of it to a worker, \
judge the workers' reports, and write the final report. You do no work yourself and call no \
tool. Answer each phase exactly in the form it asks for.",
};

/// The capabilities the plan may name, with what they do (the configuration may map more
/// names to agents; an unknown one becomes an escalation when its worker cannot start).
const CAPABILITIES: &str = "- researcher: finds and checks facts in the knowledge base, remote \
sources and files\n- terminal: reads and changes files and runs allowed programs in the \
workspace";

/// Where an item stands.
#[derive(Debug, Clone, PartialEq)]
enum Status {
    Pending,
    Done(Box<WorkerOutcome>),
    Failed(Box<WorkerOutcome>),
    Skipped(String),
}

/// One agenda item.
#[derive(Debug, Clone, PartialEq)]
struct Item {
    id: String,
    objective: String,
    capability: String,
    depends_on: Vec<String>,
    /// Runs asked for so far (a retry is a new run).
    attempts: u32,
    status: Status,
}

/// A finding as the final report numbers it.
#[derive(Debug, Clone, PartialEq)]
struct Numbered {
    label: String,
    item: String,
    finding: lsm_phase::Finding,
}

/// The conductor agent.
#[derive(Debug)]
pub struct ConductorAgent {
    core: AgentCore,
}

impl ConductorAgent {
    /// The conductor on `ctx`.
    pub fn new(ctx: AgentContext) -> Self {
        ConductorAgent {
            core: AgentCore::new(CONDUCTOR.spec(), ctx),
        }
    }

    async fn phase(&mut self, message: String) -> lsm_phase::PhaseResult {
        self.core
            .run_phase(
                CONDUCTOR.system_prompt,
                PhaseRequest::new(message)
                    .with_tool_names(Vec::<String>::new())
                    .with_max_iterations(1),
            )
            .await
    }

    async fn phases(&mut self, task: &str) -> Result<String, AgentError> {
        self.core.log(&format!("Task: {task}"));
        let plan = self
            .phase(format!(
                "Phase: PLAN. Task: '{task}'.\nWorkers you can give an item to:\n{CAPABILITIES}\n\
                 Break the task into at most {MAX_ITEMS} agenda items a worker can each do on its \
                 own. Reply with only a JSON array: [{{\"id\": \"a1\", \"objective\": \"...\", \
                 \"capability\": \"researcher\", \"depends_on\": []}}]; `depends_on` lists the \
                 ids of items whose results an item needs."
            ))
            .await;
        if halts(plan.stop_reason) {
            return Ok(self.stopped_early(task, &[], plan.stop_reason).await);
        }
        let mut items = parse_agenda(&plan.final_text, task);
        self.core.log(&format!(
            "PLAN: {} item(s): {}",
            items.len(),
            items
                .iter()
                .map(|i| format!("{} ({})", i.id, i.capability))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let rounds = self.core.max_rounds().max(1);
        let mut halted = None;
        for round in 1..=rounds {
            if let Some(reason) = self.run_ready_items(&mut items).await {
                halted = Some(reason);
                break;
            }
            if round == rounds {
                break;
            }
            let review = self
                .phase(format!(
                    "Phase: REVIEW. Task: '{task}'. The agenda and the workers' reports:\n\n{}\n\
                     Is the task done? Reply with only a JSON object: {{\"complete\": true}} when \
                     it is, else {{\"complete\": false, \"new_items\": [{{\"id\": \"...\", \
                     \"objective\": \"...\", \"capability\": \"...\", \"depends_on\": []}}], \
                     \"retry\": [{{\"id\": \"<a failed item's id>\", \"objective\": \"<a \
                     changed objective>\"}}]}}.",
                    agenda_text(&items)
                ))
                .await;
            if halts(review.stop_reason) {
                halted = Some(review.stop_reason);
                break;
            }
            let Some(verdict) = json_object(&review.final_text, "complete") else {
                self.core
                    .log("REVIEW gave no JSON verdict; the agenda stands as it is.");
                break;
            };
            if verdict.get("complete").and_then(as_flag).unwrap_or(false) {
                break;
            }
            let changed = follow_ups(&mut items, &verdict);
            self.core.log(&format!("REVIEW: {changed} follow-up(s)."));
            if changed == 0 {
                break;
            }
        }
        if let Some(reason) = halted {
            return Ok(self.stopped_early(task, &items, reason).await);
        }
        let findings = numbered_findings(&items);
        let report = self
            .core
            .run_phase(
                CONDUCTOR.system_prompt,
                PhaseRequest::new(format!(
                    "Phase: REPORT. Task: '{task}'. The agenda and its outcomes:\n\n{}\n\
                     Findings you may cite:\n{}\nWrite the final report in Markdown. Cite a \
                     finding as [F#] wherever you use it; cite nothing else. Say what remains \
                     open. Reply with the report only.",
                    agenda_text(&items),
                    findings_text(&findings)
                ))
                .with_tool_names(Vec::<String>::new())
                .with_max_iterations(3)
                .completing_task(),
            )
            .await;
        let body = match answer_of(&report) {
            Some(text) => text.to_string(),
            None => format!(
                "# {task}\n\n_No report was written ({}); the findings as gathered:_\n",
                report.stop_reason
            ),
        };
        let document = final_document(task, &body, &findings, &items);
        self.core
            .save_artifact("conductor_report", ".md", &document)?;
        Ok(document)
    }

    /// Run the items whose dependencies are done, wave after wave, until none is ready.
    /// Returns the stop reason that ended the run early, if one did (budget, stop).
    async fn run_ready_items(&mut self, items: &mut [Item]) -> Option<StopReason> {
        loop {
            skip_items_whose_dependencies_failed(items);
            let ready: Vec<usize> = (0..items.len())
                .filter(|&i| items[i].status == Status::Pending)
                .filter(|&i| {
                    items[i].depends_on.iter().all(|d| {
                        items
                            .iter()
                            .any(|o| &o.id == d && matches!(o.status, Status::Done(_)))
                    })
                })
                .collect();
            if ready.is_empty() {
                // What is still pending waits on itself: a dependency cycle.
                for item in items.iter_mut().filter(|i| i.status == Status::Pending) {
                    item.status = Status::Skipped(
                        "not run: its dependencies form a cycle or were never done".into(),
                    );
                }
                return None;
            }
            let requests: Vec<WorkerRequest> = ready
                .iter()
                .map(|&i| {
                    let item = &mut items[i];
                    item.attempts += 1;
                    WorkerRequest {
                        item_id: if item.attempts == 1 {
                            item.id.clone()
                        } else {
                            format!("{}#{}", item.id, item.attempts)
                        },
                        capability: item.capability.clone(),
                        objective: item.objective.clone(),
                    }
                })
                .collect();
            self.core.log(&format!(
                "Dispatching {} worker(s): {}",
                requests.len(),
                requests
                    .iter()
                    .map(|r| r.item_id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            let outcomes = self
                .core
                .run_workers(CONDUCTOR.system_prompt, requests)
                .await;
            let mut halted = None;
            for (&i, outcome) in ready.iter().zip(outcomes) {
                self.core.log(&format!(
                    "Worker {} ended: {}{}",
                    outcome.item_id,
                    outcome.stop_reason,
                    if outcome.succeeded() {
                        ""
                    } else {
                        " (escalated)"
                    }
                ));
                if outcome.stop_reason.ends_run() {
                    halted = Some(outcome.stop_reason);
                }
                items[i].status = if outcome.succeeded() {
                    Status::Done(Box::new(outcome))
                } else {
                    Status::Failed(Box::new(outcome))
                };
            }
            if halted.is_some() {
                return halted;
            }
        }
    }

    /// The run stopped early: what it has, said plainly, saved as the report. The REPORT
    /// phase is still asked for: it ends at once for the same reason (the budget is the
    /// tree's, the stop everyone's), so the run ends with that stop reason.
    async fn stopped_early(&mut self, task: &str, items: &[Item], reason: StopReason) -> String {
        self.core.log(&format!(
            "Stopping early ({reason}); saving what the workers found."
        ));
        let last = self
            .phase("Phase: REPORT. The run is stopping; reply with nothing.".to_string())
            .await;
        let reason = if halts(last.stop_reason) {
            last.stop_reason
        } else {
            reason
        };
        let findings = numbered_findings(items);
        let body = format!(
            "# {task}\n\n_The run stopped early ({reason}); no final report was written. The \
             findings as gathered:_\n"
        );
        let document = final_document(task, &body, &findings, items);
        if let Err(e) = self
            .core
            .save_artifact("conductor_report", ".md", &document)
        {
            self.core
                .log(&format!("The report could not be saved: {e}"));
        }
        document
    }
}

#[async_trait::async_trait]
impl Agent for ConductorAgent {
    card_from_core!();

    async fn run(&mut self, task: &str) -> AgentOutput {
        self.core.begin_run(task);
        let result = self.phases(task).await;
        self.core.end_run(result).await
    }
}

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
fn parse_agenda(text: &str, task: &str) -> Vec<Item> {
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
fn follow_ups(items: &mut Vec<Item>, verdict: &serde_json::Map<String, Value>) -> usize {
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
fn skip_items_whose_dependencies_failed(items: &mut [Item]) {
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
fn agenda_text(items: &[Item]) -> String {
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

/// Every finding of the items that ran, numbered F1, F2, … in agenda order.
fn numbered_findings(items: &[Item]) -> Vec<Numbered> {
    let mut out = Vec::new();
    for item in items {
        if let Status::Done(o) | Status::Failed(o) = &item.status {
            for f in &o.report.findings {
                out.push(Numbered {
                    label: format!("F{}", out.len() + 1),
                    item: item.id.clone(),
                    finding: f.clone(),
                });
            }
        }
    }
    out
}

fn findings_text(findings: &[Numbered]) -> String {
    if findings.is_empty() {
        return "(none)\n".to_string();
    }
    findings
        .iter()
        .map(|n| {
            format!(
                "[{}] {} (from {}, confidence {:.2})\n",
                n.label,
                clip(&n.finding.claim, 300),
                n.item,
                n.finding.confidence
            )
        })
        .collect()
}

/// The `[F#]` labels `text` cites, in order, once each.
fn cited_labels(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("[F") {
        let after = &rest[start + 2..];
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && after[digits.len()..].starts_with(']') {
            let label = format!("F{digits}");
            if !out.contains(&label) {
                out.push(label);
            }
        }
        rest = &rest[start + 2..];
    }
    out
}

/// The saved report: the model's text with citations of unknown findings removed (and said
/// so), then the cited findings with their evidence, then the escalations.
fn final_document(task: &str, body: &str, findings: &[Numbered], items: &[Item]) -> String {
    let known: BTreeMap<&str, &Numbered> = findings.iter().map(|n| (n.label.as_str(), n)).collect();
    let mut text = body.trim().to_string();
    let mut unknown = Vec::new();
    for label in cited_labels(body) {
        if !known.contains_key(label.as_str()) {
            text = text.replace(&format!("[{label}]"), "");
            unknown.push(label);
        }
    }
    let cited: Vec<&Numbered> = cited_labels(&text)
        .iter()
        .filter_map(|l| known.get(l.as_str()).copied())
        .collect();
    let mut doc = String::new();
    if !text.starts_with('#') {
        doc.push_str(&format!("# {task}\n\n"));
    }
    doc.push_str(&text);
    doc.push_str("\n\n## Findings cited\n\n");
    if cited.is_empty() {
        doc.push_str("None.\n");
    }
    for n in &cited {
        let evidence = if n.finding.evidence_refs.is_empty() {
            "no evidence given".to_string()
        } else {
            n.finding.evidence_refs.join(", ")
        };
        doc.push_str(&format!(
            "- [{}] {} — from {}, confidence {:.2}; evidence: {evidence}\n",
            n.label, n.finding.claim, n.item, n.finding.confidence
        ));
    }
    if !unknown.is_empty() {
        doc.push_str(&format!(
            "\n_Citations of findings that do not exist were removed: {}._\n",
            unknown.join(", ")
        ));
    }
    let escalations: Vec<String> = items
        .iter()
        .flat_map(|i| match &i.status {
            Status::Failed(o) => {
                let mut lines: Vec<String> = o
                    .report
                    .escalations
                    .iter()
                    .map(|e| format!("{} ({}): {e}", i.id, o.stop_reason))
                    .collect();
                if lines.is_empty() {
                    lines.push(format!("{}: the worker ended {}", i.id, o.stop_reason));
                }
                lines
            }
            Status::Done(o) => o
                .report
                .escalations
                .iter()
                .map(|e| format!("{}: {e}", i.id))
                .collect(),
            Status::Skipped(why) => vec![format!("{}: {why}", i.id)],
            Status::Pending => Vec::new(),
        })
        .collect();
    if !escalations.is_empty() {
        doc.push_str("\n## Escalations\n\n");
        for e in escalations {
            doc.push_str(&format!("- {e}\n"));
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agenda_is_read_from_prose_with_dependencies_kept_only_when_they_exist() {
        let items = parse_agenda(
            "Here is the plan:\n```json\n[{\"id\": \"a1\", \"objective\": \"find X\", \
             \"capability\": \"Researcher\"}, {\"id\": \"a2\", \"objective\": \"write Y\", \
             \"capability\": \"terminal\", \"depends_on\": [\"a1\", \"zz\", \"a2\"]}, \
             {\"id\": \"a1\", \"objective\": \"again\"}]\n```",
            "task",
        );
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].capability, "researcher");
        assert_eq!(items[1].depends_on, ["a1"]);
        assert_eq!(items[2].id, "a1-2", "a taken id is made unique");
        let fallback = parse_agenda("no plan today", "the task");
        assert_eq!(fallback.len(), 1);
        assert_eq!(fallback[0].objective, "the task");
    }

    #[test]
    fn citations_of_unknown_findings_are_removed_and_cited_ones_listed_with_evidence() {
        let findings = vec![Numbered {
            label: "F1".into(),
            item: "a1".into(),
            finding: lsm_phase::Finding {
                claim: "Soil holds carbon".into(),
                confidence: 0.9,
                evidence_refs: vec!["notes.md".into()],
            },
        }];
        let doc = final_document("t", "# Report\nCarbon [F1]; tillage [F7].", &findings, &[]);
        assert!(doc.contains("Carbon [F1];"));
        assert!(!doc.contains("[F7]"));
        assert!(doc.contains("do not exist were removed: F7"));
        assert!(
            doc.contains("- [F1] Soil holds carbon — from a1, confidence 0.90; evidence: notes.md")
        );
    }

    #[test]
    fn dependents_of_a_failed_item_are_skipped_and_a_retry_runs_it_again() {
        let mut items = parse_agenda(
            "[{\"id\": \"a\", \"objective\": \"x\"}, {\"id\": \"b\", \"objective\": \"y\", \
             \"depends_on\": [\"a\"]}, {\"id\": \"c\", \"objective\": \"z\", \"depends_on\": [\"b\"]}]",
            "t",
        );
        let req = WorkerRequest {
            item_id: "a".into(),
            capability: "researcher".into(),
            objective: "x".into(),
        };
        items[0].status = Status::Failed(Box::new(WorkerOutcome::failed(&req, "down")));
        skip_items_whose_dependencies_failed(&mut items);
        assert!(matches!(&items[1].status, Status::Skipped(w) if w.contains("dependency a")));
        assert!(matches!(&items[2].status, Status::Skipped(w) if w.contains("dependency b")));
        let verdict = json_object(
            "{\"complete\": false, \"retry\": [{\"id\": \"a\", \"objective\": \"x, differently\"}]}",
            "complete",
        )
        .unwrap();
        assert_eq!(follow_ups(&mut items, &verdict), 1);
        assert_eq!(items[0].status, Status::Pending);
        assert_eq!(items[0].objective, "x, differently");
        assert!(
            items.iter().all(|i| i.status == Status::Pending),
            "the skipped dependents wait again"
        );
    }
}
