//! The payloads of the [`super::RunEvent`] variants whose fields are many: each variant
//! holds one of these structs, whose fields are the event's own on the wire (`{"event":
//! "run_started", "agent": …}`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::RunLaunch;
use crate::message::Usage;

/// The run's first line: who runs, on what, within which limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunStarted {
    /// The agent.
    pub agent: String,
    /// The task or topic as known when the run started.
    pub topic: String,
    /// The tools the agent may ever call.
    pub tool_allowlist: Vec<String>,
    /// Provider name.
    pub provider: String,
    /// Model.
    pub model: String,
    /// The run's token ceiling.
    pub max_tokens_budget: u64,
    /// The run's cost ceiling, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// History trimming (`compact`, `fresh` or `full`).
    pub context_window_strategy: crate::config::ContextStrategy,
    /// How the run's owner started it, so that it can rebuild the run to resume it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<RunLaunch>,
    /// The tools whose calls are identified by some of their arguments only (stall
    /// detection's fingerprint); a tool absent here is identified by all of them.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub call_identity: crate::stall::CallIdentity,
    /// How strictly a phase that completes the task must prove it.
    #[serde(default)]
    pub stop_mode: crate::config::StopMode,
    /// How often the completion checks may send the model back in one phase.
    #[serde(default = "default_completion_retries")]
    pub completion_retries: u32,
    /// The run's task contract, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<crate::contract::TaskContract>,
}

/// A nested `AGENTS.md` given to the model just in time: appended to the result of the
/// tool call that touched its folder; once per run per file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GuidanceAdded {
    /// Label.
    pub label: String,
    /// The call whose result it follows.
    pub call_id: String,
    /// That call's tool.
    pub tool: String,
    /// The file.
    pub path: String,
    /// The whole file's size in bytes.
    pub bytes: u64,
    /// The SHA-256 of the whole file, lower-case hex.
    pub sha256: String,
    /// Whether the text was cut to `[agents.context] max_instruction_bytes`.
    #[serde(default)]
    pub truncated: bool,
    /// The text given to the model.
    pub text: String,
}

/// What a tool's own model calls charged to the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolUsage {
    /// Label (`None` in tool-only mode).
    pub label: Option<String>,
    /// The tool.
    pub tool: String,
    /// Calls made.
    pub llm_calls: u64,
    /// Their tokens.
    pub tokens: u64,
    /// Their token breakdown.
    #[serde(default)]
    pub usage: Usage,
    /// Their cost.
    pub cost_usd: Option<f64>,
    /// The run's tokens after the tool.
    pub tokens_used: u64,
    /// The run's cost after the tool.
    pub total_cost_usd: Option<f64>,
}

/// Hooks were run at `hook` and this is what was decided (one event per moment, so a
/// resumed run replays the decision without running the hooks again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HookDecision {
    /// The moment.
    pub hook: crate::hooks::HookPoint,
    /// Label (`None` outside a model phase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The call (`pre_tool`, `post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The tool (`pre_tool`, `post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// `allow`, `deny` (`pre_tool`) or `block` (`agent_stop`).
    pub decision: String,
    /// Why it was denied or blocked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Notes added to the call's result (`post_tool`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Each hook run, in order.
    pub runs: Vec<crate::hooks::HookRun>,
}

/// No further model call fits in the budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BudgetExhausted {
    /// Label.
    pub label: String,
    /// Which ceiling is reached.
    pub reason: String,
    /// The run's tokens so far.
    pub tokens_used: u64,
    /// The run's token ceiling.
    pub max_tokens_budget: u64,
    /// The run's cost so far.
    pub cost_usd: Option<f64>,
    /// The run's cost ceiling.
    pub max_cost_usd: Option<f64>,
    /// The refused prompt's estimate, when the refusal was about one prompt.
    pub prompt_tokens_estimate: Option<u64>,
}

/// The run's wall-clock limit is reached: the phase stops where it is, not ended (no
/// `phase_ended`, no `run_finished`), so that a resumed run goes on from there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WallTimeExceeded {
    /// Label (`None` in tool-only mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// What was under way: `llm_call`, `tools`, `hooks`, `standing`, or `between` (steps).
    #[serde(rename = "where")]
    pub at: String,
    /// The run's wall-clock time so far, its earlier processes' included, in seconds.
    pub elapsed_seconds: f64,
    /// The limit.
    pub max_wall_seconds: u64,
}

/// The model called a tool that is handled outside `lsm` (a deferred tool). Its
/// `tool_call_started` is recorded; its result is not, until a resumed run is given it
/// (`lsm runs resume RUN --tool-result ID=FILE`). The phase pauses, not ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolDeferred {
    /// Label (`None` in tool-only mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: Value,
}

/// The run continues a finished run's conversation (`lsm agent run --continue RUN_ID`):
/// recorded after `run_started`, it carries the contexts the new turn starts from, so that
/// the run's own journal folds back its whole conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConversationContinued {
    /// The run it continues (the conversation's last turn).
    pub from_run_id: String,
    /// The contexts (each label's conversation) as that run left them: a list of
    /// `{"label", "context"}` objects, as the run state keeps them.
    pub contexts: Value,
    /// What the conversation's earlier turns spent: the budget's ledger starts from it; the
    /// run's own totals do not count it.
    pub usage: crate::usage::RunUsage,
}

fn default_completion_retries() -> u32 {
    crate::config::DEFAULT_COMPLETION_RETRIES
}
