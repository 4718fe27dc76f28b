//! [`RunEvent`]: the typed vocabulary of a run. One enum is at once the transcript line (the
//! journal a run's [`crate::RunState`] is folded from), the event sink's input (progress
//! printer, TUI log) and the JSON schema committed as `docs/run-event.schema.json`.
//!
//! On the wire every event is wrapped in an [`EventEnvelope`]: `{"seq", "ts", "run_id",
//! "schema_version", "event": "<name>", ...fields}` (version 1: the untyped transcript of old).

use crate::message::{ToolCall, Usage};
use lsm_phase::{PhaseRequest, PhaseResult};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod names;
mod parts;
mod payloads;

pub(crate) use names::without_reserved;
pub use names::{SCHEMA_VERSION, TOOL_SUMMARY_CHARS, event_schema, summarize};
pub use parts::{
    Decision, EventEnvelope, PhaseMode, RepairAction, RunLaunch, ToolSideEffect, UnknownEvent,
};
pub use payloads::{BudgetExhausted, GuidanceAdded, HookDecision, RunStarted};
pub use payloads::{ConversationContinued, ToolDeferred, ToolUsage, WallTimeExceeded};

/// Everything a run records. See the module documentation for the wire form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    /// The run's first line: who runs, on what, within which limits.
    RunStarted(RunStarted),
    /// The run is a new turn of a finished run's conversation (`--continue`): its contexts.
    ConversationContinued(ConversationContinued),
    /// A process took the run over after its previous process died; written before anything
    /// else it records. A model call requested and not answered is asked again.
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
    /// The project's instruction files (`AGENTS.md`, `LSM.md`) given to the run; recorded
    /// once, after `run_started` (a resumed run uses these texts, never the files again).
    ProjectInstructions {
        /// The files, in the order given, each with its size, hash and the text given.
        files: Vec<crate::context::InstructionFile>,
    },
    /// The environment block given to the run (date, operating system, working folder,
    /// tools and limits); recorded once, after `run_started`.
    EnvironmentContext {
        /// The block.
        text: String,
    },
    /// A nested `AGENTS.md` given to the model just in time: appended to the result of the
    /// tool call that touched its folder; once per run per file.
    GuidanceAdded(GuidanceAdded),
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
        // One list, shared by the calls that offer the same tools.
        tools: std::sync::Arc<[String]>,
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
        /// `kind` (`text_delta`, `tool_call_started`, …) and its fields.
        #[serde(flatten)]
        data: Map<String, Value>,
    },
    /// No further model call fits in the budget.
    BudgetExhausted(BudgetExhausted),
    /// The run's wall-clock limit is reached; the run pauses where it is (resumable).
    WallTimeExceeded(WallTimeExceeded),
    /// A call of a tool handled outside `lsm`: the run pauses until its result is supplied.
    ToolDeferred(ToolDeferred),
    /// A tool call is about to run or be refused; written before anything happens.
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
    ToolUsage(ToolUsage),
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
    HookDecision(HookDecision),
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
    /// The model ended its work with a report (the `complete` control tool); the report's
    /// evidence is checked (references to nothing the run has are listed as dropped).
    WorkReported {
        /// Label.
        label: String,
        /// The phase's iteration.
        iteration: u32,
        /// The report.
        report: lsm_phase::TurnReport,
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
    /// The run asked for worker runs (one call of `run_workers`: a wave).
    WorkersRequested {
        /// The wave's index in the run, from 0.
        wave: u32,
        /// What was asked for.
        requests: Vec<lsm_phase::WorkerRequest>,
        /// How many run at once.
        max_concurrent: usize,
    },
    /// A worker run started (its run folder, for a resumed parent to continue it).
    WorkerStarted {
        /// The wave.
        wave: u32,
        /// The request's item id.
        item_id: String,
        /// The request's capability.
        capability: String,
        /// The agent the worker runs.
        agent: String,
        /// The worker's run id.
        worker_run_id: String,
        /// The parent's run id.
        parent_run_id: String,
        /// The worker's run folder.
        run_dir: String,
        /// What it was asked to do.
        objective: String,
    },
    /// What a worker is doing, for whoever watches the parent (event sink only, never
    /// journaled; `seq` 0).
    WorkerProgress {
        /// The request's item id.
        item_id: String,
        /// The request's capability.
        capability: String,
        /// The worker's run id.
        worker_run_id: String,
        /// The parent's run id.
        parent_run_id: String,
        /// The worker's event it stands for.
        worker_event: String,
        /// One line.
        update: String,
    },
    /// One finding of a worker's report.
    WorkerFinding {
        /// The wave.
        wave: u32,
        /// The request's item id.
        item_id: String,
        /// The worker's run id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_run_id: Option<String>,
        /// The parent's run id.
        parent_run_id: String,
        /// The finding.
        finding: lsm_phase::Finding,
    },
    /// One learning of a worker's report.
    WorkerLearning {
        /// The wave.
        wave: u32,
        /// The request's item id.
        item_id: String,
        /// The worker's run id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_run_id: Option<String>,
        /// The parent's run id.
        parent_run_id: String,
        /// The learning.
        learning: String,
    },
    /// A worker did what it was asked (its last phase `done`, its report successful).
    WorkerCompleted {
        /// The wave.
        wave: u32,
        /// The request's item id.
        item_id: String,
        /// The worker's run id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_run_id: Option<String>,
        /// The parent's run id.
        parent_run_id: String,
        /// How it ended, with its report.
        outcome: lsm_phase::WorkerOutcome,
        /// What its model calls spent (charged to the tree's budget).
        usage: crate::usage::RunUsage,
    },
    /// A worker failed, blocked, stalled or stopped (or could not run).
    WorkerFailed {
        /// The wave.
        wave: u32,
        /// The request's item id.
        item_id: String,
        /// The worker's run id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_run_id: Option<String>,
        /// The parent's run id.
        parent_run_id: String,
        /// How it ended.
        outcome: lsm_phase::WorkerOutcome,
        /// What its model calls spent.
        usage: crate::usage::RunUsage,
    },
    /// Every worker of a wave ended; their outcomes in the order asked (a resumed run
    /// replays the wave from this).
    WorkersFinished {
        /// The wave.
        wave: u32,
        /// The outcomes.
        outcomes: Vec<lsm_phase::WorkerOutcome>,
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

#[cfg(test)]
mod tests;
