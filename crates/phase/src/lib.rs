//! The phase contract: the only vocabulary an agent and the harness share.
//!
//! An agent asks for one *bounded phase* of LLM + tool work with a [`PhaseRequest`] and gets
//! back a [`PhaseResult`]: the last text, the tool calls made, and why the phase stopped.
//! The [`PhaseExecutor`] trait is implemented by the harness; agents reach it only through an
//! [`ExecutorFactory`] handed to them by the composition root.
//!
//! Besides the contract, [`text`] holds the one character cut that the crates above share
//! (this leaf is the lowest crate they can all reach).
//!
//! # What this crate must never do
//!
//! - Depend on any other `lsm-*` crate (checked by `cargo xtask check-layers`).
//! - Carry accounting data. [`PhaseResult`] has exactly three fields and no token, cost or
//!   budget figure; Rust structs are closed, so nothing can be attached at run time, and a
//!   serialization test checks the wire form has exactly `final_text`, `tool_calls` and
//!   `stop_reason`. An agent learns *why* a phase stopped, never *how much* it consumed.

use std::fmt;

use serde::{Deserialize, Serialize};

mod report;
pub mod text;

pub use report::{Finding, TurnReport, WorkerOutcome, WorkerRequest};

/// Why a bounded phase stopped. Serialized in `snake_case` (`"budget_exhausted"`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished: it answered without requesting a tool (or tool-only mode ran).
    Done,
    /// The phase used all of its `max_iterations` LLM calls without finishing.
    MaxIterations,
    /// The run's token (or cost) ceiling is reached; no further LLM call will be made in
    /// this run, in this phase or any later one.
    BudgetExhausted,
    /// Someone asked the run to stop.
    StopRequested,
    /// The model said it cannot proceed (the reserved `block` control tool); the reason is in
    /// `final_text`.
    Blocked,
    /// The phase could not continue (for example the provider failed after its retries, or
    /// the run's records could not be written); the reason is in `final_text` and in the
    /// run's transcript.
    Error,
    /// The model repeated the same iteration (same calls with the same results, or the same
    /// answer) after it was told it was not making progress: the harness's stall detection
    /// ended the phase.
    Stalled,
    /// The model tried to finish a phase that completes the task, but the run's completion
    /// checks (the `work_complete` declaration, the task contract, open work items) were not
    /// met after the allowed retries, in the `strict_automation` stop mode. What was unmet is
    /// in the run's records.
    ContractUnmet,
    /// The run's wall-clock limit (`max_wall_seconds`) is reached. The run is not finished:
    /// its journal keeps the phase where it was, to be resumed (with a higher limit) counting
    /// the time already spent.
    WallTimeExceeded,
    /// The model called a tool that is handled outside `lsm` (a deferred tool): the run
    /// pauses, its journal keeping the call, until its result is supplied on resume.
    Deferred,
}

impl StopReason {
    /// Every stop reason, in declaration order.
    pub const ALL: [StopReason; 10] = [
        StopReason::Done,
        StopReason::MaxIterations,
        StopReason::BudgetExhausted,
        StopReason::StopRequested,
        StopReason::Blocked,
        StopReason::Error,
        StopReason::Stalled,
        StopReason::ContractUnmet,
        StopReason::WallTimeExceeded,
        StopReason::Deferred,
    ];

    /// The wire name (`"done"`, `"max_iterations"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Done => "done",
            StopReason::MaxIterations => "max_iterations",
            StopReason::BudgetExhausted => "budget_exhausted",
            StopReason::StopRequested => "stop_requested",
            StopReason::Blocked => "blocked",
            StopReason::Error => "error",
            StopReason::Stalled => "stalled",
            StopReason::ContractUnmet => "contract_unmet",
            StopReason::WallTimeExceeded => "wall_time_exceeded",
            StopReason::Deferred => "deferred",
        }
    }

    /// Whether a multi-phase agent should stop starting new phases after this one
    /// (budget or time gone, a deferred call, a stop requested: later phases would return
    /// at once anyway).
    pub fn ends_run(self) -> bool {
        matches!(
            self,
            StopReason::BudgetExhausted
                | StopReason::StopRequested
                | StopReason::WallTimeExceeded
                | StopReason::Deferred
        )
    }

    /// Whether the run pauses on this stop rather than finishing: its journal stays open,
    /// and a resume goes on from where it is.
    pub fn pauses_run(self) -> bool {
        matches!(self, StopReason::WallTimeExceeded | StopReason::Deferred)
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one tool call ended: `{"result": "..."}` or `{"error": "..."}` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    /// The tool ran; its (capped, redacted) output.
    Result(String),
    /// The call was rejected or failed; the message the model was given.
    Error(String),
}

impl ToolOutcome {
    /// True for [`ToolOutcome::Error`].
    pub fn is_error(&self) -> bool {
        matches!(self, ToolOutcome::Error(_))
    }

    /// The output or the error message.
    pub fn text(&self) -> &str {
        match self {
            ToolOutcome::Result(s) | ToolOutcome::Error(s) => s,
        }
    }
}

/// One tool call made during a phase, whether it ran or was refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallRecord {
    /// The tool's name as requested.
    pub name: String,
    /// The arguments as requested (a JSON object, or whatever the model sent).
    pub arguments: serde_json::Value,
    /// What happened.
    pub outcome: ToolOutcome,
}

/// The only thing a phase returns. Operational output, never accounting data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseResult {
    /// The last LLM response text of the phase (empty in tool-only mode).
    pub final_text: String,
    /// Every tool call of the phase, in order, including refused ones.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Why the phase stopped.
    pub stop_reason: StopReason,
}

impl PhaseResult {
    /// A result with no text and no tool calls.
    pub fn empty(stop_reason: StopReason) -> Self {
        PhaseResult {
            final_text: String::new(),
            tool_calls: Vec::new(),
            stop_reason,
        }
    }
}

/// A tool call given directly by the agent in tool-only mode (no LLM involved).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirectToolCall {
    /// Tool name.
    pub name: String,
    /// Arguments (normally a JSON object).
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// Default number of LLM iterations of one phase.
pub const DEFAULT_PHASE_MAX_ITERATIONS: u32 = 10;

/// One bounded phase, as asked for by an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhaseRequest {
    /// The user message that opens the phase (ignored in tool-only mode).
    #[serde(default)]
    pub user_message: String,
    /// Restrict the agent's allowlist to these tools for this phase. `None`: every
    /// allowlisted tool; `Some(vec![])`: no tool (the model still runs, tool calls are refused).
    #[serde(default)]
    pub tool_names: Option<Vec<String>>,
    /// At most this many LLM calls in this phase.
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u32,
    /// `false` resets the history of this phase's context label (and only that one).
    #[serde(default = "default_true")]
    pub continue_context: bool,
    /// The named conversation context; `None` is the primary context, distinct from every name.
    #[serde(default)]
    pub context_label: Option<String>,
    /// Tool-only mode: run these calls through the sandbox with no LLM call.
    #[serde(default)]
    pub direct_tool_calls: Option<Vec<DirectToolCall>>,
    /// This phase is the one that completes the agent's task: when the model signals that it
    /// is done, the executor's completion checks apply (the stop mode's `work_complete`
    /// declaration, the run's task contract, open work items). Single-phase agents set it on
    /// their phase, multi-phase agents on their last; other phases end when the model is done.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub completes_task: bool,
}

fn default_max_iterations() -> u32 {
    DEFAULT_PHASE_MAX_ITERATIONS
}

fn default_true() -> bool {
    true
}

impl PhaseRequest {
    /// A phase with this user message and the defaults: every allowlisted tool,
    /// [`DEFAULT_PHASE_MAX_ITERATIONS`], continuing the primary context.
    pub fn new(user_message: impl Into<String>) -> Self {
        PhaseRequest {
            user_message: user_message.into(),
            tool_names: None,
            max_iterations: DEFAULT_PHASE_MAX_ITERATIONS,
            continue_context: true,
            context_label: None,
            direct_tool_calls: None,
            completes_task: false,
        }
    }

    /// A tool-only phase running exactly these calls.
    pub fn direct(calls: Vec<DirectToolCall>) -> Self {
        PhaseRequest {
            direct_tool_calls: Some(calls),
            ..PhaseRequest::new("")
        }
    }

    /// Set `tool_names`.
    pub fn with_tool_names<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.tool_names = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Set `max_iterations`.
    pub fn with_max_iterations(mut self, n: u32) -> Self {
        self.max_iterations = n;
        self
    }

    /// Set `continue_context`.
    pub fn with_continue_context(mut self, keep: bool) -> Self {
        self.continue_context = keep;
        self
    }

    /// Mark the phase as the one that completes the task (`completes_task`).
    pub fn completing_task(mut self) -> Self {
        self.completes_task = true;
        self
    }

    /// Set `context_label`.
    pub fn with_context_label(mut self, label: Option<impl Into<String>>) -> Self {
        self.context_label = label.map(Into::into);
        self
    }
}

impl Default for PhaseRequest {
    fn default() -> Self {
        PhaseRequest::new("")
    }
}

/// The LLM tier an agent asks for; the composition root maps tiers to concrete models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LlmTier {
    /// Cheap and fast.
    Quick,
    /// The default.
    #[default]
    Normal,
    /// The strongest configured model.
    Complex,
}

/// Who is asking for an executor: what an agent *is* and what it may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentIdentity {
    /// Agent name; names its workspace folder.
    pub name: String,
    /// The tools this agent may ever call; a phase can only narrow it.
    pub tool_allowlist: Vec<String>,
    /// The LLM tier the agent wants.
    #[serde(default)]
    pub tier: LlmTier,
    /// What the run is about (the task or topic), recorded in the run summary.
    #[serde(default)]
    pub topic: String,
}

/// Runs bounded phases for one agent run. Implemented by the harness.
///
/// One executor lives for one run: it keeps the conversation contexts, the budget and the
/// records between phases. It never panics and never returns an error: a failure is a
/// [`PhaseResult`] with [`StopReason::Error`].
#[async_trait::async_trait]
pub trait PhaseExecutor: Send {
    /// Run one bounded phase.
    async fn run_bounded(&mut self, request: PhaseRequest) -> PhaseResult;

    /// End the run: write its summary with this status. Called once by the agent layer when
    /// the run is over; an executor dropped without it still leaves its transcript behind.
    async fn finish(&mut self, outcome: RunOutcome);

    /// Note a file the agent layer wrote itself for this run (an artifact under the agent's
    /// own workspace), so the run's records list it beside the files its tools wrote. The
    /// default ignores it.
    fn record_artifact(&mut self, _path: &std::path::Path) {}

    /// What the run reports so far: the model's `complete` report, or its last answer as the
    /// summary. `None` before any phase ran (and by default).
    fn report(&self) -> Option<TurnReport> {
        None
    }

    /// Run worker agent runs for `requests`, at most `max_concurrent` at once, sharing this
    /// run's budget and stop; return when every one has ended, their outcomes in the order
    /// of `requests`. A worker that fails, blocks or stalls is an outcome, never an error.
    /// The default (an executor that cannot start workers) fails each request.
    async fn run_workers(
        &mut self,
        requests: Vec<WorkerRequest>,
        max_concurrent: usize,
    ) -> Vec<WorkerOutcome> {
        let _ = max_concurrent;
        requests
            .iter()
            .map(|r| WorkerOutcome::failed(r, "this executor cannot start worker runs"))
            .collect()
    }
}

/// How a whole agent run ended, as the agent layer reports it to its executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// The agent finished its work.
    Completed,
    /// The agent stopped early; the reason is the stop reason of its last phase.
    Stopped(StopReason),
    /// The agent itself failed (outside any phase).
    Failed,
}

/// Creates one [`PhaseExecutor`] per agent run.
pub trait ExecutorFactory: Send + Sync {
    /// A new executor for a run of `agent`, with `system_prompt` fixed for the whole run.
    fn create(&self, agent: &AgentIdentity, system_prompt: &str) -> Box<dyn PhaseExecutor>;
}

#[cfg(test)]
mod tests;
