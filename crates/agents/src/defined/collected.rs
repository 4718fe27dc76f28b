//! What a defined agent's phases have produced so far, and the template variables it gives:
//! each phase's latest answer (or, for a `for_each` phase, its items' answers), a digest of
//! its tool results, and the fallback document when a phase to be saved gave no answer.

use std::collections::HashMap;

use lsm_phase::PhaseResult;

use crate::agents::{answer_of, tool_digest};
use crate::definition::PhaseDefinition;
use crate::parse::clip;

/// An answer put into a prompt is cut to this many characters.
const MAX_ANSWER_CHARS: usize = 16_000;

/// One item's answer in a block of a `for_each` phase's answers is cut to this many.
const MAX_ITEM_ANSWER_CHARS: usize = 4000;

/// A phase's tool-result digest is at most this many characters.
const MAX_TOOLS_CHARS: usize = 8000;

/// One item of a `for_each` phase and what its run answered (empty: nothing).
#[derive(Debug, Clone)]
pub(super) struct ItemAnswer {
    pub item: String,
    pub answer: String,
}

/// What one phase produced, latest run first.
#[derive(Debug, Default)]
struct PhaseOut {
    answer: Option<String>,
    tools: String,
    /// This round's items, for a `for_each` phase.
    items: Option<Vec<ItemAnswer>>,
    /// Every round's items.
    all_items: Vec<ItemAnswer>,
}

/// Everything the run's phases produced.
#[derive(Debug, Default)]
pub(super) struct Collected {
    phases: HashMap<String, PhaseOut>,
    /// The phase that ran last before the current one.
    previous: Option<String>,
    last_answer: Option<String>,
    last_final_text: String,
}

impl Collected {
    /// Record a phase run once.
    pub fn record(&mut self, phase: &str, result: &PhaseResult) {
        let out = self.phases.entry(phase.to_string()).or_default();
        out.answer = answer_of(result).map(str::to_string);
        out.tools = tool_digest(result, MAX_TOOLS_CHARS);
        out.items = None;
        self.last_answer.clone_from(&out.answer);
        self.last_final_text.clone_from(&result.final_text);
        self.previous = Some(phase.to_string());
    }

    /// A `for_each` phase's round begins: its items so far are this round's no more.
    pub fn begin_items(&mut self, phase: &str) {
        let out = self.phases.entry(phase.to_string()).or_default();
        out.items = Some(Vec::new());
        out.tools.clear();
    }

    /// Record one item's run of a `for_each` phase.
    pub fn record_item(&mut self, phase: &str, item: ItemAnswer, result: &PhaseResult) {
        let out = self.phases.entry(phase.to_string()).or_default();
        let digest = tool_digest(result, MAX_TOOLS_CHARS);
        if !digest.is_empty() && out.tools.len() < MAX_TOOLS_CHARS {
            out.tools.push_str(&digest);
        }
        if !item.answer.is_empty() {
            self.last_answer = Some(item.answer.clone());
        }
        out.items.get_or_insert_with(Vec::new).push(item.clone());
        out.all_items.push(item);
        out.answer = block(out.items.as_deref().unwrap_or_default());
        self.last_final_text.clone_from(&result.final_text);
    }

    /// A `for_each` phase's round ended: it is the previous phase of the next one.
    pub fn end_items(&mut self, phase: &str) {
        self.previous = Some(phase.to_string());
    }

    /// The latest answer of `phase` (a block of its items' answers for a `for_each` phase).
    pub fn answer(&self, phase: &str) -> Option<String> {
        self.phases.get(phase).and_then(|o| o.answer.clone())
    }

    /// The last answer of the run, else the last phase's text (an error's message).
    pub fn last_answer(&self) -> Option<String> {
        self.last_answer
            .clone()
            .or_else(|| Some(self.last_final_text.clone()).filter(|t| !t.is_empty()))
    }

    /// The value of template variable `name`.
    pub fn value(&self, name: &str, task: &str, item: Option<&str>, round: u32) -> String {
        match name {
            "task" | "topic" => task.to_string(),
            "item" => item.unwrap_or_default().to_string(),
            "round" => round.to_string(),
            "previous" => match &self.previous {
                Some(phase) => self.phase_text(phase),
                None => "(no answer)".to_string(),
            },
            _ => match name.strip_prefix("phases.") {
                Some(rest) => match rest.strip_suffix(".tools") {
                    Some(phase) => self
                        .phases
                        .get(phase)
                        .map(|o| o.tools.trim_end().to_string())
                        .filter(|t| !t.is_empty())
                        .unwrap_or_else(|| "(no tool results)".to_string()),
                    None => self.phase_text(rest),
                },
                None => String::new(),
            },
        }
    }

    /// A phase's answer as put into a prompt.
    fn phase_text(&self, phase: &str) -> String {
        let Some(out) = self.phases.get(phase) else {
            return "(no answer)".to_string();
        };
        match (&out.items, &out.answer) {
            (Some(_), None) => "(nothing was collected)".to_string(),
            (None, None) => "(no answer)".to_string(),
            (Some(_), Some(block)) => block.clone(),
            (None, Some(answer)) => clip(answer, MAX_ANSWER_CHARS),
        }
    }

    /// The document saved for phase `name` when it gave no answer: what the nearest phase
    /// before it (`earlier`) collected, but for the lists that only chose the items.
    pub fn fallback(
        &self,
        task: &str,
        name: &str,
        why: &str,
        earlier: &[PhaseDefinition],
    ) -> String {
        let sources: Vec<&str> = earlier
            .iter()
            .filter_map(|p| p.for_each.as_ref().map(|l| l.phase.as_str()))
            .collect();
        let nearest = earlier
            .iter()
            .rev()
            .filter(|p| !sources.contains(&p.name.as_str()))
            .find_map(|phase| {
                let out = self.phases.get(&phase.name)?;
                let material = if phase.for_each.is_some() {
                    block(&out.all_items)
                } else {
                    out.answer.as_deref().map(|a| clip(a, MAX_ANSWER_CHARS))
                };
                material.map(|m| (phase.name.as_str(), m))
            });
        match nearest {
            Some((from, material)) => format!(
                "# {task}\n\n_No answer from phase {name} ({why}); what phase {from} collected:_\n\n{material}"
            ),
            None => format!(
                "# {task}\n\n_No answer from phase {name} ({why}); nothing was collected._\n"
            ),
        }
    }
}

/// `### item\n\nanswer\n` for each item that has an answer, or `None` when none has.
fn block(items: &[ItemAnswer]) -> Option<String> {
    let parts: Vec<String> = items
        .iter()
        .filter(|i| !i.answer.is_empty())
        .map(|i| {
            format!(
                "### {}\n\n{}\n",
                i.item,
                clip(&i.answer, MAX_ITEM_ANSWER_CHARS)
            )
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}
