//! The harness's builder methods, one seam at a time, for a harness made by hand (a run
//! handle, its launch, memory, a stop token, an event sink, stall settings, hooks, a
//! contract, a worker spawner, a call guard, a shared budget). A factory hands a harness all
//! of its seams at once instead ([`RunSeams`], [`AgentHarness::with_seams`]).

use super::*;

impl AgentHarness {
    /// Keep this run's journal in `store` instead of the run folder's files (give it before
    /// the first phase: a journal already started stays where it is).
    pub fn with_store(self, store: Arc<dyn crate::store::RunStore>) -> Self {
        self.recorder().set_store(store);
        self
    }

    /// Give this new run the id `run_id` (one assigned before it started, such as a queued
    /// run's); before the first phase. A resumed run keeps its own.
    pub fn with_run_id(mut self, run_id: impl Into<String>) -> Self {
        if self.resume.is_some() {
            return self;
        }
        let run_id = run_id.into();
        self.recorder().set_run_id(run_id.clone());
        self.run_id = run_id;
        self
    }

    /// Fill `handle` in with this run's id and folder now, and its summary when it finishes.
    pub fn with_run_handle(mut self, handle: RunHandle) -> Self {
        handle.started(&self.run_id, self.run_dir());
        self.handles.push(handle);
        self
    }

    /// Record how the owner started the run in `run_started` (so it can be rebuilt to be
    /// resumed).
    pub fn with_launch(mut self, launch: RunLaunch) -> Self {
        self.core.config_mut().launch = Some(launch);
        self
    }

    /// Use this memory provider for standing context.
    pub fn with_memory(mut self, memory: Arc<dyn MemoryProvider>) -> Self {
        self.memory = memory;
        self.core.config_mut().standing_memory = true;
        self
    }

    /// Stop when this token is cancelled.
    pub fn with_stop_token(mut self, stop: CancellationToken) -> Self {
        self.stop = stop;
        self
    }

    /// Send every recorded event to `sink` as well.
    pub fn with_event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.events = Some(sink);
        self
    }

    /// Stall detection's settings (on, threshold 3, by default).
    pub fn with_stall(mut self, stall: StallConfig) -> Self {
        self.core.config_mut().stall = stall;
        self
    }

    /// Tell `hook` of the run's moments (see [`crate::hooks`]); hooks run in the order
    /// added.
    pub fn with_hook(mut self, hook: Arc<dyn Hook>) -> Self {
        self.core.config_mut().hooks.push(hook);
        self
    }

    /// How often `agent_stop` hooks may block a stop in one phase (2 by default) before the
    /// stop is forced.
    pub fn with_agent_stop_max_blocks(mut self, max: u32) -> Self {
        self.core.config_mut().agent_stop_max_blocks = max;
        self
    }

    /// Hold the run to `contract` (checked when a phase that completes the task stops, and at
    /// the end of the run for the summary). A resumed run keeps the contract its journal
    /// recorded.
    pub fn with_contract(mut self, contract: TaskContract) -> Self {
        self.core.config_mut().contract = Some(contract);
        self
    }

    /// Start worker runs (`run_workers`) through `spawner`.
    pub fn with_worker_spawner(mut self, spawner: Arc<dyn WorkerSpawner>) -> Self {
        self.spawner = Some(spawner);
        self
    }

    /// Check every tool call with `guard` before the sandbox runs it.
    pub fn with_call_guard(mut self, guard: Arc<dyn ToolCallGuard>) -> Self {
        self.core.config_mut().guards.push(guard);
        self
    }

    /// Gate and charge every LLM call of this run to `budget` instead of the budget of its
    /// own it was made with (whose limits come from the config). Give the same budget to the
    /// [`crate::BudgetedProvider`] of the run's tools, so their calls share the ceiling.
    /// Its limits replace the config's `max_tokens_budget`, `max_cost_usd`,
    /// `max_output_tokens` and `reserve_prompt_estimate`. A harness made with its budget in
    /// its [`RunSeams::budget`] has it from the start.
    pub fn with_budget(mut self, budget: RunBudget) -> Self {
        self.core.config_mut().limits = budget.limits();
        if self.resume.is_some() {
            // A resumed run continues with what its journal records as spent (its ended
            // workers' spending included).
            budget.restore(self.state.tree_usage());
        }
        self.budget = budget;
        self
    }
}
