//! [`RunState`]: everything needed to continue a run, and [`RunState::apply`], the fold that
//! rebuilds it from the journal. The live loop changes its state only by applying the events
//! it records, so `state == fold(journal)` holds by construction.

use std::collections::{BTreeMap, VecDeque};

use lsm_phase::{PhaseRequest, PhaseResult, StopReason, ToolCallRecord, ToolOutcome, TurnReport};
use serde::{Deserialize, Serialize};

use crate::compaction::{self, Rung, Step};
use crate::config::{ContextStrategy, StopMode};
use crate::contexts::ContextState;
use crate::contract::{Coverage, TaskContract};
use crate::event::{Decision, EventEnvelope, PhaseMode, RunEvent};
use crate::hooks::HookPoint;
use crate::message::{Message, ToolCall};
use crate::stall::{CallIdentity, StallState, fingerprint};
use crate::summary::{ApprovalEvent, ApprovalsDenials, MemoryCounts};
pub use crate::usage::RunUsage;
use crate::wave::{StartedWorker, Wave};
use crate::work_items::{WorkItem, upsert};

mod fold;
mod updates;

/// What the model sees for a call of a blocked phase.
pub(crate) const NOT_EXECUTED_BLOCKED: &str = "Not executed: the phase is blocked.";
/// What the model sees for a call that started, was not finished by a process that died, and
/// is not run again (its tool is not `read_only`).
pub const INTERRUPTED_CALL: &str = "the call was interrupted and may or may not have taken \
effect (the run was resumed after its process ended); check before repeating it";
/// What the model sees for a call skipped by a stop.
pub(crate) const NOT_EXECUTED_STOPPED: &str = "Not executed: a stop was requested.";

/// One context and its label (`None` is the primary context, distinct from every name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabeledContext {
    /// The label.
    pub label: Option<String>,
    /// The conversation.
    pub context: ContextState,
}

/// A tool call recorded as started whose outcome is not recorded yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: serde_json::Value,
    /// The `pre_tool` hooks allowed it (recorded in `hook_decision`).
    #[serde(default)]
    pub hooks_cleared: bool,
    /// Its tool is handled outside `lsm`: the run waits for its result (`tool_deferred`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
}

/// Where the loop is inside the current phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhasePosition {
    /// The phase's index in the run, from 0.
    pub phase: u32,
    /// The request.
    pub request: PhaseRequest,
    /// Model loop or tool-only.
    pub mode: PhaseMode,
    /// Model calls requested in this phase so far.
    pub iteration: u32,
    /// A model call was requested and neither its answer nor its failure is recorded.
    pub awaiting_model: bool,
    /// The last response's text (what the phase returns, unless it ends otherwise).
    pub final_text: String,
    /// The phase's tool calls so far, with their outcomes.
    pub tool_calls: Vec<ToolCallRecord>,
    /// The rest of the current batch of calls: asked for, not started.
    pub batch: VecDeque<ToolCall>,
    /// The call started and not finished, if any (the first, when several run at once).
    pub pending: Option<PendingCall>,
    /// The other calls of a group started together (read-only calls run concurrently,
    /// `[agents] max_parallel_tools`), in the answer's order; empty while `pending` is `None`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parallel: Vec<PendingCall>,
    /// Where the current iteration's calls begin in `tool_calls`.
    #[serde(default)]
    pub iteration_start: usize,
    /// The streak of identical iterations (stall detection).
    #[serde(default)]
    pub stall: StallState,
    /// How often `agent_stop` hooks blocked a stop in this phase.
    #[serde(default)]
    pub agent_stop_blocks: u32,
    /// The `agent_stop` hooks' decision on the stop after iteration `.0`: the block's reason,
    /// or `None` when they allowed it.
    #[serde(default)]
    pub agent_stop_decided: Option<(u32, Option<String>)>,
    /// The iteration in which the model last declared the task complete (`work_complete`).
    #[serde(default)]
    pub work_complete_at: Option<u32>,
    /// The iteration whose stop the task contract was last checked for (its coverage is the
    /// run's `coverage`).
    #[serde(default)]
    pub contract_checked_at: Option<u32>,
    /// How often the completion checks sent the model back in this phase.
    #[serde(default)]
    pub completion_objections: u32,
    /// The last iteration after which the model was sent back to work (a stall nudge, a
    /// completion objection, an `agent_stop` block): its stop is decided, not decided again.
    #[serde(default)]
    pub sent_back_at: Option<u32>,
    /// A compaction of the context under way (before the model call of its iteration).
    #[serde(default)]
    pub compaction: Option<Compacting>,
    /// The iteration whose model call the context was last compacted for (not compacted
    /// again for the same call).
    #[serde(default)]
    pub compacted_at: Option<u32>,
}

/// A compaction under way: where it is on the ladder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compacting {
    /// The model call it makes room for.
    pub iteration: u32,
    /// The prompt's estimate before it.
    pub tokens_before: u64,
    /// The rung it goes to next.
    pub next: Rung,
    /// The rungs applied so far.
    pub steps: Vec<String>,
    /// The summary call (rung b) asked for, not answered: the range it summarizes.
    pub awaiting_summary: Option<(usize, usize)>,
}

impl PhasePosition {
    /// The phase's context label.
    pub fn label(&self) -> &Option<String> {
        &self.request.context_label
    }
}

/// Everything needed to continue a run. Rebuilt from the journal by folding
/// ([`RunState::fold`]); the live loop changes it only through [`RunState::apply`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// `run_started` is recorded.
    pub started: bool,
    /// History trimming, as recorded in `run_started`.
    pub strategy: ContextStrategy,
    /// Every context, in the order first used.
    pub contexts: Vec<LabeledContext>,
    /// The loop's own model calls (the summary's `iterations`).
    pub llm_calls: u64,
    /// Every call charged to the run: the loop's and the tools'.
    pub usage: RunUsage,
    /// Calls per tool (run or refused).
    pub tools_used: BTreeMap<String, u64>,
    /// Tool names in call order.
    pub tool_sequence: Vec<String>,
    /// Permission and policy decisions.
    pub approvals: ApprovalsDenials,
    /// Files written by tools and saved by the agent layer, once each.
    pub artifacts: Vec<String>,
    /// Memory changes reported by tools.
    pub memory: MemoryCounts,
    /// The last standing-memory block recorded.
    pub last_standing: Option<String>,
    /// The project instructions the run was given (`project_instructions`).
    #[serde(default)]
    pub instructions: Vec<crate::context::InstructionFile>,
    /// The environment block the run was given (`environment_context`).
    #[serde(default)]
    pub environment: Option<String>,
    /// The system message made of the two, as every model call carries it.
    #[serde(default)]
    pub run_context: Option<String>,
    /// The nested instruction files given just in time so far (`guidance_added`), by path.
    #[serde(default)]
    pub guidance: std::collections::BTreeSet<String>,
    /// The last phase's stop reason.
    pub last_stop: Option<StopReason>,
    /// The last error that ended a phase.
    pub last_error: Option<String>,
    /// Phases started so far (the next phase's index).
    pub phases_started: u32,
    /// Each completed phase's result, by index.
    pub phases: BTreeMap<u32, PhaseResult>,
    /// The current phase, while one runs.
    pub current: Option<PhasePosition>,
    /// The run's status once `run_finished` is recorded.
    pub finished: Option<String>,
    /// Which arguments identify a call of which tool, as recorded in `run_started`.
    #[serde(default)]
    pub call_identity: CallIdentity,
    /// The stop mode, as recorded in `run_started`.
    #[serde(default)]
    pub stop_mode: StopMode,
    /// How often the completion checks may object in one phase, as recorded.
    #[serde(default)]
    pub completion_retries: u32,
    /// The task contract, as recorded in `run_started`.
    #[serde(default)]
    pub contract: Option<TaskContract>,
    /// The last coverage ledger of the contract.
    #[serde(default)]
    pub coverage: Option<Coverage>,
    /// The work-item ledger.
    #[serde(default)]
    pub work_items: Vec<WorkItem>,
    /// Tool calls refused so far (by the allowlist, a guard, a hook, the policy or a person).
    #[serde(default)]
    pub denials: u64,
    /// What was still unmet when an `interactive` stop was accepted.
    #[serde(default)]
    pub unmet_accepted: Vec<String>,
    /// The last report the model gave (`complete`).
    #[serde(default)]
    pub report: Option<lsm_phase::TurnReport>,
    /// What a finding may cite: the call ids of successful tool calls and the sources they
    /// named or returned (bounded).
    #[serde(default)]
    pub evidence: std::collections::BTreeSet<String>,
    /// The run's worker waves, by index.
    #[serde(default)]
    pub waves: BTreeMap<u32, Wave>,
    /// What the ended workers spent (charged to this run's budget, the tree's).
    #[serde(default)]
    pub worker_usage: RunUsage,
    /// The run this one continues the conversation of (`conversation_continued`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<String>,
    /// What the conversation's earlier turns spent (the budget's ledger starts from it).
    #[serde(default)]
    pub earlier_usage: RunUsage,
}

impl RunState {
    /// The state a journal describes.
    pub fn fold<'a>(journal: impl IntoIterator<Item = &'a EventEnvelope>) -> RunState {
        let mut state = RunState::default();
        for line in journal {
            state.apply(&line.event);
        }
        state
    }

    /// Every tool call of the run so far, in order: the completed phases' and the current
    /// one's (the evidence a task contract is checked against).
    pub fn all_calls(&self) -> Vec<&ToolCallRecord> {
        self.phases
            .values()
            .flat_map(|r| r.tool_calls.iter())
            .chain(self.current.iter().flat_map(|p| p.tool_calls.iter()))
            .collect()
    }

    /// What the run and its ended workers spent.
    pub fn tree_usage(&self) -> RunUsage {
        let mut total = self.usage;
        total.absorb(&self.worker_usage);
        total
    }

    /// What the conversation spent so far, its earlier turns included: what a resumed run's
    /// budget starts from, and what a turn that continues it starts from.
    pub fn conversation_usage(&self) -> RunUsage {
        let mut total = self.tree_usage();
        total.absorb(&self.earlier_usage);
        total
    }

    /// The context of `label`, if it exists.
    pub fn context(&self, label: &Option<String>) -> Option<&ContextState> {
        self.contexts
            .iter()
            .find(|c| &c.label == label)
            .map(|c| &c.context)
    }

    /// A run's report: the model's last `complete` report; else, once a phase ended, its last
    /// answer as the summary, successful when it ended `done`, an escalation otherwise.
    pub fn turn_report(&self) -> Option<TurnReport> {
        if let Some(r) = &self.report {
            return Some(r.clone());
        }
        let (_, last) = self.phases.last_key_value()?;
        let escalations = match last.stop_reason {
            StopReason::Done => Vec::new(),
            StopReason::Blocked => vec![format!("blocked: {}", last.final_text)],
            other => vec![format!("the run ended {other}")],
        };
        Some(TurnReport {
            summary: last.final_text.clone(),
            success: last.stop_reason == StopReason::Done,
            escalations,
            ..TurnReport::default()
        })
    }
}

/// The id of a tool-only phase's `index`th call.
pub(crate) fn direct_call_id(phase: u32, index: usize) -> String {
    format!("direct-{phase}-{index}")
}
