//! The conductor (seed 003): plans a task as an agenda of items (objective, capability,
//! dependencies), runs worker agents on the items whose dependencies are done — concurrently,
//! through [`crate::AgentCore::run_workers`] —, weighs their reports, decides follow-ups
//! (new items, retries with a changed objective) or completion, and writes a final report that
//! cites the findings it uses.
//!
//! A worker that fails, blocks or stalls is an escalation the conductor sees and reports;
//! items depending on it are skipped, with the reason. The conductor itself calls no tool.

use lsm_phase::{LlmTier, PhaseRequest, StopReason, WorkerOutcome, WorkerRequest};

use crate::agents::{answer_of, card_from_core, halts};

mod agenda;
mod document;

use crate::parse::{as_flag, json_object};
use crate::{Agent, AgentContext, AgentCore, AgentError, AgentOutput, Card, TaskInput};
use agenda::{agenda_text, follow_ups, parse_agenda, skip_items_whose_dependencies_failed};
use document::{final_document, findings_text, numbered_findings};

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
