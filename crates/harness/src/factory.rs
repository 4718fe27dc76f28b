//! [`HarnessFactory`]: how the agent layer gets a harness without naming it.

use std::sync::{Arc, Mutex, PoisonError};

use lsm_phase::{AgentIdentity, ExecutorFactory, PhaseExecutor};
use lsm_providers::Provider;
use lsm_sandbox::Sandbox;
use tokio_util::sync::CancellationToken;

use crate::contract::TaskContract;
use crate::hooks::Hook;
use crate::{
    AgentHarness, EventSink, HarnessConfig, MemoryProvider, ResumePoint, RunBudget, RunHandle,
    RunLaunch, StallConfig, ToolCallGuard,
};

/// Called with every harness a factory builds, before its first phase.
pub type BuildHook = Arc<dyn Fn(&AgentHarness) + Send + Sync>;

/// Builds one [`AgentHarness`] per run, all sharing a provider, a sandbox, a memory provider,
/// a stop token and an event sink.
#[derive(Clone)]
pub struct HarnessFactory {
    config: HarnessConfig,
    provider: Arc<dyn Provider>,
    sandbox: Arc<Sandbox>,
    /// The memory provider, when one was given (`None`: no standing context).
    memory: Option<Arc<dyn MemoryProvider>>,
    stop: CancellationToken,
    events: Option<Arc<dyn EventSink>>,
    guards: Vec<Arc<dyn ToolCallGuard>>,
    stall: StallConfig,
    user_hooks: Vec<Arc<dyn Hook>>,
    agent_stop_max_blocks: u32,
    budget: Option<RunBudget>,
    contract: Option<TaskContract>,
    spawner: Option<Arc<dyn crate::WorkerSpawner>>,
    handle: Option<RunHandle>,
    launch: Option<RunLaunch>,
    hooks: Vec<BuildHook>,
    /// The interrupted run the next harness built continues (taken by that build).
    resume: Arc<Mutex<Option<ResumePoint>>>,
    /// The id the next new run built gets (taken by that build).
    next_run_id: Arc<Mutex<Option<String>>>,
    /// Where every harness keeps its journal (the run folder's files when `None`).
    store: Option<Arc<dyn crate::RunStore>>,
    /// The project's root, for the context providers (see
    /// [`AgentHarness::with_project_root`]).
    project_root: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for HarnessFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HarnessFactory")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl HarnessFactory {
    /// A factory over these parts.
    pub fn new(config: HarnessConfig, provider: Arc<dyn Provider>, sandbox: Arc<Sandbox>) -> Self {
        HarnessFactory {
            config,
            provider,
            sandbox,
            memory: None,
            stop: CancellationToken::new(),
            events: None,
            guards: Vec::new(),
            stall: StallConfig::default(),
            user_hooks: Vec::new(),
            agent_stop_max_blocks: crate::hooks::DEFAULT_AGENT_STOP_MAX_BLOCKS,
            budget: None,
            contract: None,
            spawner: None,
            handle: None,
            launch: None,
            hooks: Vec::new(),
            resume: Arc::new(Mutex::new(None)),
            next_run_id: Arc::new(Mutex::new(None)),
            store: None,
            project_root: None,
        }
    }

    /// Every harness built has the context providers of the project at `root` (see
    /// [`AgentHarness::with_project_root`]).
    pub fn with_project_root(mut self, root: impl Into<std::path::PathBuf>) -> Self {
        self.project_root = Some(root.into());
        self
    }

    /// Every harness built keeps its journal in `store` (see [`AgentHarness::with_store`]).
    pub fn with_store(mut self, store: Arc<dyn crate::RunStore>) -> Self {
        self.store = Some(store);
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
        self.handle = Some(handle);
        self
    }

    /// Every harness built records `launch` in its `run_started`.
    pub fn with_launch(mut self, launch: RunLaunch) -> Self {
        self.launch = Some(launch);
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
        self.memory = Some(memory);
        self
    }

    /// The stop token every harness watches.
    pub fn with_stop_token(mut self, stop: CancellationToken) -> Self {
        self.stop = stop;
        self
    }

    /// Where every harness sends its events.
    pub fn with_event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.events = Some(sink);
        self
    }

    /// Stall detection's settings for every harness (see [`AgentHarness::with_stall`]).
    pub fn with_stall(mut self, stall: StallConfig) -> Self {
        self.stall = stall;
        self
    }

    /// Every harness tells `hook` of its run's moments (see [`crate::hooks`]); hooks run in
    /// the order added.
    pub fn with_hook(mut self, hook: Arc<dyn Hook>) -> Self {
        self.user_hooks.push(hook);
        self
    }

    /// How often `agent_stop` hooks may block a stop in one phase before it is forced.
    pub fn with_agent_stop_max_blocks(mut self, max: u32) -> Self {
        self.agent_stop_max_blocks = max;
        self
    }

    /// Every harness built holds its run to `contract` (see [`AgentHarness::with_contract`]).
    pub fn with_contract(mut self, contract: TaskContract) -> Self {
        self.contract = Some(contract);
        self
    }

    /// Every harness built starts worker runs through `spawner` (see [`crate::workers`]).
    pub fn with_worker_spawner(mut self, spawner: Arc<dyn crate::WorkerSpawner>) -> Self {
        self.spawner = Some(spawner);
        self
    }

    /// Every harness checks tool calls with `guard` before the sandbox runs them.
    pub fn with_call_guard(mut self, guard: Arc<dyn ToolCallGuard>) -> Self {
        self.guards.push(guard);
        self
    }

    /// Every harness built gates and charges its LLM calls to `budget` (see
    /// [`AgentHarness::with_budget`]), shared with the [`crate::BudgetedProvider`] of the
    /// run's tools. A budget belongs to one run: give a factory holding one to one run only
    /// (the CLI wires a factory per run). Without it, each harness has a budget of its own
    /// from the config.
    pub fn with_budget(mut self, budget: RunBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// A concrete harness (for owners that want its accounting, such as the CLI).
    pub fn build(&self, agent: &AgentIdentity, system_prompt: &str) -> AgentHarness {
        let resume = self
            .resume
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let resumed_build = resume.is_some();
        let h = match resume {
            Some(point) => AgentHarness::resumed(
                point,
                agent.clone(),
                system_prompt,
                self.config.clone(),
                Arc::clone(&self.provider),
                Arc::clone(&self.sandbox),
            ),
            None => AgentHarness::new(
                agent.clone(),
                system_prompt,
                self.config.clone(),
                Arc::clone(&self.provider),
                Arc::clone(&self.sandbox),
            ),
        };
        let mut h = h;
        if let Some(store) = &self.store {
            h = h.with_store(Arc::clone(store));
        }
        // A resumed run keeps its own id.
        if !resumed_build
            && let Some(run_id) = self
                .next_run_id
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        {
            h = h.with_run_id(run_id);
        }
        let mut h = h
            .with_stall(self.stall)
            .with_agent_stop_max_blocks(self.agent_stop_max_blocks)
            .with_stop_token(self.stop.clone());
        if let Some(memory) = &self.memory {
            h = h.with_memory(Arc::clone(memory));
        }
        if let Some(sink) = &self.events {
            h = h.with_event_sink(Arc::clone(sink));
        }
        for hook in &self.user_hooks {
            h = h.with_hook(Arc::clone(hook));
        }
        for g in &self.guards {
            h = h.with_call_guard(Arc::clone(g));
        }
        if let Some(budget) = &self.budget {
            h = h.with_budget(budget.clone());
        }
        if let Some(contract) = &self.contract {
            h = h.with_contract(contract.clone());
        }
        if let Some(spawner) = &self.spawner {
            h = h.with_worker_spawner(Arc::clone(spawner));
        }
        if let Some(launch) = &self.launch {
            h = h.with_launch(launch.clone());
        }
        if let Some(handle) = &self.handle {
            h = h.with_run_handle(handle.clone());
        }
        if let Some(root) = &self.project_root {
            h = h.with_project_root(root.clone());
        }
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
