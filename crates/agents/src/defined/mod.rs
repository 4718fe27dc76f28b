//! [`DefinedAgent`]: the one interpreter of agent definitions. It runs a definition's phases
//! in order through [`AgentCore::run_phase`] — each phase's prompt filled from the task, the
//! earlier answers and the current item; a `for_each` phase once per item of an earlier
//! answer's list; a repeating phase back to its `from` phase while rounds remain — then saves
//! the answers its phases name as artifacts.
//!
//! It never calls a model or a tool but through its core, so everything a definition can make
//! happen goes through the run's executor: its allowlist, sandbox, budget and records.

mod collected;

use lsm_phase::{PhaseRequest, PhaseResult, StopReason};

use crate::agents::{answer_of, card_from_core, halts, tool_digest, tool_results};
use crate::definition::{AgentDefinition, IfEmpty, PhaseDefinition, SaveFormat};
use crate::parse::{ListSource, as_flag, clip, json_object, name_list, names_in};
use crate::{Agent, AgentContext, AgentCore, AgentError, AgentOutput, TaskInput};

use collected::{Collected, ItemAnswer};

/// An item (a subtopic, a file, …) is cut to this many characters: it names a context label
/// and log lines.
const MAX_ITEM_CHARS: usize = 120;

/// A saved tool result is cut to this many characters.
const MAX_RESULT_CHARS: usize = 16_000;

/// An item's tool-result digest, when its phase gave no text, is cut to this many characters.
const MAX_DIGEST_CHARS: usize = 4000;

/// An agent run from its definition.
#[derive(Debug)]
pub struct DefinedAgent {
    core: AgentCore,
    definition: AgentDefinition,
}

/// Where a run stands while its phases run.
struct Progress {
    collected: Collected,
    halted: Option<StopReason>,
    round: u32,
    /// The items the next round's `from` phase runs over (a repeat's), by phase index.
    next_items: Option<(usize, Vec<String>)>,
    /// Items a repeat listed when no round was left.
    leftover: Vec<String>,
    /// Tool results to save: (artifact name, title, results), in the order they came.
    results: Vec<(String, String, Vec<String>)>,
}

impl DefinedAgent {
    /// The agent of `definition` on `ctx`. A code agent's definition has no phases: its run
    /// ends at once with nothing done (build code agents with [`crate::Catalog::create`]).
    pub fn new(definition: AgentDefinition, ctx: AgentContext) -> Self {
        DefinedAgent {
            core: AgentCore::new(definition.spec.clone(), ctx),
            definition,
        }
    }

    /// The definition it runs.
    pub fn definition(&self) -> &AgentDefinition {
        &self.definition
    }

    async fn phases(&mut self, task: &str) -> Result<String, AgentError> {
        let input = match self.definition.spec.input {
            TaskInput::Task => "Task",
            TaskInput::Topic => "Topic",
        };
        self.core.log(&format!("{input}: {task}"));
        let phases = self.definition.phases().to_vec();
        let mut progress = Progress {
            collected: Collected::default(),
            halted: None,
            round: 1,
            next_items: None,
            leftover: Vec::new(),
            results: Vec::new(),
        };
        let mut i = 0;
        while let Some(phase) = phases.get(i) {
            if let Some(reason) = progress.halted
                && !phase.always
            {
                self.core.log(&format!(
                    "Phase {}: skipped, the run stopped early ({reason}).",
                    phase.name
                ));
                i += 1;
                continue;
            }
            if phase.for_each.is_some() {
                let items = self.items_of(i, phase, task, &mut progress);
                self.run_items(phase, task, &items, &mut progress).await;
            } else {
                let result = self.run_once(phase, task, None, &progress).await;
                self.core.log(&format!(
                    "Phase {}: {} ({} tool call(s)).",
                    phase.name,
                    result.stop_reason,
                    result.tool_calls.len()
                ));
                if halts(result.stop_reason) {
                    progress.halted.get_or_insert(result.stop_reason);
                }
                progress.collected.record(&phase.name, &result);
                keep_results(phase, &result, task, &mut progress);
            }
            if let Some(from) = self.repeat_after(phase, &phases, &mut progress) {
                i = from;
                continue;
            }
            i += 1;
        }
        if let Some(reason) = progress.halted {
            self.core.log(&format!("The run stopped early ({reason})."));
        }
        self.save(&phases, task, &progress)
    }

    /// The items phase `index` runs over this round: a repeat's, else its list's.
    fn items_of(
        &mut self,
        index: usize,
        phase: &PhaseDefinition,
        task: &str,
        progress: &mut Progress,
    ) -> Vec<String> {
        if let Some((at, items)) = progress.next_items.take() {
            if at == index {
                return items;
            }
            progress.next_items = Some((at, items));
        }
        let Some(list) = &phase.for_each else {
            return Vec::new();
        };
        let text = progress.collected.answer(&list.phase).unwrap_or_default();
        let names = match &list.field {
            None => name_list(&text, phase.max_items, MAX_ITEM_CHARS),
            Some(field) => names_in(
                json_object(&text, field)
                    .as_ref()
                    .and_then(|o| o.get(field)),
                phase.max_items,
                MAX_ITEM_CHARS,
            ),
        };
        let names = if names.items.is_empty() && names.source == ListSource::Nothing {
            // One item per line, when the answer is neither JSON nor a Markdown list.
            let lines: Vec<String> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect();
            name_list(
                &serde_json::Value::from(lines).to_string(),
                phase.max_items,
                MAX_ITEM_CHARS,
            )
        } else {
            names
        };
        if names.dropped > 0 {
            self.core.log(&format!(
                "Phase {}: {list} listed {} items; running the first {}.",
                phase.name,
                names.items.len() + names.dropped,
                phase.max_items
            ));
        }
        if names.items.is_empty() {
            return match phase.if_empty {
                IfEmpty::Task => {
                    self.core.log(&format!(
                        "Phase {}: {list} listed no items; running it on the {} itself.",
                        phase.name,
                        self.definition.spec.input.as_str()
                    ));
                    vec![clip(task, MAX_ITEM_CHARS)]
                }
                IfEmpty::Skip => {
                    self.core.log(&format!(
                        "Phase {}: {list} listed no items; nothing to run.",
                        phase.name
                    ));
                    Vec::new()
                }
            };
        }
        names.items
    }

    /// Run `phase` once per item, until the run halts.
    async fn run_items(
        &mut self,
        phase: &PhaseDefinition,
        task: &str,
        items: &[String],
        progress: &mut Progress,
    ) {
        if !items.is_empty() {
            let numbered: Vec<String> = items
                .iter()
                .enumerate()
                .map(|(n, s)| format!("  [{}] {s}", n + 1))
                .collect();
            self.core.log(&format!(
                "Phase {} (round {}) — {} item(s):\n{}",
                phase.name,
                progress.round,
                items.len(),
                numbered.join("\n")
            ));
        }
        progress.collected.begin_items(&phase.name);
        for item in items {
            if progress.halted.is_some() {
                break;
            }
            let result = self.run_once(phase, task, Some(item), progress).await;
            let text = match answer_of(&result) {
                Some(text) => text.to_string(),
                None if result.stop_reason != StopReason::Error => {
                    tool_digest(&result, MAX_DIGEST_CHARS)
                }
                None => String::new(),
            };
            self.core.log(&format!(
                "Phase {}, item '{item}': {} ({} tool call(s)){}.",
                phase.name,
                result.stop_reason,
                result.tool_calls.len(),
                if text.is_empty() { ", no answer" } else { "" }
            ));
            if halts(result.stop_reason) {
                progress.halted = Some(result.stop_reason);
            }
            progress.collected.record_item(
                &phase.name,
                ItemAnswer {
                    item: item.clone(),
                    answer: text,
                },
                &result,
            );
            keep_results(phase, &result, task, progress);
        }
        progress.collected.end_items(&phase.name);
    }

    /// One phase run: its prompt and context filled in, its limits applied.
    async fn run_once(
        &mut self,
        phase: &PhaseDefinition,
        task: &str,
        item: Option<&str>,
        progress: &Progress,
    ) -> PhaseResult {
        let vars = |name: &str| progress.collected.value(name, task, item, progress.round);
        let template = match (&phase.repeat_prompt, progress.round) {
            (Some(again), round) if round > 1 => again,
            _ => &phase.prompt,
        };
        let mut request = PhaseRequest::new(template.render(vars))
            .with_max_iterations(phase.max_iterations.unwrap_or(self.core.max_iterations()))
            .with_continue_context(phase.continue_context)
            .with_context_label(phase.context.as_ref().map(|c| c.render(vars)));
        if let Some(tools) = &phase.tools {
            request = request.with_tool_names(tools.iter().cloned());
        }
        if phase.completes_task {
            request = request.completing_task();
        }
        let system_prompt = self.definition.spec.system_prompt.clone();
        self.core.run_phase(&system_prompt, request).await
    }

    /// After `phase`: the index to go back to when it repeats and rounds remain.
    fn repeat_after(
        &mut self,
        phase: &PhaseDefinition,
        phases: &[PhaseDefinition],
        progress: &mut Progress,
    ) -> Option<usize> {
        let repeat = phase.repeat.as_ref()?;
        if progress.halted.is_some() {
            return None;
        }
        let answer = progress.collected.answer(&phase.name).unwrap_or_default();
        let key = repeat.until.as_deref().unwrap_or(&repeat.items);
        let Some(verdict) = json_object(&answer, key) else {
            self.core.log(&format!(
                "Phase {}: no JSON verdict in the answer; not repeating.",
                phase.name
            ));
            return None;
        };
        if let Some(until) = &repeat.until
            && verdict.get(until).and_then(as_flag).unwrap_or(false)
        {
            self.core
                .log(&format!("Phase {}: {until} — not repeating.", phase.name));
            return None;
        }
        let from = phases.iter().position(|p| p.name == repeat.from)?;
        let max_items = phases.get(from).map_or(1, |p| p.max_items);
        let items = names_in(verdict.get(&repeat.items), max_items, MAX_ITEM_CHARS);
        if items.items.is_empty() {
            self.core.log(&format!(
                "Phase {}: no {} listed; not repeating.",
                phase.name, repeat.items
            ));
            return None;
        }
        if items.dropped > 0 {
            self.core.log(&format!(
                "Phase {}: {} {} listed; keeping the first {max_items}.",
                phase.name,
                items.items.len() + items.dropped,
                repeat.items
            ));
        }
        let max_rounds = self.core.max_rounds();
        if progress.round > max_rounds {
            self.core.log(&format!(
                "Round limit reached ({max_rounds} refinement round(s)); {} not pursued: {}",
                repeat.items,
                items.items.join("; ")
            ));
            progress.leftover = items.items;
            return None;
        }
        self.core.log(&format!(
            "Phase {}: repeating from {} with {} item(s).",
            phase.name,
            repeat.from,
            items.items.len()
        ));
        progress.round += 1;
        progress.next_items = Some((from, items.items));
        Some(from)
    }

    /// Save each answer a phase names with `save_as`; the run's answer is the last saved.
    fn save(
        &mut self,
        phases: &[PhaseDefinition],
        task: &str,
        progress: &Progress,
    ) -> Result<String, AgentError> {
        let mut text = progress.collected.last_answer().unwrap_or_default();
        // The phases a repeat runs again, and the heading its leftover items go under.
        let repeated = phases.iter().enumerate().find_map(|(end, p)| {
            let repeat = p.repeat.as_ref()?;
            let start = phases.iter().position(|q| q.name == repeat.from)?;
            Some((start..=end, repeat.leftover_heading.as_str()))
        });
        for (index, phase) in phases.iter().enumerate() {
            let Some(save_as) = &phase.save_as else {
                continue;
            };
            let name = save_as.render(|v| progress.collected.value(v, task, None, progress.round));
            let answer = progress.collected.answer(&phase.name);
            let mut body = match (phase.save_format, answer) {
                (SaveFormat::WithHeading, Some(answer)) => {
                    format!("# {}\n\nTask: {task}\n\n{answer}\n", title(&name))
                }
                (SaveFormat::WithHeading, None) => {
                    self.core.log("No answer to save.");
                    continue;
                }
                (SaveFormat::AsIs, Some(answer)) => answer,
                (SaveFormat::AsIs, None) => {
                    let why = match progress.halted {
                        Some(reason) => format!("the run stopped early ({reason})"),
                        None => "the model wrote no answer".to_string(),
                    };
                    self.core.log(&format!(
                        "No answer from phase {}: {why}; saving what the earlier phases collected.",
                        phase.name
                    ));
                    progress
                        .collected
                        .fallback(task, &phase.name, &why, &phases[..index])
                }
            };
            if !progress.leftover.is_empty()
                && let Some((range, heading)) = &repeated
                && range.contains(&index)
            {
                let list: Vec<String> =
                    progress.leftover.iter().map(|s| format!("- {s}")).collect();
                body.push_str(&format!("\n\n## {heading}\n\n{}\n", list.join("\n")));
            }
            self.core.save_artifact(&name, ".md", &body)?;
            text = match phase.save_format {
                SaveFormat::WithHeading => progress.collected.answer(&phase.name).unwrap_or(body),
                SaveFormat::AsIs => body,
            };
        }
        for (name, title, results) in &progress.results {
            let body = format!("# {title}: {task}\n\n{}\n", results.join("\n\n"));
            self.core.save_artifact(name, ".md", &body)?;
        }
        Ok(text)
    }
}

/// Keep what `phase`'s `save_results` asks of `result` (the latest phase's results replace
/// those of an earlier round under the same name).
fn keep_results(
    phase: &PhaseDefinition,
    result: &PhaseResult,
    task: &str,
    progress: &mut Progress,
) {
    let Some(save) = &phase.save_results else {
        return;
    };
    let results = tool_results(result, &save.tool, MAX_RESULT_CHARS);
    if results.is_empty() {
        return;
    }
    let name = save
        .name
        .render(|v| progress.collected.value(v, task, None, progress.round));
    match progress.results.iter_mut().find(|(n, _, _)| *n == name) {
        Some(kept) => kept.2 = results,
        None => progress.results.push((name, save.title.clone(), results)),
    }
}

/// `edit_report` → `Edit report`.
fn title(name: &str) -> String {
    let spaced = name.replace('_', " ");
    let mut chars = spaced.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => spaced,
    }
}

#[async_trait::async_trait]
impl Agent for DefinedAgent {
    card_from_core!();

    async fn run(&mut self, task: &str) -> AgentOutput {
        self.core.begin_run(task);
        let result = self.phases(task).await;
        self.core.end_run(result).await
    }
}
