//! The research agent: DECOMPOSE → RESEARCH per subtopic → SYNTHESIZE → REVIEW, refined on
//! the review's suggestions (seed 001 §2.4 and §4).

use lsm_phase::{LlmTier, PhaseRequest, StopReason};

use crate::agents::{answer_of, card_from_core, halts, tool_digest};
use crate::parse::{ListSource, as_flag, clip, json_object, name_list, names_in};
use crate::{Agent, AgentContext, AgentCore, AgentError, AgentOutput, AgentSpec, TaskInput};

/// The research agent's card.
pub const RESEARCH: AgentSpec = AgentSpec {
    name: "research",
    description: "Research: decomposes a topic into subtopics, collects findings on each from the knowledge base, and writes a reviewed research outline.",
    tier: LlmTier::Complex,
    tools: &["query_and_synthesize", "query_remote_chain"],
    input: TaskInput::Topic,
    system_prompt: "You are a research agent. You work in phases; each user message starts with \
the phase (DECOMPOSE, RESEARCH, SYNTHESIZE or REVIEW) and says exactly what to reply. When a \
phase offers query_and_synthesize, use it to collect findings from the user's knowledge base, \
and keep the sources it returns. Cite sources for every finding; never invent one. Be concise.",
};

/// At most this many subtopics are researched per round (a longer list is cut, and the cut
/// is logged); the same limit applies to a review's suggestions.
pub const MAX_SUBTOPICS: usize = 8;

/// A subtopic name is cut to this many characters (it names a context label and log lines).
const MAX_SUBTOPIC_CHARS: usize = 120;

/// Iteration limit of one RESEARCH phase.
const RESEARCH_ITERATIONS: u32 = 3;

/// The one tool a RESEARCH phase may use.
const RESEARCH_TOOL: &str = "query_and_synthesize";

/// One finding's text is cut to this many characters before it reaches SYNTHESIZE.
const MAX_FINDING_CHARS: usize = 4000;

/// What one RESEARCH phase produced.
#[derive(Debug, Clone)]
struct Finding {
    subtopic: String,
    text: String,
}

/// `  [1] a\n  [2] b`.
fn numbered(items: &[String]) -> String {
    items
        .iter()
        .enumerate()
        .map(|(i, s)| format!("  [{}] {s}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

fn findings_block(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "(no findings were collected)".to_string();
    }
    findings
        .iter()
        .map(|f| {
            format!(
                "### {}\n\n{}\n",
                f.subtopic,
                clip(&f.text, MAX_FINDING_CHARS)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The outline the agent writes itself when no SYNTHESIZE phase produced one (the budget ran
/// out, a stop was requested, or the model answered nothing): the findings as they are.
fn fallback_outline(topic: &str, findings: &[Finding], why: &str) -> String {
    format!(
        "# {topic}\n\n_Assembled from the collected findings: {why}._\n\n{}",
        findings_block(findings)
    )
}

/// The research agent. Its run:
///
/// 1. **DECOMPOSE** (primary context, no tools, one iteration): a JSON array of subtopics,
///    read even when the model wraps it in prose; an empty or missing list researches the
///    topic itself; a list longer than [`MAX_SUBTOPICS`] is cut.
/// 2. **RESEARCH** each subtopic in its own context `subtopic:<name>`, with only
///    `query_and_synthesize`, at most 3 iterations. `budget_exhausted`, `stop_requested` or
///    `error` stops the collection.
/// 3. **SYNTHESIZE** (primary context, no tools) the outline from the findings, always, also
///    after an early stop.
/// 4. **REVIEW** (primary context, no tools): `{"sufficient": bool, "suggestions": [...]}`;
///    when not sufficient, the suggestions are researched as the next round's subtopics, up
///    to [`AgentContext::max_rounds`] refinement rounds.
///
/// The outline is saved as `artifacts/<topic>_<YYYYMMDD_HHMMSS>.md`; every subtopic and every
/// suggestion is logged.
#[derive(Debug)]
pub struct ResearchAgent {
    core: AgentCore,
}

impl ResearchAgent {
    /// The research agent on `ctx`.
    pub fn new(ctx: AgentContext) -> Self {
        ResearchAgent {
            core: AgentCore::new(RESEARCH, ctx),
        }
    }

    async fn phase(&mut self, request: PhaseRequest) -> lsm_phase::PhaseResult {
        self.core.run_phase(RESEARCH.system_prompt, request).await
    }

    /// The subtopics of a DECOMPOSE answer (never empty: the topic itself at worst).
    fn subtopics(&mut self, text: &str, topic: &str) -> Vec<String> {
        let list = name_list(text, MAX_SUBTOPICS, MAX_SUBTOPIC_CHARS);
        if list.dropped > 0 {
            self.core.log(&format!(
                "DECOMPOSE proposed {} subtopics; researching the first {MAX_SUBTOPICS}.",
                list.items.len() + list.dropped
            ));
        }
        if list.items.is_empty() {
            let why = match list.source {
                ListSource::Nothing => "no JSON array of subtopics in the answer",
                ListSource::Json | ListSource::Lines => "an empty list of subtopics",
            };
            self.core.log(&format!(
                "DECOMPOSE gave {why}; researching the topic itself."
            ));
            return vec![clip(topic, MAX_SUBTOPIC_CHARS)];
        }
        list.items
    }

    async fn phases(&mut self, topic: &str) -> Result<String, AgentError> {
        let max_rounds = self.core.max_rounds();
        self.core.log(&format!("Research topic: {topic}"));

        let decompose = self
            .phase(
                PhaseRequest::new(format!(
                    "Phase: DECOMPOSE. Topic: '{topic}'. List the subtopics to research. Reply \
                     with only a JSON array of 3 to {MAX_SUBTOPICS} short subtopic strings."
                ))
                .with_tool_names(Vec::<String>::new())
                .with_max_iterations(1),
            )
            .await;
        let mut halted: Option<StopReason> =
            halts(decompose.stop_reason).then_some(decompose.stop_reason);
        let mut subtopics = if halted.is_some() {
            Vec::new()
        } else {
            self.subtopics(&decompose.final_text, topic)
        };

        let mut findings: Vec<Finding> = Vec::new();
        let mut outline = String::new();
        let mut pending: Vec<String> = Vec::new();
        let mut round: u32 = 1;
        loop {
            if !subtopics.is_empty() {
                self.core.log(&format!(
                    "Research iteration {round} — {} subtopics:\n{}",
                    subtopics.len(),
                    numbered(&subtopics)
                ));
            }
            let mut new_findings: Vec<Finding> = Vec::new();
            for subtopic in &subtopics {
                if halted.is_some() {
                    break;
                }
                self.core
                    .log(&format!("Collecting findings for subtopic: {subtopic}"));
                let result = self
                    .phase(
                        PhaseRequest::new(format!(
                            "Phase: RESEARCH. Topic: '{topic}'. Subtopic: '{subtopic}'. Use \
                             {RESEARCH_TOOL} to collect findings, then reply with the findings \
                             in Markdown, citing their sources."
                        ))
                        .with_tool_names([RESEARCH_TOOL])
                        .with_max_iterations(RESEARCH_ITERATIONS)
                        .with_context_label(Some(format!("subtopic:{subtopic}"))),
                    )
                    .await;
                let text = match answer_of(&result) {
                    Some(text) => text.to_string(),
                    None if result.stop_reason != StopReason::Error => {
                        tool_digest(&result, MAX_FINDING_CHARS)
                    }
                    None => String::new(),
                };
                self.core.log(&format!(
                    "Subtopic '{subtopic}': {} ({} tool call(s)){}.",
                    result.stop_reason,
                    result.tool_calls.len(),
                    if text.is_empty() { ", no findings" } else { "" }
                ));
                if !text.is_empty() {
                    new_findings.push(Finding {
                        subtopic: subtopic.clone(),
                        text,
                    });
                }
                if halts(result.stop_reason) {
                    halted = Some(result.stop_reason);
                }
            }
            if let Some(reason) = halted {
                self.core.log(&format!(
                    "Stopping collection ({reason}); synthesizing what was collected ({} finding(s)).",
                    findings.len() + new_findings.len()
                ));
            }

            let message = if round == 1 {
                format!(
                    "Phase: SYNTHESIZE. Topic: '{topic}'. Findings per subtopic:\n\n{}\n\nWrite \
                     the research outline in Markdown: sections, key points with their sources, \
                     open questions. Reply with the outline only.",
                    findings_block(&new_findings)
                )
            } else {
                format!(
                    "Phase: SYNTHESIZE. Topic: '{topic}'. New findings on the review's \
                     suggestions:\n\n{}\n\nRevise the outline to include them. Reply with the \
                     full revised outline only.",
                    findings_block(&new_findings)
                )
            };
            findings.extend(new_findings);
            let synthesis = self
                .phase(
                    PhaseRequest::new(message)
                        .with_tool_names(Vec::<String>::new())
                        .with_max_iterations(1),
                )
                .await;
            if let Some(text) = answer_of(&synthesis) {
                outline = text.to_string();
            }
            if halts(synthesis.stop_reason) {
                halted.get_or_insert(synthesis.stop_reason);
            }
            if halted.is_some() {
                break;
            }

            let review = self
                .phase(
                    PhaseRequest::new(
                        "Phase: REVIEW. Review the outline for gaps. Reply with only a JSON \
                         object: {\"sufficient\": true or false, \"suggestions\": [\"subtopic to \
                         research next\", ...]}.",
                    )
                    .with_tool_names(Vec::<String>::new())
                    .with_max_iterations(1),
                )
                .await;
            if halts(review.stop_reason) {
                halted = Some(review.stop_reason);
                break;
            }
            let Some(verdict) = json_object(&review.final_text, "sufficient") else {
                self.core
                    .log("REVIEW gave no JSON verdict; keeping the outline as it is.");
                break;
            };
            let sufficient = verdict.get("sufficient").and_then(as_flag).unwrap_or(false);
            let suggestions = names_in(
                verdict.get("suggestions"),
                MAX_SUBTOPICS,
                MAX_SUBTOPIC_CHARS,
            );
            if sufficient {
                self.core.log("REVIEW: the outline is sufficient.");
                break;
            }
            if suggestions.items.is_empty() {
                self.core
                    .log("REVIEW: not sufficient, but no suggestions; keeping the outline.");
                break;
            }
            if suggestions.dropped > 0 {
                self.core.log(&format!(
                    "REVIEW made {} suggestions; keeping the first {MAX_SUBTOPICS}.",
                    suggestions.items.len() + suggestions.dropped
                ));
            }
            if round > max_rounds {
                self.core.log(&format!(
                    "Round limit reached ({max_rounds} refinement round(s)); suggestions not \
                     pursued:\n{}",
                    numbered(&suggestions.items)
                ));
                pending = suggestions.items;
                break;
            }
            self.core.log(&format!(
                "Refining with {} review suggestions:\n{}",
                suggestions.items.len(),
                numbered(&suggestions.items)
            ));
            subtopics = suggestions.items;
            round += 1;
        }

        if outline.is_empty() {
            let why = match halted {
                Some(reason) => format!("the run stopped early ({reason})"),
                None => "the model wrote no outline".to_string(),
            };
            self.core.log(&format!(
                "No outline from SYNTHESIZE: {why}; saving the findings."
            ));
            outline = fallback_outline(topic, &findings, &why);
        }
        if !pending.is_empty() {
            outline.push_str(&format!(
                "\n\n## Further research suggested\n\n{}\n",
                pending
                    .iter()
                    .map(|s| format!("- {s}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
        self.core.save_artifact(topic, ".md", &outline)?;
        Ok(outline)
    }
}

#[async_trait::async_trait]
impl Agent for ResearchAgent {
    card_from_core!();

    async fn run(&mut self, task: &str) -> AgentOutput {
        self.core.begin_run(task);
        let result = self.phases(task).await;
        self.core.end_run(result).await
    }
}
