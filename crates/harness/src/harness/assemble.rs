//! How a harness is made: from its parts (identity, system prompt, configuration, provider,
//! sandbox) and its [`RunSeams`], in one step — for a new run, or for an interrupted one it
//! takes over — so that its recorder, its budget and its core are each built once.

use super::*;

/// Every registered tool's definition, shared with the requests that offer it.
fn tool_definitions(sandbox: &Sandbox) -> Vec<Arc<ToolDefinition>> {
    sandbox
        .registry()
        .iter()
        .map(|t| {
            Arc::new(ToolDefinition {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
        })
        .collect()
}

/// Which arguments identify a call of which tool (stall detection's fingerprint).
fn call_identity(sandbox: &Sandbox) -> lsm_run::stall::CallIdentity {
    sandbox
        .registry()
        .iter()
        .filter_map(|t| {
            t.identity_args().map(|args| {
                (
                    t.name().to_string(),
                    args.iter().map(|a| (*a).to_string()).collect(),
                )
            })
        })
        .collect()
}

impl AgentHarness {
    /// A harness for one run of `identity`, with the default seams ([`RunSeams::default`]).
    /// Nothing is written until the first phase.
    pub fn new(
        identity: AgentIdentity,
        system_prompt: impl Into<String>,
        config: HarnessConfig,
        provider: Arc<dyn Provider>,
        sandbox: Arc<Sandbox>,
    ) -> Self {
        let seams = RunSeams::default();
        Self::with_seams(identity, system_prompt, config, provider, sandbox, seams)
    }

    /// A harness for one run of `identity` with `seams` (what a [`crate::HarnessFactory`]
    /// builds). Nothing is written until the first phase.
    pub fn with_seams(
        identity: AgentIdentity,
        system_prompt: impl Into<String>,
        config: HarnessConfig,
        provider: Arc<dyn Provider>,
        sandbox: Arc<Sandbox>,
        seams: RunSeams,
    ) -> Self {
        Self::assemble(
            None,
            identity,
            system_prompt.into(),
            config,
            provider,
            sandbox,
            seams,
        )
    }

    /// A harness that continues the interrupted run `point` (see [`crate::ResumePoint`] for
    /// the rules): same run id, folder and transcript (`seq` continuing), the state folded
    /// from the journal, the budget restored to what it records as spent. The system prompt
    /// and the allowlist come from the caller, as for a new run. (A factory resumes a run
    /// with its seams: [`crate::HarnessFactory::resuming`].)
    pub fn resumed(
        point: ResumePoint,
        identity: AgentIdentity,
        system_prompt: impl Into<String>,
        config: HarnessConfig,
        provider: Arc<dyn Provider>,
        sandbox: Arc<Sandbox>,
    ) -> Self {
        let (point, seams) = (Some(point), RunSeams::default());
        Self::assemble(
            point,
            identity,
            system_prompt.into(),
            config,
            provider,
            sandbox,
            seams,
        )
    }

    /// The one place a harness is made — a new run, or the interrupted run `point` taken
    /// over — with its recorder, its budget and its core each built once.
    pub(crate) fn assemble(
        point: Option<ResumePoint>,
        identity: AgentIdentity,
        system_prompt: String,
        config: HarnessConfig,
        provider: Arc<dyn Provider>,
        sandbox: Arc<Sandbox>,
        seams: RunSeams,
    ) -> Self {
        let RunSeams {
            memory,
            stop,
            events,
            guards,
            stall,
            hooks,
            agent_stop_max_blocks,
            budget,
            contract,
            spawner,
            store,
            launch,
            handle,
            project_root,
            run_id,
            continuation,
        } = seams;
        // Calls of these tools can change something outside the run: their start is made
        // durable before they run.
        let side_effects = sandbox
            .registry()
            .iter()
            .filter(|t| t.risk() != lsm_sandbox::RiskLevel::ReadOnly)
            .map(|t| t.name().to_string())
            .collect();
        // Calls of these tools may run at the same time as others of one answer: read-only,
        // and run without asking a person (two questions at once would wait on each other).
        // Calls of these tools are handled outside `lsm`: the run pauses on them.
        let deferred_tools: std::collections::HashSet<String> = sandbox
            .registry()
            .iter()
            .filter(|t| t.deferred())
            .map(|t| t.name().to_string())
            .collect();
        let concurrent_tools = sandbox
            .registry()
            .iter()
            .filter(|t| {
                !t.deferred()
                    && t.risk() == lsm_sandbox::RiskLevel::ReadOnly
                    && !sandbox
                        .config()
                        .asks_permission(t.name(), t.risk(), t.needs_permission())
            })
            .map(|t| t.name().to_string())
            .collect();
        let mut started_at = Utc::now();
        // A new run's folder and id, or the interrupted run's with its journal and state.
        let mut spent_before = std::time::Duration::ZERO;
        let mut supplied = None;
        let (run_dir, run_id, state, takeover) = match point {
            None => {
                let run_id = run_id.unwrap_or_else(new_run_id);
                let run_dir = config
                    .agents_folder
                    .join(&identity.name)
                    .join("logs")
                    .join(&run_id);
                (run_dir, run_id, RunState::default(), None)
            }
            Some(mut point) => {
                spent_before = super::wall::time_spent(&point.journal);
                supplied = point.supplied.take();
                if let Ok(t) = DateTime::parse_from_rfc3339(&point.started.started_at) {
                    started_at = t.with_timezone(&Utc);
                }
                let repair = point
                    .state
                    .current
                    .as_ref()
                    .and_then(|p| p.pending.as_ref())
                    .map(|pending| repair_for(pending, &point.journal, &sandbox));
                let after_seq = point.last_seq();
                let takeover = (Takeover { after_seq }, point.writer, repair);
                (point.run_dir, point.run_id, point.state, Some(takeover))
            }
        };
        let mut recorder = Recorder::new(
            run_dir,
            run_id.clone(),
            identity.name.clone(),
            config.write_records,
        )
        .with_fsync(config.journal_fsync, side_effects);
        let (takeover, repair) = match takeover {
            Some((takeover, writer, repair)) => {
                recorder = recorder.continuing(takeover.after_seq, writer);
                (Some(takeover), repair)
            }
            None => (None, None),
        };
        if let Some(store) = store {
            recorder.set_store(store);
        }
        let budget = budget.unwrap_or_else(|| RunBudget::new(BudgetLimits::from_config(&config)));
        // A new turn of a conversation: its ledger starts from what the earlier turns spent.
        let continuation = continuation.filter(|_| takeover.is_none());
        if let Some(c) = &continuation {
            budget.restore(c.usage);
        }
        if takeover.is_some() {
            // A resumed run continues with what its journal records as spent (its ended
            // workers' spending included).
            budget.restore(state.conversation_usage());
        }
        let core = Core::new(CoreConfig {
            agent: identity.name.clone(),
            topic: identity.topic.clone(),
            system_prompt,
            allowlist: identity.tool_allowlist.iter().cloned().collect(),
            allowlist_order: identity.tool_allowlist.clone(),
            tools: tool_definitions(&sandbox),
            offer_block_tool: config.offer_block_tool,
            offer_complete_tool: config.offer_complete_tool,
            strategy: config.context_window_strategy,
            limits: budget.limits(),
            provider: provider.name().to_string(),
            model: provider.model().to_string(),
            guards,
            launch,
            stall,
            call_identity: call_identity(&sandbox),
            hooks,
            agent_stop_max_blocks,
            stop_mode: config.stop_mode,
            completion_retries: config.completion_retries,
            contract,
            work_items: config.work_items,
            compaction: config.compaction,
            window: config
                .compaction
                .window(provider.context_window(), config.max_output_tokens),
            standing_memory: memory.is_some(),
            // None until the driver loads them for a new run (`with_project_root`).
            run_context: lsm_run::context::RunContext::default(),
            concurrent_tools,
            max_parallel_tools: config.max_parallel_tools,
            deferred_tools,
            continuation,
        });
        let wall = super::wall::WallClock::new(config.max_wall_seconds, spent_before);
        let harness = AgentHarness {
            identity,
            config,
            core,
            provider,
            sandbox,
            memory: memory.unwrap_or_else(|| Arc::new(NoMemory)),
            stop,
            events,
            budget,
            state,
            recorder: Arc::new(Mutex::new(recorder)),
            run_id,
            started_at,
            started: Instant::now(),
            finished: false,
            phases_requested: 0,
            resume: takeover,
            repair,
            handles: Vec::new(),
            waves_requested: 0,
            spawner,
            project_root: None,
            wall,
            supplied,
        };
        let harness = match handle {
            Some(handle) => harness.with_run_handle(handle),
            None => harness,
        };
        match project_root {
            Some(root) => harness.with_project_root(root),
            None => harness,
        }
    }
}
