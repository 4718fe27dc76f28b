//! The single-phase agents (seed 001 §2.4 "simple agents"): `general`, `librarian` and
//! `manuscript_editor`. One long phase with every allowlisted tool, then the answer is saved.

use lsm_phase::{LlmTier, PhaseRequest};

use crate::agents::{answer_of, card_from_core};
use crate::{Agent, AgentContext, AgentCore, AgentError, AgentOutput, AgentSpec, TaskInput};

/// The general-purpose file agent: one long phase over the workspace's files.
pub const GENERAL: AgentSpec = AgentSpec {
    name: "general",
    description: "General-purpose agent: reads, searches and edits files in the workspace to complete a task.",
    tier: LlmTier::Normal,
    tools: &[
        "read_file",
        "read_folder",
        "find_file",
        "find_section",
        "file_metadata",
        "hash_file",
        "write_file",
        "append_file",
        "create_folder",
        "edit_file",
        "query_and_synthesize",
        "extract_snippets",
        "source_map",
    ],
    input: TaskInput::Task,
    system_prompt: "You are a careful general-purpose assistant working inside a sandboxed \
workspace. Use the tools to inspect and change files as the task requires; paths are relative \
to the workspace. Prefer reading before writing. When the task is complete, answer with a short \
summary of what you did and no tool call. If you cannot proceed at all, call `block` with the \
reason.",
};

/// The librarian: answers questions from the knowledge base, with sources, and keeps durable
/// facts in memory.
pub const LIBRARIAN: AgentSpec = AgentSpec {
    name: "librarian",
    description: "Librarian: answers questions from the knowledge base with cited sources and keeps durable facts in memory.",
    tier: LlmTier::Normal,
    tools: &[
        "query_and_synthesize",
        "extract_snippets",
        "source_map",
        "memory_put",
        "memory_search",
    ],
    input: TaskInput::Task,
    system_prompt: "You are a librarian for the user's own knowledge base. Check memory_search \
for what is already known, find the answer with query_and_synthesize, quote the exact passages \
with extract_snippets and map claims to sources with source_map. Store a durable, reusable fact \
with memory_put only when it will help later questions. Answer in Markdown, citing every claim \
with the sources the tools returned; never invent a source. If the knowledge base does not \
hold the answer, say so.",
};

/// The manuscript editor: edits a manuscript in the workspace as asked.
pub const MANUSCRIPT_EDITOR: AgentSpec = AgentSpec {
    name: "manuscript_editor",
    description: "Manuscript editor: finds the sections a task is about and edits them in place, then reports the changes.",
    tier: LlmTier::Normal,
    tools: &["read_file", "find_section", "edit_file", "write_file"],
    input: TaskInput::Task,
    system_prompt: "You are a manuscript editor working on files in a sandboxed workspace. \
Locate the passages the task concerns with find_section or read_file, then change only what the \
task asks, with edit_file (or write_file for a new file). Keep the author's voice. When done, \
answer with an edit report: each change, where it is, and why. If you cannot proceed, call \
`block` with the reason.",
};

/// What each simple agent calls the artifact its answer is saved as, and its heading.
fn artifact_name(spec: &AgentSpec) -> (&'static str, &'static str) {
    match spec.name {
        "librarian" => ("answer", "Answer"),
        "manuscript_editor" => ("edit_report", "Edit report"),
        _ => ("result", "Result"),
    }
}

/// A single-phase agent: [`GENERAL`], [`LIBRARIAN`] or [`MANUSCRIPT_EDITOR`] (or any card).
///
/// Its run is one phase: the card's system prompt, the task as the user message, every
/// allowlisted tool, up to [`AgentContext::max_iterations`] iterations. A non-empty answer
/// (from a phase that did not end in `error`) is saved as
/// `artifacts/<result|answer|edit_report>_<YYYYMMDD_HHMMSS>.md`.
#[derive(Debug)]
pub struct SimpleAgent {
    core: AgentCore,
}

impl SimpleAgent {
    /// The agent of `spec` on `ctx`.
    pub fn new(spec: AgentSpec, ctx: AgentContext) -> Self {
        SimpleAgent {
            core: AgentCore::new(spec, ctx),
        }
    }

    async fn phases(&mut self, task: &str) -> Result<String, AgentError> {
        let spec = self.core.spec().clone();
        self.core.log(&format!("Task: {task}"));
        let request = PhaseRequest::new(task)
            .with_max_iterations(self.core.max_iterations())
            .completing_task();
        let result = self.core.run_phase(spec.system_prompt, request).await;
        self.core.log(&format!(
            "Phase finished: {} ({} tool call(s)).",
            result.stop_reason,
            result.tool_calls.len()
        ));
        let Some(answer) = answer_of(&result) else {
            self.core.log("No answer to save.");
            return Ok(result.final_text);
        };
        let (name, heading) = artifact_name(&spec);
        let body = format!("# {heading}\n\nTask: {task}\n\n{answer}\n");
        self.core.save_artifact(name, ".md", &body)?;
        Ok(answer.to_string())
    }
}

#[async_trait::async_trait]
impl Agent for SimpleAgent {
    card_from_core!();

    async fn run(&mut self, task: &str) -> AgentOutput {
        self.core.begin_run(task);
        let result = self.phases(task).await;
        self.core.end_run(result).await
    }
}
