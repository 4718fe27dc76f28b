//! The built-in agents that run code of their own (the others are definitions, see
//! [`crate::definition`]). Each is a struct holding its [`crate::AgentCore`], with a `run`
//! that begins a run, orchestrates phases, saves its artifacts and ends the run.

pub(crate) mod assistant;
pub(crate) mod conductor;
pub(crate) mod curator;
pub(crate) mod writing;

use lsm_phase::{PhaseResult, StopReason, ToolOutcome};

use crate::{Agent, AgentContext, AgentSpec};

/// The card of the code agent `name`.
pub(crate) fn code_card(name: &str) -> Option<AgentSpec> {
    let card = match name {
        "curator" => &curator::CURATOR,
        "writing" => &writing::WRITING,
        "assistant" => &assistant::ASSISTANT,
        "conductor" => &conductor::CONDUCTOR,
        _ => return None,
    };
    Some(card.spec())
}

/// The code agent `name` on `ctx`.
pub(crate) fn create_code(name: &str, ctx: AgentContext) -> Option<Box<dyn Agent>> {
    let agent: Box<dyn Agent> = match name {
        "curator" => Box::new(curator::CuratorAgent::new(ctx)),
        "writing" => Box::new(writing::WritingAgent::new(ctx)),
        "assistant" => Box::new(assistant::AssistantAgent::new(ctx)),
        "conductor" => Box::new(conductor::ConductorAgent::new(ctx)),
        _ => return None,
    };
    Some(agent)
}

/// The four capability-card methods of [`crate::Agent`], answered by `self.core`.
macro_rules! card_from_core {
    () => {
        fn name(&self) -> &str {
            self.core.name()
        }
        fn description(&self) -> &str {
            self.core.description()
        }
        fn tool_allowlist(&self) -> Vec<String> {
            self.core.tool_allowlist()
        }
        fn tier(&self) -> lsm_phase::LlmTier {
            self.core.tier()
        }
    };
}
pub(crate) use card_from_core;

/// Whether a phase that stopped this way should end the collecting part of a run: the budget
/// is gone or a stop was asked for (later phases would return at once), or the phase failed.
pub(crate) fn halts(reason: StopReason) -> bool {
    reason.ends_run() || reason == StopReason::Error
}

/// The text a phase produced, unless it ended in `error` (then its text is the error message,
/// not an answer).
pub(crate) fn answer_of(result: &PhaseResult) -> Option<&str> {
    let text = result.final_text.trim();
    (result.stop_reason != StopReason::Error && !text.is_empty()).then_some(text)
}

/// The successful results of `tool` in `result`, each clipped to `max_chars`.
pub(crate) fn tool_results(result: &PhaseResult, tool: &str, max_chars: usize) -> Vec<String> {
    result
        .tool_calls
        .iter()
        .filter(|c| c.name == tool)
        .filter_map(|c| match &c.outcome {
            ToolOutcome::Result(text) => Some(crate::parse::clip(text, max_chars)),
            ToolOutcome::Error(_) => None,
        })
        .collect()
}

/// The successful tool results of a phase, as a Markdown digest of at most `max_chars`
/// (each result clipped to a fair share), for a later phase in another context.
pub(crate) fn tool_digest(result: &PhaseResult, max_chars: usize) -> String {
    let ok: Vec<(&str, &str)> = result
        .tool_calls
        .iter()
        .filter_map(|c| match &c.outcome {
            ToolOutcome::Result(text) => Some((c.name.as_str(), text.as_str())),
            ToolOutcome::Error(_) => None,
        })
        .collect();
    if ok.is_empty() {
        return String::new();
    }
    let share = (max_chars / ok.len()).max(200);
    let mut out = String::new();
    for (name, text) in ok {
        if out.len() >= max_chars {
            break;
        }
        out.push_str(&format!(
            "- {name}: {}\n",
            crate::parse::clip(text, share).replace('\n', " ")
        ));
    }
    out
}
