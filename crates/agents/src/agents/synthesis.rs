//! The synthesis agent: GATHER evidence → SYNTHESIZE with a source map → WRITE the document.

use lsm_phase::{LlmTier, PhaseRequest};

use crate::agents::{answer_of, card_from_core, halts, tool_digest, tool_results};
use crate::parse::clip;
use crate::{Agent, AgentContext, AgentCore, AgentError, AgentOutput, AgentSpec, TaskInput};

/// The synthesis agent's card.
pub const SYNTHESIS: AgentSpec = AgentSpec {
    name: "synthesis",
    description: "Synthesis: gathers evidence on a topic from files and the knowledge base, maps it to its sources, and writes a cited synthesis.",
    tier: LlmTier::Complex,
    tools: &[
        "read_folder",
        "read_file",
        "write_file",
        "query_and_synthesize",
        "extract_snippets",
        "source_map",
    ],
    input: TaskInput::Topic,
    system_prompt: "You are a synthesis agent. You work in phases; each user message starts \
with the phase (GATHER, SYNTHESIZE or WRITE) and says what to do and what to reply. Gather \
evidence from the workspace files and the knowledge base, keep every source, and never state a \
claim you cannot tie to a source. Write clear Markdown.",
};

/// Tools of the GATHER phase.
const GATHER_TOOLS: &[&str] = &[
    "read_folder",
    "read_file",
    "query_and_synthesize",
    "extract_snippets",
];

/// The evidence handed from GATHER to SYNTHESIZE is cut to this many characters.
const MAX_EVIDENCE_CHARS: usize = 16_000;

/// Iteration limit of SYNTHESIZE and WRITE (room for one tool call and the answer).
const SHORT_PHASE_ITERATIONS: u32 = 3;

/// The synthesis agent. Its run:
///
/// 1. **GATHER** (context `gather`; read_folder, read_file, query_and_synthesize,
///    extract_snippets; up to [`AgentContext::max_iterations`]): collect the evidence, reply
///    with it and its sources.
/// 2. **SYNTHESIZE** (primary context; source_map; 3 iterations): the evidence (the GATHER
///    answer and a digest of its tool results) is mapped to sources and synthesized.
/// 3. **WRITE** (primary context; write_file; 3 iterations): the final document, also
///    written to a workspace file when the topic asks for one.
///
/// Saved: `artifacts/<topic>_<ts>.md` (the WRITE answer, else the SYNTHESIZE answer, else the
/// evidence as gathered) and, when `source_map` returned a map, `artifacts/<topic>_sources_<ts>.md`.
#[derive(Debug)]
pub struct SynthesisAgent {
    core: AgentCore,
}

impl SynthesisAgent {
    /// The synthesis agent on `ctx`.
    pub fn new(ctx: AgentContext) -> Self {
        SynthesisAgent {
            core: AgentCore::new(SYNTHESIS, ctx),
        }
    }

    async fn phases(&mut self, topic: &str) -> Result<String, AgentError> {
        let prompt = SYNTHESIS.system_prompt;
        self.core.log(&format!("Synthesis topic: {topic}"));

        let gather = self
            .core
            .run_phase(
                prompt,
                PhaseRequest::new(format!(
                    "Phase: GATHER. Topic: '{topic}'. Collect the evidence: read the relevant \
                     workspace files and query the knowledge base. Reply with the key evidence \
                     as a Markdown list, each item with its source."
                ))
                .with_tool_names(GATHER_TOOLS.iter().copied())
                .with_max_iterations(self.core.max_iterations())
                .with_context_label(Some("gather")),
            )
            .await;
        let mut evidence = answer_of(&gather).unwrap_or_default().to_string();
        let digest = tool_digest(&gather, MAX_EVIDENCE_CHARS / 2);
        if !digest.is_empty() {
            evidence.push_str("\n\nTool results:\n");
            evidence.push_str(&digest);
        }
        let evidence = clip(evidence.trim(), MAX_EVIDENCE_CHARS);
        self.core.log(&format!(
            "GATHER: {} ({} tool call(s), {} characters of evidence).",
            gather.stop_reason,
            gather.tool_calls.len(),
            evidence.chars().count()
        ));
        let halted = halts(gather.stop_reason);
        if halted {
            self.core.log(&format!(
                "Stopping early ({}); writing what was gathered.",
                gather.stop_reason
            ));
        }

        let synthesize = self
            .core
            .run_phase(
                prompt,
                PhaseRequest::new(format!(
                    "Phase: SYNTHESIZE. Topic: '{topic}'. Evidence:\n\n{}\n\nBuild a source map \
                     of this evidence with source_map, then reply with a synthesis in Markdown \
                     that cites its sources.",
                    if evidence.is_empty() {
                        "(no evidence was gathered)"
                    } else {
                        &evidence
                    }
                ))
                .with_tool_names(["source_map"])
                .with_max_iterations(SHORT_PHASE_ITERATIONS),
            )
            .await;
        let source_maps = tool_results(&synthesize, "source_map", MAX_EVIDENCE_CHARS);
        self.core.log(&format!(
            "SYNTHESIZE: {} ({} source map(s)).",
            synthesize.stop_reason,
            source_maps.len()
        ));

        let write = if halted || halts(synthesize.stop_reason) {
            None
        } else {
            let result = self
                .core
                .run_phase(
                    prompt,
                    PhaseRequest::new(
                        "Phase: WRITE. Reply with the final document in Markdown, with a \
                         Sources section; it is saved as the run's artifact. If the topic asks \
                         for a file in the workspace, also write the document there with \
                         write_file first.",
                    )
                    .with_tool_names(["write_file"])
                    .with_max_iterations(SHORT_PHASE_ITERATIONS)
                    .completing_task(),
                )
                .await;
            self.core.log(&format!("WRITE: {}.", result.stop_reason));
            Some(result)
        };

        let document = write
            .as_ref()
            .and_then(answer_of)
            .or_else(|| answer_of(&synthesize))
            .map(str::to_string)
            .unwrap_or_else(|| {
                format!(
                    "# {topic}\n\n_No synthesis was written; the evidence as gathered:_\n\n{}\n",
                    if evidence.is_empty() {
                        "(no evidence was gathered)"
                    } else {
                        &evidence
                    }
                )
            });
        self.core.save_artifact(topic, ".md", &document)?;
        if !source_maps.is_empty() {
            let body = format!("# Sources: {topic}\n\n{}\n", source_maps.join("\n\n"));
            self.core
                .save_artifact(&format!("{topic}_sources"), ".md", &body)?;
        }
        Ok(document)
    }
}

#[async_trait::async_trait]
impl Agent for SynthesisAgent {
    card_from_core!();

    async fn run(&mut self, task: &str) -> AgentOutput {
        self.core.begin_run(task);
        let result = self.phases(task).await;
        self.core.end_run(result).await
    }
}
