//! [`HarnessFactory`]: how the agent layer gets a harness without naming it.
//!
//! A factory holds what its harnesses share — the configuration, the provider, the sandbox —
//! and one [`RunSeams`], handed whole to each harness it builds
//! ([`AgentHarness::with_seams`]). Its `with_*` methods set one seam each.

use std::sync::{Arc, Mutex, PoisonError};

use lsm_phase::{AgentIdentity, ExecutorFactory, PhaseExecutor};
use lsm_providers::Provider;
use lsm_run::contract::TaskContract;
use lsm_run::event::RunLaunch;
use lsm_run::guard::ToolCallGuard;
use lsm_run::hooks::Hook;
use lsm_run::stall::StallConfig;
use lsm_run::{HarnessConfig, RunBudget};
use lsm_sandbox::Sandbox;
use tokio_util::sync::CancellationToken;

use crate::handles::{EventSink, RunHandle};
use crate::harness::AgentHarness;
use crate::memory::MemoryProvider;
use crate::resume::ResumePoint;
use crate::seams::RunSeams;
use crate::store::RunStore;
use crate::workers::WorkerSpawner;

/// Called with every harness a factory builds, before its first phase.
pub type BuildHook = Arc<dyn Fn(&AgentHarness) + Send + Sync>;

/// Builds one [`AgentHarness`] per run, all sharing a provider, a sandbox and the seams
/// (a memory provider, a stop token, an event sink, …).
#[derive(Clone)]
pub struct HarnessFactory {
    config: HarnessConfig,
    provider: Arc<dyn Provider>,
    sandbox: Arc<Sandbox>,
    /// What every harness built is given (the next run's id aside).
    seams: RunSeams,
    hooks: Vec<BuildHook>,
    /// The interrupted run the next harness built continues (taken by that build).
    resume: Arc<Mutex<Option<ResumePoint>>>,
    /// The id the next new run built gets (taken by that build).
    next_run_id: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for HarnessFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessFactory")
            .field("config", &self.config)
            .field("seams", &self.seams)
            .finish_non_exhaustive()
    }
}

impl HarnessFactory {
    /// A factory over these parts, with the default seams ([`RunSeams::default`]).
    pub fn new(config: HarnessConfig, provider: Arc<dyn Provider>, sandbox: Arc<Sandbox>) -> Self {
        HarnessFactory {
            config,
            provider,
            sandbox,
            seams: RunSeams::default(),
            hooks: Vec::new(),
            resume: Arc::new(Mutex::new(None)),
            next_run_id: Arc::new(Mutex::new(None)),
        }
    }

    /// Every harness built is given `seams` (replacing the ones set so far).
    pub fn with_seams(mut self, seams: RunSeams) -> Self {
        self.seams = seams;
        self
    }

    /// The seams every harness built is given.
    pub fn seams(&self) -> &RunSeams {
        &self.seams
    }

    /// Every harness built has the context providers of the project at `root` (see
    /// [`AgentHarness::with_project_root`]).
    pub fn with_project_root(mut self, root: impl Into<std::path::PathBuf>) -> Self {
        self.seams.project_root = Some(root.into());
        self
    }

    /// Every harness built keeps its journal in `store` (see [`AgentHarness::with_store`]).
    pub fn with_store(mut self, store: Arc<dyn RunStore>) -> Self {
        self.seams.store = Some(store);
        self
    }

    /// The next new run built gets the id `run_id` (see [`AgentHarness::with_run_id`]).
    pub fn with_next_run_id(self, run_id: impl Into<String>) -> Self {
        *self
            .next_run_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(run_id.into());
        self
    }

    /// Every harness built fills `handle` in (its id and folder, then its summary).
    pub fn with_run_handle(mut self, handle: RunHandle) -> Self {
        self.seams.handle = Some(handle);
        self
    }

    /// Every harness built records `launch` in its `run_started`.
    pub fn with_launch(mut self, launch: RunLaunch) -> Self {
        self.seams.launch = Some(launch);
        self
    }

    /// The run built continues the conversation of a finished run (`--continue`): its
    /// contexts, and what its turns spent.
    pub fn continuing(mut self, continuation: lsm_run::event::ConversationContinued) -> Self {
        self.seams.continuation = Some(continuation);
        self
    }

    /// Call `hook` with every harness built, before its first phase (e.g. to record a run's
    /// interaction events through its [`crate::RecordHandle`]).
    pub fn with_on_build(mut self, hook: impl Fn(&AgentHarness) + Send + Sync + 'static) -> Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// The next harness built continues the interrupted run `point` instead of starting a
    /// new one (see [`AgentHarness::resumed`]); later builds start new runs.
    pub fn resuming(self, point: ResumePoint) -> Self {
        *self.resume.lock().unwrap_or_else(PoisonError::into_inner) = Some(point);
        self
    }

    /// Standing memory for every harness.
    pub fn with_memory(mut self, memory: Arc<dyn MemoryProvider>) -> Self {
        self.seams.memory = Some(memory);
        self
    }

    /// The stop token every harness watches.
    pub fn with_stop_token(mut self, stop: CancellationToken) -> Self {
        self.seams.stop = stop;
        self
    }

    /// Where every harness sends its events.
    pub fn with_event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.seams.events = Some(sink);
        self
    }

    /// Stall detection's settings for every harness (see [`AgentHarness::with_stall`]).
    pub fn with_stall(mut self, stall: StallConfig) -> Self {
        self.seams.stall = stall;
        self
    }

    /// Every harness tells `hook` of its run's moments (see [`crate::hooks`]); hooks run in
    /// the order added.
    pub fn with_hook(mut self, hook: Arc<dyn Hook>) -> Self {
        self.seams.hooks.push(hook);
        self
    }

    /// How often `agent_stop` hooks may block a stop in one phase before it is forced.
    pub fn with_agent_stop_max_blocks(mut self, max: u32) -> Self {
        self.seams.agent_stop_max_blocks = max;
        self
    }

    /// Every harness built holds its run to `contract` (see [`AgentHarness::with_contract`]).
    pub fn with_contract(mut self, contract: TaskContract) -> Self {
        self.seams.contract = Some(contract);
        self
    }

    /// Every harness built starts worker runs through `spawner` (see [`crate::workers`]).
    pub fn with_worker_spawner(mut self, spawner: Arc<dyn WorkerSpawner>) -> Self {
        self.seams.spawner = Some(spawner);
        self
    }

    /// Every harness checks tool calls with `guard` before the sandbox runs them.
    pub fn with_call_guard(mut self, guard: Arc<dyn ToolCallGuard>) -> Self {
        self.seams.guards.push(guard);
        self
    }

    /// Every harness built gates and charges its LLM calls to `budget` (see
    /// [`RunSeams::budget`]), shared with the [`crate::BudgetedProvider`] of the run's
    /// tools. A budget belongs to one run: give a factory holding one to one run only (the
    /// CLI wires a factory per run). Without it, each harness has a budget of its own from
    /// the config.
    pub fn with_budget(mut self, budget: RunBudget) -> Self {
        self.seams.budget = Some(budget);
        self
    }

    /// A concrete harness (for owners that want its accounting, such as the CLI).
    pub fn build(&self, agent: &AgentIdentity, system_prompt: &str) -> AgentHarness {
        let resume = self
            .resume
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let mut seams = self.seams.clone();
        if resume.is_none() {
            // A resumed run keeps its own id: only a new one takes the next id.
            seams.run_id = self
                .next_run_id
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
        }
        let h = AgentHarness::assemble(
            resume,
            agent.clone(),
            system_prompt.to_string(),
            self.config.clone(),
            Arc::clone(&self.provider),
            Arc::clone(&self.sandbox),
            seams,
        );
        for hook in &self.hooks {
            hook(&h);
        }
        h
    }
}

impl ExecutorFactory for HarnessFactory {
    fn create(&self, agent: &AgentIdentity, system_prompt: &str) -> Box<dyn PhaseExecutor> {
        Box::new(self.build(agent, system_prompt))
    }
}
