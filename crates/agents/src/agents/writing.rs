//! The writing agent: OUTLINE → DRAFT each section in its own context → REVISE into one
//! document.

use lsm_phase::{LlmTier, PhaseRequest, StopReason};

use crate::agents::{answer_of, card_from_core, halts};
use crate::parse::{ListSource, clip, name_list};
use crate::{Agent, AgentContext, AgentCore, AgentError, AgentOutput, Card, TaskInput};

/// The writing agent's card.
pub const WRITING: Card = Card {
    name: "writing",
    description: "Writing: outlines a document on a topic, drafts each section from the knowledge base and files, then revises it into one cited document.",
    tier: LlmTier::Complex,
    tools: &[
        "query_and_synthesize",
        "read_file",
        "read_folder",
        "write_file",
        "extract_snippets",
        "source_map",
    ],
    input: TaskInput::Topic,
    system_prompt: "You are a writing agent. You work in phases; each user message starts with \
the phase (OUTLINE, DRAFT or REVISE) and says what to reply. Ground what you write in the \
user's files and knowledge base, cite the sources the tools return, and never invent one. Write \
clear, well-structured Markdown.",
};

/// At most this many sections are drafted (a longer outline is cut, and the cut is logged).
pub(crate) const MAX_SECTIONS: usize = 8;

/// A section title is cut to this many characters.
const MAX_TITLE_CHARS: usize = 120;

/// Iteration limit of one DRAFT phase.
const DRAFT_ITERATIONS: u32 = 4;

/// Iteration limit of REVISE.
const REVISE_ITERATIONS: u32 = 3;

/// One draft's text is cut to this many characters before it reaches REVISE.
const MAX_DRAFT_CHARS: usize = 6000;

fn drafts_block(drafts: &[(String, String)]) -> String {
    if drafts.is_empty() {
        return "(no section was drafted)".to_string();
    }
    drafts
        .iter()
        .map(|(title, text)| format!("## {title}\n\n{}\n", clip(text, MAX_DRAFT_CHARS)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The writing agent. Its run:
///
/// 1. **OUTLINE** (primary context; query_and_synthesize, read_file, read_folder; up to
///    [`AgentContext::max_iterations`]): a JSON array of section titles, read even inside
///    prose; a missing or empty outline gives one section named after the topic; at most 8.
/// 2. **DRAFT** each section in its own context `section:<title>` (query_and_synthesize,
///    extract_snippets, read_file; 4 iterations). `budget_exhausted`, `stop_requested` or
///    `error` stops the drafting.
/// 3. **REVISE** (primary context; source_map, write_file; 3 iterations), always: the drafts
///    become one document (also written to a workspace file when the topic asks for one).
///
/// Saved: `artifacts/<topic>_<ts>.md` (the REVISE answer, else the drafts assembled in
/// outline order).
#[derive(Debug)]
pub struct WritingAgent {
    core: AgentCore,
}

impl WritingAgent {
    /// The writing agent on `ctx`.
    pub fn new(ctx: AgentContext) -> Self {
        WritingAgent {
            core: AgentCore::new(WRITING.spec(), ctx),
        }
    }

    async fn phases(&mut self, topic: &str) -> Result<String, AgentError> {
        let prompt = WRITING.system_prompt;
        self.core.log(&format!("Writing topic: {topic}"));

        let outline = self
            .core
            .run_phase(
                prompt,
                PhaseRequest::new(format!(
                    "Phase: OUTLINE. Topic: '{topic}'. Look up what the document needs, then \
                     reply with only a JSON array of 3 to {MAX_SECTIONS} section titles."
                ))
                .with_tool_names(["query_and_synthesize", "read_file", "read_folder"])
                .with_max_iterations(self.core.max_iterations()),
            )
            .await;
        let mut halted: Option<StopReason> =
            halts(outline.stop_reason).then_some(outline.stop_reason);
        let mut sections = Vec::new();
        if halted.is_none() {
            let list = name_list(&outline.final_text, MAX_SECTIONS, MAX_TITLE_CHARS);
            if list.dropped > 0 {
                self.core.log(&format!(
                    "OUTLINE proposed {} sections; drafting the first {MAX_SECTIONS}.",
                    list.items.len() + list.dropped
                ));
            }
            sections = list.items;
            if sections.is_empty() {
                let why = if list.source == ListSource::Nothing {
                    "no JSON array of sections"
                } else {
                    "an empty outline"
                };
                self.core.log(&format!(
                    "OUTLINE gave {why}; drafting one section on the topic."
                ));
                sections.push(clip(topic, MAX_TITLE_CHARS));
            }
            self.core.log(&format!(
                "Outline — {} sections:\n{}",
                sections.len(),
                sections
                    .iter()
                    .enumerate()
                    .map(|(i, s)| format!("  [{}] {s}", i + 1))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }

        let outline_text = sections
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{}. {s}", i + 1))
            .collect::<Vec<_>>()
            .join("\n");
        let mut drafts: Vec<(String, String)> = Vec::new();
        for title in &sections {
            if halted.is_some() {
                break;
            }
            self.core.log(&format!("Drafting section: {title}"));
            let result = self
                .core
                .run_phase(
                    prompt,
                    PhaseRequest::new(format!(
                        "Phase: DRAFT. Topic: '{topic}'. Outline:\n{outline_text}\n\nDraft the \
                         section '{title}' in Markdown, citing sources. Reply with the section \
                         text only."
                    ))
                    .with_tool_names(["query_and_synthesize", "extract_snippets", "read_file"])
                    .with_max_iterations(DRAFT_ITERATIONS)
                    .with_context_label(Some(format!("section:{title}"))),
                )
                .await;
            match answer_of(&result) {
                Some(text) => drafts.push((title.clone(), text.to_string())),
                None => self.core.log(&format!(
                    "Section '{title}': no draft ({}).",
                    result.stop_reason
                )),
            }
            if halts(result.stop_reason) {
                halted = Some(result.stop_reason);
                self.core.log(&format!(
                    "Stopping drafting ({}); revising what was drafted ({} section(s)).",
                    result.stop_reason,
                    drafts.len()
                ));
            }
        }

        let revise = self
            .core
            .run_phase(
                prompt,
                PhaseRequest::new(format!(
                    "Phase: REVISE. Topic: '{topic}'. Drafted sections:\n\n{}\n\nRevise them into \
                     one coherent document in Markdown with a Sources section (use source_map to \
                     check the sources). Reply with the document; if the topic asks for a file \
                     in the workspace, also write it there with write_file first.",
                    drafts_block(&drafts)
                ))
                .with_tool_names(["source_map", "write_file"])
                .with_max_iterations(REVISE_ITERATIONS)
                .completing_task(),
            )
            .await;
        self.core.log(&format!("REVISE: {}.", revise.stop_reason));
        let document = match answer_of(&revise) {
            Some(text) => text.to_string(),
            None => {
                self.core
                    .log("No revised document; saving the drafts as they are.");
                format!("# {topic}\n\n{}", drafts_block(&drafts))
            }
        };
        self.core.save_artifact(topic, ".md", &document)?;
        Ok(document)
    }
}

#[async_trait::async_trait]
impl Agent for WritingAgent {
    card_from_core!();

    async fn run(&mut self, task: &str) -> AgentOutput {
        self.core.begin_run(task);
        let result = self.phases(task).await;
        self.core.end_run(result).await
    }
}
