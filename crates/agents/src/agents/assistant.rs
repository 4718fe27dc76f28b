//! The assistant agent: RECALL from memory → RESPOND → REMEMBER what is worth keeping.

use lsm_phase::{LlmTier, PhaseRequest, ToolOutcome};

use crate::agents::{answer_of, card_from_core, halts, tool_digest};
use crate::parse::clip;
use crate::{Agent, AgentContext, AgentCore, AgentError, AgentOutput, Card, TaskInput};

/// The assistant agent's card.
pub const ASSISTANT: Card = Card {
    name: "assistant",
    description: "Assistant: recalls what it knows about you from memory, answers, and remembers durable facts and preferences for next time.",
    tier: LlmTier::Normal,
    tools: &["memory_put", "memory_search"],
    input: TaskInput::Task,
    system_prompt: "You are a personal assistant with a long-term memory. You work in phases; \
each user message starts with the phase (RECALL, RESPOND or REMEMBER) and says what to do. \
Search memory before answering, answer helpfully and briefly, and store only durable facts and \
preferences the user would want remembered: never secrets, never one-off details.",
};

/// Iteration limit of RECALL and REMEMBER.
const MEMORY_ITERATIONS: u32 = 3;

/// What RECALL hands to RESPOND is cut to this many characters.
const MAX_RECALL_CHARS: usize = 6000;

/// At most this many stored memories are listed in the reply artifact.
const MAX_LISTED_MEMORIES: usize = 50;

/// The assistant agent. Its run:
///
/// 1. **RECALL** (context `recall`; memory_search; 3 iterations): what memory holds about the
///    task, summarized.
/// 2. **RESPOND** (primary context; no tools; 1 iteration): the answer, given the recall.
/// 3. **REMEMBER** (context `remember`; memory_put; 3 iterations): durable facts from the
///    exchange are stored with `memory_put` (which needs a person's permission unless
///    configured otherwise); skipped after an early stop.
///
/// Saved: `artifacts/reply_<ts>.md`: the answer and the list of memories stored (read from
/// the phase's successful `memory_put` calls, not from the model's account of them).
#[derive(Debug)]
pub struct AssistantAgent {
    core: AgentCore,
}

impl AssistantAgent {
    /// The assistant agent on `ctx`.
    pub fn new(ctx: AgentContext) -> Self {
        AssistantAgent {
            core: AgentCore::new(ASSISTANT.spec(), ctx),
        }
    }

    async fn phases(&mut self, task: &str) -> Result<String, AgentError> {
        let prompt = ASSISTANT.system_prompt;
        self.core.log(&format!("Task: {task}"));

        let recall = self
            .core
            .run_phase(
                prompt,
                PhaseRequest::new(format!(
                    "Phase: RECALL. Request: '{task}'. Search memory with memory_search for \
                     anything relevant, then reply with a short summary of what you found, or \
                     'nothing relevant'."
                ))
                .with_tool_names(["memory_search"])
                .with_max_iterations(MEMORY_ITERATIONS)
                .with_context_label(Some("recall")),
            )
            .await;
        let mut recalled = answer_of(&recall).unwrap_or_default().to_string();
        if recalled.is_empty() {
            recalled = tool_digest(&recall, MAX_RECALL_CHARS);
        }
        let recalled = clip(recalled.trim(), MAX_RECALL_CHARS);
        self.core.log(&format!(
            "RECALL: {} ({} memory search(es)).",
            recall.stop_reason,
            recall.tool_calls.len()
        ));
        let mut halted = halts(recall.stop_reason).then_some(recall.stop_reason);

        let answer = if halted.is_some() {
            None
        } else {
            let respond = self
                .core
                .run_phase(
                    prompt,
                    PhaseRequest::new(format!(
                        "Phase: RESPOND. Request: '{task}'. What memory holds:\n\n{}\n\nReply \
                         to the request.",
                        if recalled.is_empty() {
                            "(nothing)"
                        } else {
                            &recalled
                        }
                    ))
                    .with_tool_names(Vec::<String>::new())
                    .with_max_iterations(1),
                )
                .await;
            self.core.log(&format!("RESPOND: {}.", respond.stop_reason));
            if halts(respond.stop_reason) {
                halted = Some(respond.stop_reason);
            }
            answer_of(&respond).map(str::to_string)
        };

        let mut stored: Vec<String> = Vec::new();
        if let Some(reason) = halted {
            self.core.log(&format!(
                "Stopping early ({reason}); nothing is stored in memory."
            ));
        } else {
            let remember = self
                .core
                .run_phase(
                    prompt,
                    PhaseRequest::new(format!(
                        "Phase: REMEMBER. Request: '{task}'. Your answer:\n\n{}\n\nIf this \
                         exchange holds durable facts or preferences worth keeping, store each \
                         with memory_put. Then reply with a one-line account, or NONE.",
                        answer.as_deref().unwrap_or("(none)")
                    ))
                    .with_tool_names(["memory_put"])
                    .with_max_iterations(MEMORY_ITERATIONS)
                    .with_context_label(Some("remember")),
                )
                .await;
            for call in remember
                .tool_calls
                .iter()
                .filter(|c| c.name == "memory_put")
            {
                match &call.outcome {
                    ToolOutcome::Result(_) if stored.len() < MAX_LISTED_MEMORIES => {
                        stored.push(clip(&call.arguments.to_string(), 300));
                    }
                    ToolOutcome::Result(_) => {}
                    ToolOutcome::Error(e) => self.core.log(&format!(
                        "memory_put was refused or failed: {}",
                        clip(e, 300)
                    )),
                }
            }
            self.core.log(&format!(
                "REMEMBER: {} ({} memory item(s) stored).",
                remember.stop_reason,
                stored.len()
            ));
        }

        let answer_text = answer.unwrap_or_else(|| "(no answer was produced)".to_string());
        let mut body = format!("# Reply\n\nRequest: {task}\n\n{answer_text}\n");
        if !stored.is_empty() {
            body.push_str("\n## Remembered\n\n");
            for item in &stored {
                body.push_str(&format!("- `{item}`\n"));
            }
        }
        self.core.save_artifact("reply", ".md", &body)?;
        Ok(answer_text)
    }
}

#[async_trait::async_trait]
impl Agent for AssistantAgent {
    card_from_core!();

    async fn run(&mut self, task: &str) -> AgentOutput {
        self.core.begin_run(task);
        let result = self.phases(task).await;
        self.core.end_run(result).await
    }
}
