//! What passes between the driver and the core: the run's fixed settings ([`CoreConfig`]),
//! what the driver knows at a step ([`Env`]), what it learned ([`Input`]) and what it must do
//! next ([`Effect`]).

use std::collections::HashSet;
use std::sync::Arc;

use lsm_phase::{PhaseRequest, PhaseResult};
use serde_json::Value;

use crate::budget::{BudgetLimits, BudgetSnapshot, Grant};
use crate::config::{ContextStrategy, StopMode};
use crate::contract::{FileFact, TaskContract};
use crate::event::{Decision, RunEvent, RunLaunch};
use crate::guard::ToolCallGuard;
use crate::hooks::{Hook, HookEvent, HookRun};
use crate::message::{LlmRequest, LlmResponse, Pricing, ToolDefinition, Usage};
use crate::stall::{CallIdentity, StallConfig};
use crate::usage::RunUsage;

/// What the core needs to know about the run that never changes while it runs.
pub struct CoreConfig {
    /// The agent.
    pub agent: String,
    /// The task or topic (recorded in `run_started`).
    pub topic: String,
    /// The run's system prompt.
    pub system_prompt: String,
    /// The tools the agent may ever call.
    pub allowlist: HashSet<String>,
    /// The allowlist in the agent's order (for the record).
    pub allowlist_order: Vec<String>,
    /// Every registered tool's definition (the sandbox's registry), shared with the
    /// requests that offer it.
    pub tools: Vec<std::sync::Arc<ToolDefinition>>,
    /// Offer the `block` control tool.
    pub offer_block_tool: bool,
    /// Offer the `complete` control tool.
    pub offer_complete_tool: bool,
    /// History trimming.
    pub strategy: ContextStrategy,
    /// The run's budget ceilings.
    pub limits: BudgetLimits,
    /// Provider name.
    pub provider: String,
    /// Model.
    pub model: String,
    /// Argument checks run after the allowlist and `tool_names`.
    pub guards: Vec<Arc<dyn ToolCallGuard>>,
    /// How the owner started the run (recorded in `run_started`).
    pub launch: Option<RunLaunch>,
    /// Stall detection.
    pub stall: StallConfig,
    /// Which arguments identify a call of which tool (recorded in `run_started`).
    pub call_identity: CallIdentity,
    /// Hooks (the driver runs them; the core decides on their answers).
    pub hooks: Vec<Arc<dyn Hook>>,
    /// How often `agent_stop` hooks may block a stop in one phase.
    pub agent_stop_max_blocks: u32,
    /// The stop mode (recorded in `run_started`; a resumed run uses the recorded one).
    pub stop_mode: StopMode,
    /// How often the completion checks may object in one phase (recorded likewise).
    pub completion_retries: u32,
    /// The task contract (recorded likewise).
    pub contract: Option<TaskContract>,
    /// Offer the work-item tools to the agent whatever its allowlist says.
    pub work_items: bool,
    /// Context compaction's settings.
    pub compaction: crate::compaction::CompactionConfig,
    /// The model's window and compaction's marks (from the settings and the provider).
    pub window: crate::compaction::Window,
    /// Whether a memory source gives the calls standing context. Without one the next call
    /// is prepared in the same step (no [`Effect::FetchStanding`], whose answer could only
    /// be "nothing").
    pub standing_memory: bool,
    /// The standing texts of the run's context providers, recorded when the run starts
    /// (empty: none; a resumed run has the recorded ones and ignores these).
    pub run_context: crate::context::RunContext,
    /// The tools whose calls may run at the same time as other calls of one answer:
    /// read-only ones the sandbox runs without asking permission (the driver knows which).
    pub concurrent_tools: HashSet<String>,
    /// How many calls of one answer may run at once (`[agents] max_parallel_tools`; 1 runs
    /// every call alone).
    pub max_parallel_tools: usize,
    /// The tools handled outside `lsm` (deferred): a call of one pauses the run until its
    /// result is supplied.
    pub deferred_tools: HashSet<String>,
    /// The finished run's conversation this run continues (recorded when the run starts).
    pub continuation: Option<crate::event::ConversationContinued>,
}

impl std::fmt::Debug for CoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreConfig")
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

/// What the driver knows at the moment of a step, besides its input.
pub struct Env<'a> {
    /// A stop was requested.
    pub stop: bool,
    /// The budget as it is now.
    pub budget: BudgetSnapshot,
    /// The model's prices.
    pub pricing: Option<Pricing>,
    /// The provider's prompt-token estimate of a request (a pure computation).
    pub estimate: &'a dyn Fn(&LlmRequest) -> u64,
    /// Now (RFC 3339, UTC), for decisions' timestamps.
    pub now: String,
}

/// What a tool call did, as the sandbox reported it.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolRun {
    /// The tool ran (or the sandbox refused it).
    Ran {
        /// The output, or why there is none and whether that is a denial.
        outcome: Result<String, ToolFailure>,
        /// Files the call wrote.
        artifacts: Vec<String>,
        /// The permission decision, if one was made.
        permission: Option<Decision>,
        /// Side effects the tool reported.
        events: Vec<ToolEffect>,
    },
    /// A stop was requested while the tool ran; its outcome is unknown.
    Interrupted,
}

/// A side effect a tool reported for the run's records (the sandbox's `ToolEvent`): the
/// wire name of its kind and its details. Recorded as the event of that name when the run
/// knows it (`memory_written`, `memory_approved`, `memory_removed`), else as `tool_event`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolEffect {
    /// The kind's wire name.
    pub kind: String,
    /// Details (a JSON object; its keys become the recorded event's fields).
    pub data: Value,
}

/// Why a tool call has no output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// The message the model gets.
    pub message: String,
    /// A permission or policy refusal (recorded as `tool_denied`).
    pub denial: bool,
}

/// What the tool's own model calls charged to the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolSpend {
    /// Calls.
    pub llm_calls: u64,
    /// Their usage.
    pub usage: Usage,
    /// Their cost.
    pub cost_usd: Option<f64>,
    /// The run's totals after the tool.
    pub totals: RunUsage,
}

/// One thing the driver learned.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The agent asks for a phase; `conversation_id` is used if the phase starts a context.
    Start {
        /// The request.
        request: PhaseRequest,
        /// A fresh conversation id.
        conversation_id: String,
    },
    /// The standing-memory block for the next call.
    Standing(Option<String>),
    /// The model answered; the call was charged `cost` and the run's totals are `totals`.
    Answered {
        /// The answer.
        response: LlmResponse,
        /// The call's cost.
        cost: Option<f64>,
        /// The run's totals after it.
        totals: RunUsage,
    },
    /// The model call failed after the provider's retries.
    ModelFailed {
        /// What went wrong.
        error: String,
        /// The stored response id is no longer valid.
        chain_broken: bool,
    },
    /// A stop was requested while the model call was in flight (the call was abandoned).
    StoppedDuringCall,
    /// The run's wall-clock limit passed (before the next effect, or while one was under
    /// way, which was abandoned): the phase pauses where it is, resumable.
    OutOfTime {
        /// What was under way (`llm_call`, `tools`, `hooks`, `standing`, `between`).
        at: String,
        /// The run's wall-clock time so far, its earlier processes' included, in seconds.
        elapsed_seconds: f64,
        /// The limit.
        max_wall_seconds: u64,
    },
    /// A tool call ended.
    ToolDone {
        /// What it did.
        run: ToolRun,
        /// What its own model calls spent, if it made any.
        spend: Option<ToolSpend>,
        /// Nested instruction files that apply to the paths the call touched (the core
        /// gives the model those the run has not been given yet).
        guidance: Vec<crate::context::InstructionFile>,
    },
    /// The calls of an [`Effect::RunTools`] ended, in its order.
    ToolsDone(Vec<ToolDone>),
    /// The result of the deferred call the run waits for, supplied from outside (`lsm runs
    /// resume --tool-result`): recorded as its result, and the loop goes on.
    Supplied {
        /// The call's id.
        call_id: String,
        /// Its result.
        content: String,
    },
    /// The driver could not record the last events: the phase ends as `error`.
    RecordFailed(String),
    /// What the driver found at the paths of an [`Effect::CheckFiles`], in its order.
    FilesChecked(Vec<(String, FileFact)>),
    /// The hooks of `event` ran (those that match it, in order, up to the first refusal).
    HooksAnswered {
        /// What they were told (as in [`Effect::RunHooks`]).
        event: HookEvent,
        /// Their answers.
        runs: Vec<HookRun>,
    },
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Ask the memory provider for the standing block about `topic`.
    FetchStanding {
        /// The last user message of the phase's context.
        topic: String,
    },
    /// Call the model with `request` (its output cap set), holding `grant` of the budget.
    CallModel {
        /// The request.
        request: LlmRequest,
        /// The budget share the call holds until charged.
        grant: Grant,
    },
    /// Run the pending tool call through the sandbox.
    RunTool {
        /// Its id.
        call_id: String,
        /// The tool.
        tool: String,
        /// Its arguments.
        arguments: Value,
    },
    /// Run these calls (all started, all read-only) at the same time through the sandbox
    /// and answer with [`Input::ToolsDone`], in this order.
    RunTools(Vec<ToolInvocation>),
    /// Run the hooks that match `event` (the driver fills in its `run_id`) and answer
    /// with [`Input::HooksAnswered`].
    RunHooks(HookEvent),
    /// Look at these files (paths a task contract names, as the tools resolve them) and
    /// answer with [`Input::FilesChecked`].
    CheckFiles(Vec<String>),
    /// The phase is over.
    Finish(PhaseResult),
}

/// One call of an [`Effect::RunTools`].
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInvocation {
    /// Its id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: Value,
}

/// How one call of an [`Effect::RunTools`] ended (as [`Input::ToolDone`] for one call).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDone {
    /// The call's id.
    pub call_id: String,
    /// What it did.
    pub run: ToolRun,
    /// What its own model calls spent (the driver may charge a group's spending to its
    /// last call: concurrent calls share the run's ledger).
    pub spend: Option<ToolSpend>,
    /// Nested instruction files that apply to the paths it touched.
    pub guidance: Vec<crate::context::InstructionFile>,
}

/// The events of one step and what comes next.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// To record, in order (already applied to the state).
    pub events: Vec<RunEvent>,
    /// What to do next.
    pub effect: Effect,
}
