//! [`RunSeams`]: what a run is given besides its configuration, its provider and its
//! sandbox — one plain struct of seams, held by a [`crate::HarnessFactory`] and handed whole
//! to each harness it builds ([`crate::AgentHarness::with_seams`]), so that a harness is made
//! in one step: its budget, its recorder and its core are each built once, from what the
//! seams say.

use std::path::PathBuf;
use std::sync::Arc;

use lsm_run::RunBudget;
use lsm_run::contract::TaskContract;
use lsm_run::event::RunLaunch;
use lsm_run::guard::ToolCallGuard;
use lsm_run::hooks::{DEFAULT_AGENT_STOP_MAX_BLOCKS, Hook};
use lsm_run::stall::StallConfig;
use tokio_util::sync::CancellationToken;

use crate::handles::{EventSink, RunHandle};
use crate::memory::MemoryProvider;
use crate::store::RunStore;
use crate::workers::WorkerSpawner;

/// The seams of one run (or of every run a factory builds). The default is a run on its own:
/// no memory, a stop token of its own, no event sink, no guard, no hook, stall detection on,
/// a budget of its own from the configuration's limits, no contract, no workers, the journal
/// in the run folder's files, no context providers.
#[derive(Clone)]
pub struct RunSeams {
    /// Standing context for every model call (`None`: none, and no call waits for it).
    pub memory: Option<Arc<dyn MemoryProvider>>,
    /// The token that stops the run when cancelled.
    pub stop: CancellationToken,
    /// Where every recorded event is sent as well.
    pub events: Option<Arc<dyn EventSink>>,
    /// Checks of every tool call before the sandbox runs it, in order.
    pub guards: Vec<Arc<dyn ToolCallGuard>>,
    /// Stall detection's settings (on, threshold 3, by default).
    pub stall: StallConfig,
    /// Told of the run's moments (see [`crate::hooks`]), in order.
    pub hooks: Vec<Arc<dyn Hook>>,
    /// How often `agent_stop` hooks may block a stop in one phase before it is forced.
    pub agent_stop_max_blocks: u32,
    /// The budget that gates and is charged every model call of the run, shared with the
    /// [`crate::BudgetedProvider`] of its tools (`None`: a budget of the run's own, from the
    /// configuration's `max_tokens_budget`, `max_cost_usd`, `max_output_tokens` and
    /// `reserve_prompt_estimate`). A budget belongs to one run (and its workers): seams
    /// holding one are for one run only.
    pub budget: Option<RunBudget>,
    /// The task contract the run is held to (a resumed run keeps the one its journal
    /// recorded).
    pub contract: Option<TaskContract>,
    /// Who starts worker runs (`None`: `run_workers` fails every request).
    pub spawner: Option<Arc<dyn WorkerSpawner>>,
    /// Where the journal is kept (`None`: the run folder's files).
    pub store: Option<Arc<dyn RunStore>>,
    /// How the owner started the run, recorded in `run_started` (so it can be rebuilt to be
    /// resumed).
    pub launch: Option<RunLaunch>,
    /// Filled in with the run's id and folder when the harness is made, and its summary when
    /// it finishes.
    pub handle: Option<RunHandle>,
    /// The project's root, for the context providers (see
    /// [`crate::AgentHarness::with_project_root`]); `None`: no context providers.
    pub project_root: Option<PathBuf>,
    /// The id a new run gets (one assigned before it started, such as a queued run's);
    /// `None`: a fresh one. A resumed run keeps its own.
    pub run_id: Option<String>,
    /// The finished run's conversation a new run continues (`--continue`): its contexts and
    /// what its turns spent, which the new run's budget starts from. A resumed run keeps
    /// what its journal recorded.
    pub continuation: Option<lsm_run::event::ConversationContinued>,
}

impl Default for RunSeams {
    fn default() -> Self {
        RunSeams {
            memory: None,
            stop: CancellationToken::new(),
            events: None,
            guards: Vec::new(),
            stall: StallConfig::default(),
            hooks: Vec::new(),
            agent_stop_max_blocks: DEFAULT_AGENT_STOP_MAX_BLOCKS,
            budget: None,
            contract: None,
            spawner: None,
            store: None,
            launch: None,
            handle: None,
            project_root: None,
            run_id: None,
            continuation: None,
        }
    }
}

impl std::fmt::Debug for RunSeams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSeams")
            .field("memory", &self.memory.is_some())
            .field("events", &self.events.is_some())
            .field("guards", &self.guards.len())
            .field("stall", &self.stall)
            .field("hooks", &self.hooks.len())
            .field("agent_stop_max_blocks", &self.agent_stop_max_blocks)
            .field("budget", &self.budget)
            .field("contract", &self.contract)
            .field("spawner", &self.spawner.is_some())
            .field("store", &self.store.is_some())
            .field("launch", &self.launch)
            .field("project_root", &self.project_root)
            .field("run_id", &self.run_id)
            .field(
                "continues",
                &self.continuation.as_ref().map(|c| &c.from_run_id),
            )
            .finish_non_exhaustive()
    }
}
