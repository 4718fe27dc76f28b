//! [`RunEvent`]: the typed vocabulary of a run. One enum is at once the transcript line (the
//! journal a run's [`crate::RunState`] is folded from), the event sink's input (progress
//! printer, TUI log) and the JSON schema committed as `docs/run-event.schema.json`.
//!
//! On the wire every event is wrapped in an [`EventEnvelope`]: `{"seq", "ts", "run_id",
//! "schema_version", "event": "<name>", ...fields}`. Version 1 was the untyped transcript of
//! earlier releases; the renames are listed in `docs/CHANGELOG.md`.

use lsm_phase::{PhaseRequest, PhaseResult};
use lsm_providers::{ToolCall, Usage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The transcript format this release writes.
pub const SCHEMA_VERSION: u32 = 2;

/// Longest `summary` of a [`RunEvent::ToolResult`], in characters.
pub const TOOL_SUMMARY_CHARS: usize = 200;

/// One line of a run's transcript: an event and where it sits in the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventEnvelope {
    /// Position in the run's journal, from 1, without gaps. Events that are never journaled
    /// (streamed model output, sent to the event sink only) carry 0.
    pub seq: u64,
    /// When the event was recorded (RFC 3339, UTC, milliseconds).
    pub ts: String,
    /// The run.
    pub run_id: String,
    /// The transcript format ([`SCHEMA_VERSION`] when written by this release).
    pub schema_version: u32,
    /// The event; its name is the `event` key.
    #[serde(flatten)]
    pub event: RunEvent,
}

/// How a phase runs: the model loop, or the agent's own tool calls with no model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PhaseMode {
    /// Model calls and the tool calls they ask for.
    Llm,
    /// The request's `direct_tool_calls`, no model call.
    ToolOnly,
}

/// How a run's owner started it: what it needs besides the agent, the topic and the limits
/// (in `run_started`) to build the same run again. The harness records it and never reads it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunLaunch {
    /// The provider as the owner named it (`openai`, `scripted:/abs/script.jsonl`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_spec: Option<String>,
    /// The model as the owner named it, when not the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The API base URL, when not the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The working directory relative paths were resolved against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// The iteration limit of long phases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// The research agent's refinement rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// Tools added to the agent's allowlist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_tools: Vec<String>,
}

/// What a resumed run does about a tool call that started and never finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RepairAction {
    /// Run it again: the tool is `read_only`, or the call was still waiting for a person's
    /// decision (so it had not run); a pending request is posted again.
    RunAgain,
    /// Not run again: the model gets a failed result saying the call was interrupted and may
    /// or may not have taken effect.
    ReportInterrupted,
}

/// A permission or policy decision about one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Decision {
    /// The tool.
    pub tool_name: String,
    /// Let through?
    pub allowed: bool,
    /// Why.
    pub reason: String,
    /// When (RFC 3339, UTC).
    pub timestamp: String,
}

/// Everything a run records. See the module documentation for the wire form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    /// The run's first line: who runs, on what, within which limits.
    RunStarted {
        /// The agent.
        agent: String,
        /// The task or topic as known when the run started.
        topic: String,
        /// The tools the agent may ever call.
        tool_allowlist: Vec<String>,
        /// Provider name.
        provider: String,
        /// Model.
        model: String,
        /// The run's token ceiling.
        max_tokens_budget: u64,
        /// The run's cost ceiling, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_cost_usd: Option<f64>,
        /// History trimming (`compact`, `fresh` or `full`).
        context_window_strategy: crate::ContextStrategy,
        /// How the run's owner started it, so that it can rebuild the run to resume it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        launch: Option<RunLaunch>,
        /// The tools whose calls are identified by some of their arguments only (stall
        /// detection's fingerprint); a tool absent here is identified by all of them.
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        call_identity: crate::stall::CallIdentity,
        /// How strictly a phase that completes the task must prove it.
        #[serde(default)]
        stop_mode: crate::StopMode,
        /// How often the completion checks may send the model back in one phase.
        #[serde(default = "default_completion_retries")]
        completion_retries: u32,
        /// The run's task contract, if it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        contract: Option<crate::contract::TaskContract>,
    },
    /// A process took the run over after its previous process died; written before anything
    /// else that process records. A model call requested and not answered is forgotten (it
    /// is requested again).
    RunResumed {
        /// The resuming process.
        pid: u32,
        /// The last journal line the previous process wrote.
        after_seq: u64,
    },
    /// A tool call started and never finished by a process that died is repaired by the
    /// tool's declared idempotency.
    ToolCallRepaired {
        /// Label (`None` in tool-only mode).
        label: Option<String>,
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// What is done about it.
        action: RepairAction,
    },
    /// A bounded phase begins (was `phase_start`).
    PhaseStarted {
        /// The phase's index in the run, from 0.
        phase: u32,
        /// The context label (`__default__` for the primary context).
        label: String,
        /// Model loop or tool-only.
        mode: PhaseMode,
        /// The request exactly as the agent made it.
        request: PhaseRequest,
        /// The label's conversation id once the phase has started (a new one when the context
        /// was created or reset by this phase); `None` in tool-only mode.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation_id: Option<String>,
    },
    /// The standing-memory block changed (recorded when it changes, not with every call).
    StandingContext {
        /// Label.
        label: String,
        /// The phase's iteration, from 1.
        iteration: u32,
        /// The block, or `None` when there is none any more.
        text: Option<String>,
    },
    /// A model call is about to be made.
    LlmRequest {
        /// Label.
        label: String,
        /// The phase's iteration, from 1.
        iteration: u32,
        /// Provider name.
        provider: String,
        /// Model.
        model: String,
        /// Messages sent.
        messages: usize,
        /// Whether a standing-memory block was sent.
        standing_context: bool,
        /// Whether the work items' reminder was sent (appended as the last message).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        work_items: bool,
        /// Names of the tools offered.
        tools: Vec<String>,
        /// The call's output cap (what is left of the budget, at most the configured cap).
        max_output_tokens: Option<u64>,
        /// The response the call chains from.
        previous_response_id: Option<String>,
        /// The prompt-cache key (`<agent>:<label>`).
        prompt_cache_key: Option<String>,
        /// The provider's estimate of the prompt's tokens.
        prompt_tokens_estimate: u64,
    },
    /// The model answered.
    LlmResponse {
        /// Label.
        label: String,
        /// The phase's iteration, from 1.
        iteration: u32,
        /// The full text.
        text: String,
        /// The tool calls asked for, with their ids.
        tool_calls: Vec<ToolCall>,
        /// What the call used.
        usage: Usage,
        /// The provider's response id (chaining).
        response_id: Option<String>,
        /// The run's tokens after this call.
        tokens_used: u64,
        /// This call's cost, when the provider has prices.
        cost_usd: Option<f64>,
        /// The run's cost after this call.
        total_cost_usd: Option<f64>,
    },
    /// The provider retries a failed attempt.
    LlmRetry {
        /// Label.
        label: String,
        /// The attempt that failed (from 1).
        attempt: u32,
        /// The wait before the next attempt.
        delay_ms: u64,
        /// Why it failed.
        reason: String,
    },
    /// The server lost the conversation chain; the call is repeated with the full history.
    LlmChainReset {
        /// Label.
        label: String,
        /// The server's explanation.
        reason: String,
    },
    /// The model call failed for good; the phase ends as `error`.
    LlmError {
        /// Label.
        label: String,
        /// What went wrong.
        error: String,
        /// The failure means the stored response id is no longer valid.
        #[serde(default)]
        chain_broken: bool,
    },
    /// Streamed progress of a call (text and tool-call pieces): event sink only, never
    /// journaled. `kind` and the piece's fields are as the provider reports them.
    LlmStream {
        /// Label.
        label: String,
        /// `kind` (`text_delta`, `tool_call_started`, `tool_call_arguments_delta`) and its
        /// fields.
        #[serde(flatten)]
        data: Map<String, Value>,
    },
    /// No further model call fits in the budget.
    BudgetExhausted {
        /// Label.
        label: String,
        /// Which ceiling is reached.
        reason: String,
        /// The run's tokens so far.
        tokens_used: u64,
        /// The run's token ceiling.
        max_tokens_budget: u64,
        /// The run's cost so far.
        cost_usd: Option<f64>,
        /// The run's cost ceiling.
        max_cost_usd: Option<f64>,
        /// The refused prompt's estimate, when the refusal was about one prompt.
        prompt_tokens_estimate: Option<u64>,
    },
    /// A tool call is about to run or be refused; written before anything happens
    /// (was `tool_call`).
    ToolCallStarted {
        /// Label (`None` in tool-only mode).
        label: Option<String>,
        /// The call's id (the model's; `direct-<phase>-<n>` in tool-only mode).
        call_id: String,
        /// The tool's name.
        tool: String,
        /// The arguments as requested.
        arguments: Value,
    },
    /// What a tool call gave back to the model.
    ToolResult {
        /// Label (`None` in tool-only mode).
        label: Option<String>,
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// The tool ran and succeeded.
        success: bool,
        /// The full output (already capped by the sandbox), or the error message; the model
        /// sees the output, or `Error: <message>`.
        content: String,
        /// The first [`TOOL_SUMMARY_CHARS`] characters of `content`, on one line.
        summary: String,
        /// Files the call wrote.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        artifacts: Vec<String>,
        /// The permission decision made about the call, if one was.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        permission: Option<Decision>,
    },
    /// A tool call was refused (allowlist, `tool_names`, a guard, or the sandbox's policy or
    /// a person); the model gets the reason as the call's error.
    ToolDenied {
        /// Label (`None` in tool-only mode).
        label: Option<String>,
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
        /// The decision, as counted in the summary's `approvals_denials`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        permission: Option<Decision>,
    },
    /// What a tool's own model calls charged to the run.
    ToolUsage {
        /// Label (`None` in tool-only mode).
        label: Option<String>,
        /// The tool.
        tool: String,
        /// Calls made.
        llm_calls: u64,
        /// Their tokens.
        tokens: u64,
        /// Their token breakdown.
        #[serde(default)]
        usage: Usage,
        /// Their cost.
        cost_usd: Option<f64>,
        /// The run's tokens after the tool.
        tokens_used: u64,
        /// The run's cost after the tool.
        total_cost_usd: Option<f64>,
    },
    /// A tool stored a memory. The tool's fields are kept as they are.
    MemoryWritten(ToolSideEffect),
    /// A memory became approved.
    MemoryApproved(ToolSideEffect),
    /// A memory was removed.
    MemoryRemoved(ToolSideEffect),
    /// A side effect of a kind without an event of its own.
    ToolEvent {
        /// The tool's name for it.
        kind: String,
        /// Where, and the tool's fields.
        #[serde(flatten)]
        fields: ToolSideEffect,
    },
    /// A permission or question was posted to a person (from the interaction channel).
    InteractionRequest(Map<String, Value>),
    /// A front end showed the request to a person.
    InteractionAcknowledged(Map<String, Value>),
    /// Nobody answered in time.
    InteractionTimeout(Map<String, Value>),
    /// The request's answer.
    InteractionResponse(Map<String, Value>),
    /// The model called the `block` control tool; the phase ends as `blocked`.
    Blocked {
        /// Label.
        label: String,
        /// The model's reason.
        reason: String,
    },
    /// The phase's last `repeats` iterations were identical (same calls with the same
    /// results, or the same answer): the model is told so, once per phase, and continues.
    StallNudge {
        /// Label.
        label: String,
        /// The iteration after which it was told.
        iteration: u32,
        /// How many identical consecutive iterations.
        repeats: u32,
        /// What the model is told (a user message).
        message: String,
    },
    /// The model went on repeating itself after the nudge; the phase ends as `stalled`.
    Stalled {
        /// Label.
        label: String,
        /// How many identical consecutive iterations.
        repeats: u32,
    },
    /// Hooks were run at `hook` and this is what was decided (one event per moment, so a
    /// resumed run replays the decision without running the hooks again).
    HookDecision {
        /// The moment.
        hook: crate::hooks::HookPoint,
        /// Label (`None` outside a model phase).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// The call (`pre_tool`, `post_tool`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// The tool (`pre_tool`, `post_tool`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        /// `allow`, `deny` (`pre_tool`) or `block` (`agent_stop`).
        decision: String,
        /// Why it was denied or blocked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Notes added to the call's result (`post_tool`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notes: Vec<String>,
        /// Each hook run, in order.
        runs: Vec<crate::hooks::HookRun>,
    },
    /// An `agent_stop` hook blocked the model's stop; the model is told why and continues.
    StopBlocked {
        /// Label.
        label: String,
        /// The hook's reason.
        reason: String,
        /// Blocks in this phase so far, this one included.
        blocks: u32,
        /// What the model is told (a user message).
        message: String,
    },
    /// An `agent_stop` hook still blocked the stop after `agent_stop_max_blocks` blocks: the
    /// stop proceeds anyway (the phase ends `done`).
    StopForced {
        /// Label.
        label: String,
        /// The hook's last reason.
        reason: String,
        /// Blocks in this phase.
        blocks: u32,
    },
    /// A work-item tool changed the run's ledger; `item` is the item after the change.
    WorkItemChanged {
        /// Label (`None` in tool-only mode).
        label: Option<String>,
        /// The call that changed it.
        call_id: String,
        /// What changed.
        action: crate::work_items::WorkItemAction,
        /// The item as it is now.
        item: crate::work_items::WorkItem,
    },
    /// The model declared the task complete with the `work_complete` control tool.
    WorkCompleteDeclared {
        /// Label.
        label: String,
        /// The phase's iteration.
        iteration: u32,
        /// The model's summary.
        summary: String,
    },
    /// The task contract was checked: its coverage ledger (at a stop the model attempted, or
    /// at the end of the run, for the summary).
    ContractChecked {
        /// Label (`None` at the end of the run).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// The phase's iteration (0 at the end of the run).
        iteration: u32,
        /// `stop` or `run_end`.
        at: String,
        /// Every condition and whether it holds.
        coverage: crate::contract::Coverage,
    },
    /// A completion check sent the model back to work: it tried to stop with something
    /// unmet.
    CompletionObjected {
        /// Label.
        label: String,
        /// Which check: `work_complete`, `contract` or `work_items`.
        check: String,
        /// What is unmet, one line each.
        unmet: Vec<String>,
        /// Objections in this phase so far, this one included.
        retries: u32,
        /// What the model is told (a user message).
        message: String,
    },
    /// The completion checks were still unmet after `completion_retries` objections and the
    /// stop mode is `interactive`: the stop is accepted (the phase ends `done`).
    StopAccepted {
        /// Label.
        label: String,
        /// What was still unmet.
        unmet: Vec<String>,
    },
    /// The completion checks were still unmet after `completion_retries` objections in the
    /// `strict_automation` stop mode: the phase ends `contract_unmet`.
    ContractUnmet {
        /// Label.
        label: String,
        /// What was unmet.
        unmet: Vec<String>,
    },
    /// The prompt of the next model call would not fit the model's context window: the
    /// context's history is compacted down the ladder before the call.
    CompactionStarted {
        /// Label.
        label: String,
        /// The model call it makes room for.
        iteration: u32,
        /// The prompt's estimate before compacting.
        tokens_before: u64,
        /// The model's window and the marks compaction works with.
        window: crate::compaction::Window,
    },
    /// One rung of the ladder applied to the context's history (recorded with what the fold
    /// needs to redo it).
    CompactionStep {
        /// Label.
        label: String,
        /// The rung and its data.
        #[serde(flatten)]
        step: crate::compaction::Step,
        /// The prompt's estimate after it.
        tokens_after: u64,
        /// What the summary call used (the `summarize` rung).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// What it cost.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        /// The run's tokens after it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_used: Option<u64>,
    },
    /// The summary call of the `summarize` rung is about to be made.
    CompactionSummaryRequested {
        /// Label.
        label: String,
        /// First message summarized.
        from: usize,
        /// One past the last.
        to: usize,
        /// The summary request's prompt estimate.
        prompt_tokens_estimate: u64,
        /// Its output cap.
        max_output_tokens: u64,
    },
    /// The summary call failed (or answered nothing): the ladder goes on to dropping turns.
    CompactionSummaryFailed {
        /// Label.
        label: String,
        /// Why.
        error: String,
        /// The call was made (and failed, or answered nothing); `false` when the budget
        /// refused it.
        called: bool,
    },
    /// The compaction is over.
    CompactionFinished {
        /// Label.
        label: String,
        /// The model call it made room for.
        iteration: u32,
        /// The rungs applied, in order.
        steps: Vec<String>,
        /// The prompt's estimate before.
        tokens_before: u64,
        /// And after.
        tokens_after: u64,
    },
    /// A stop was seen; the phase ends as `stop_requested`.
    StopRequested {
        /// Label (`None` in tool-only mode).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// Where it was seen: `llm_call`, `tools`, `tool_only`, or absent (before a call).
        #[serde(rename = "where", default, skip_serializing_if = "Option::is_none")]
        at: Option<String>,
    },
    /// The agent layer saved a file of its own for the run.
    Artifact {
        /// The file.
        path: String,
    },
    /// A phase ended (was `phase_end`); carries the complete result, so the phase can be
    /// replayed.
    PhaseEnded {
        /// The phase's index, as in its `phase_started`.
        phase: u32,
        /// Label.
        label: String,
        /// The phase's result, exactly as returned to the agent.
        result: PhaseResult,
        /// The error that ended it, when it ended as `error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The run's last line (was `run_end`).
    RunFinished {
        /// `completed`, `stopped` or `failed`.
        status: String,
        /// The last phase's stop reason, or `error`.
        run_outcome: String,
        /// The run's tokens.
        tokens_used: u64,
    },
}

fn default_completion_retries() -> u32 {
    crate::config::DEFAULT_COMPLETION_RETRIES
}

/// The fields of a tool's side-effect event: where it happened and what the tool reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolSideEffect {
    /// Label (`None` in tool-only mode).
    pub label: Option<String>,
    /// The tool.
    pub tool: String,
    /// What the tool reported (its keys, minus the envelope's own).
    #[serde(flatten)]
    pub data: Map<String, Value>,
}

/// Keys a tool or another producer may not set: the envelope's and the event's name.
const RESERVED: [&str; 5] = ["seq", "ts", "run_id", "schema_version", "event"];

/// `fields` without the envelope's keys.
pub(crate) fn without_reserved(fields: &Map<String, Value>) -> Map<String, Value> {
    fields
        .iter()
        .filter(|(k, _)| !RESERVED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Why an event given by name could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot record the event '{name}': {reason}")]
pub struct UnknownEvent {
    /// The name given.
    pub name: String,
    /// What was wrong.
    pub reason: String,
}

impl RunEvent {
    /// The event's wire name (`"phase_started"`, …).
    pub fn name(&self) -> &'static str {
        match self {
            RunEvent::RunStarted { .. } => "run_started",
            RunEvent::RunResumed { .. } => "run_resumed",
            RunEvent::ToolCallRepaired { .. } => "tool_call_repaired",
            RunEvent::PhaseStarted { .. } => "phase_started",
            RunEvent::StandingContext { .. } => "standing_context",
            RunEvent::LlmRequest { .. } => "llm_request",
            RunEvent::LlmResponse { .. } => "llm_response",
            RunEvent::LlmRetry { .. } => "llm_retry",
            RunEvent::LlmChainReset { .. } => "llm_chain_reset",
            RunEvent::LlmError { .. } => "llm_error",
            RunEvent::LlmStream { .. } => "llm_stream",
            RunEvent::BudgetExhausted { .. } => "budget_exhausted",
            RunEvent::ToolCallStarted { .. } => "tool_call_started",
            RunEvent::ToolResult { .. } => "tool_result",
            RunEvent::ToolDenied { .. } => "tool_denied",
            RunEvent::ToolUsage { .. } => "tool_usage",
            RunEvent::MemoryWritten(_) => "memory_written",
            RunEvent::MemoryApproved(_) => "memory_approved",
            RunEvent::MemoryRemoved(_) => "memory_removed",
            RunEvent::ToolEvent { .. } => "tool_event",
            RunEvent::InteractionRequest(_) => "interaction_request",
            RunEvent::InteractionAcknowledged(_) => "interaction_acknowledged",
            RunEvent::InteractionTimeout(_) => "interaction_timeout",
            RunEvent::InteractionResponse(_) => "interaction_response",
            RunEvent::Blocked { .. } => "blocked",
            RunEvent::StallNudge { .. } => "stall_nudge",
            RunEvent::HookDecision { .. } => "hook_decision",
            RunEvent::StopBlocked { .. } => "stop_blocked",
            RunEvent::StopForced { .. } => "stop_forced",
            RunEvent::Stalled { .. } => "stalled",
            RunEvent::WorkItemChanged { .. } => "work_item_changed",
            RunEvent::WorkCompleteDeclared { .. } => "work_complete_declared",
            RunEvent::ContractChecked { .. } => "contract_checked",
            RunEvent::CompletionObjected { .. } => "completion_objected",
            RunEvent::StopAccepted { .. } => "stop_accepted",
            RunEvent::ContractUnmet { .. } => "contract_unmet",
            RunEvent::CompactionStarted { .. } => "compaction_started",
            RunEvent::CompactionStep { .. } => "compaction_step",
            RunEvent::CompactionSummaryRequested { .. } => "compaction_summary_requested",
            RunEvent::CompactionSummaryFailed { .. } => "compaction_summary_failed",
            RunEvent::CompactionFinished { .. } => "compaction_finished",
            RunEvent::StopRequested { .. } => "stop_requested",
            RunEvent::Artifact { .. } => "artifact",
            RunEvent::PhaseEnded { .. } => "phase_ended",
            RunEvent::RunFinished { .. } => "run_finished",
        }
    }

    /// An event produced outside the harness (the interaction channel), given by `name` and
    /// its `fields` (a JSON object; the envelope's keys in it are dropped).
    ///
    /// # Errors
    /// When `name` is not an event of the schema or `fields` do not fit it.
    pub fn from_parts(name: &str, fields: Value) -> Result<RunEvent, UnknownEvent> {
        let mut object = match fields {
            Value::Object(map) => without_reserved(&map),
            Value::Null => Map::new(),
            other => {
                return Err(UnknownEvent {
                    name: name.to_string(),
                    reason: format!("its fields must be a JSON object, not {other}"),
                });
            }
        };
        object.insert("event".into(), Value::String(name.to_string()));
        serde_json::from_value(Value::Object(object)).map_err(|e| UnknownEvent {
            name: name.to_string(),
            reason: e.to_string(),
        })
    }

    /// Whether this event is written to the journal (stream pieces are not).
    pub fn is_journaled(&self) -> bool {
        !matches!(self, RunEvent::LlmStream { .. })
    }
}

/// The first [`TOOL_SUMMARY_CHARS`] characters of `text` on one line, with `…` when cut.
pub fn summarize(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == TOOL_SUMMARY_CHARS {
            out.push('…');
            break;
        }
        out.push(if c == '\n' || c == '\r' { ' ' } else { c });
    }
    out
}

/// The JSON schema of one transcript line, as committed in `docs/run-event.schema.json`.
pub fn event_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(EventEnvelope)).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(event: RunEvent) -> EventEnvelope {
        EventEnvelope {
            seq: 3,
            ts: "2025-01-01T00:00:00.000Z".into(),
            run_id: "r1".into(),
            schema_version: SCHEMA_VERSION,
            event,
        }
    }

    #[test]
    fn an_envelope_is_one_flat_object_named_by_its_event_key() {
        let e = envelope(RunEvent::StopRequested {
            label: Some("x".into()),
            at: Some("tools".into()),
        });
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            json!({"seq": 3, "ts": "2025-01-01T00:00:00.000Z", "run_id": "r1",
                   "schema_version": 2, "event": "stop_requested", "label": "x",
                   "where": "tools"})
        );
        let back: EventEnvelope = serde_json::from_value(v).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn interaction_and_memory_events_keep_their_fields_and_round_trip() {
        let e = RunEvent::from_parts(
            "interaction_request",
            json!({"request_id": "perm-1", "seq": 99, "prompt": "ok?"}),
        )
        .unwrap();
        assert_eq!(e.name(), "interaction_request");
        let v = serde_json::to_value(envelope(e.clone())).unwrap();
        assert_eq!(v["request_id"], "perm-1");
        assert_eq!(v["seq"], 3, "a producer cannot set the envelope's keys");
        let back: EventEnvelope = serde_json::from_value(v).unwrap();
        assert_eq!(back.event, e);

        let m = RunEvent::MemoryWritten(ToolSideEffect {
            label: None,
            tool: "remember".into(),
            data: json!({"id": "m1", "text": "t"})
                .as_object()
                .unwrap()
                .clone(),
        });
        let v = serde_json::to_value(envelope(m.clone())).unwrap();
        assert_eq!(
            (v["id"].clone(), v["tool"].clone()),
            (json!("m1"), json!("remember"))
        );
        assert_eq!(serde_json::from_value::<EventEnvelope>(v).unwrap().event, m);
    }

    #[test]
    fn an_unknown_name_is_an_error_naming_it() {
        let e = RunEvent::from_parts("no_such_event", json!({})).unwrap_err();
        assert!(e.to_string().contains("no_such_event"), "{e}");
        assert!(RunEvent::from_parts("artifact", json!(["x"])).is_err());
    }

    #[test]
    fn summaries_are_bounded_and_on_one_line() {
        assert_eq!(summarize("a\nb"), "a b");
        let long = "x".repeat(500);
        assert_eq!(summarize(&long).chars().count(), TOOL_SUMMARY_CHARS + 1);
    }

    #[test]
    fn the_committed_schema_is_the_generated_one() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/run-event.schema.json"
        );
        let generated = serde_json::to_string_pretty(&event_schema()).unwrap() + "\n";
        if std::env::var_os("LSM_UPDATE_SCHEMA").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/run-event.schema.json differs from the RunEvent schema; regenerate it with \
             LSM_UPDATE_SCHEMA=1 cargo test -p lsm-harness the_committed_schema"
        );
    }
}
