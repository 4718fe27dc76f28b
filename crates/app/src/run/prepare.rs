//! Preparing one agent run: the agent and its task or topic, a resumed run's records, the
//! limits, the tools offered, the provider, the channel and the harness factory, wired from
//! the configuration and a [`RunRequest`]. A front end attaches its sinks and someone to
//! answer the run's channel, then starts it with [`PreparedRun::execute`].

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use lsm_agents::AgentLogSink;
use lsm_harness::{EventSink, RunLaunch};
use lsm_interaction::InteractionChannel;
use tokio_util::sync::CancellationToken;

use super::launch::{AgentLaunch, Finished, TracingAgentLog, execute, objective};
use super::resume;
use crate::error::usage;
use crate::notice::Notify;
use crate::wiring::{self, interaction as interaction_wiring, run as run_wiring};

/// What starting one run asks for: `lsm agent run`'s arguments that are about the run
/// (not about how it is shown).
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The agent (empty when resuming: the run's own).
    pub name: String,
    /// `--task`.
    pub task: Option<String>,
    /// `--topic`.
    pub topic: Option<String>,
    /// `--max-rounds`.
    pub max_rounds: Option<u32>,
    /// `--provider`, `--model`, `--base-url`.
    pub llm: wiring::ProviderFlags,
    /// `--agents-folder`.
    pub agents_folder: Option<PathBuf>,
    /// `--max-iterations`.
    pub max_iterations: Option<u32>,
    /// `--max-tokens-budget`.
    pub max_tokens_budget: Option<u64>,
    /// `--max-cost-usd`.
    pub max_cost_usd: Option<f64>,
    /// `--resume RUN_ID`.
    pub resume: Option<String>,
    /// `--yes`: approve permission requests (the conductor's workers too).
    pub yes: bool,
    /// `--allow-tool`.
    pub allow_tools: Vec<String>,
    /// `--stop-mode`.
    pub stop_mode: Option<StopModeArg>,
    /// `--max-workers`.
    pub max_workers: Option<usize>,
    /// `--contract`.
    pub contract: Option<PathBuf>,
}

/// `--stop-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum StopModeArg {
    /// Liveness first (the default).
    Interactive,
    /// For automation: done only when every completion check is met.
    #[value(alias = "strict-automation")]
    StrictAutomation,
}

impl From<StopModeArg> for lsm_harness::StopMode {
    fn from(m: StopModeArg) -> Self {
        match m {
            StopModeArg::Interactive => lsm_harness::StopMode::Interactive,
            StopModeArg::StrictAutomation => lsm_harness::StopMode::StrictAutomation,
        }
    }
}

/// A resumed run, as its front end may announce it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    /// The run.
    pub run_id: String,
    /// The last journal line it had written.
    pub last_seq: u64,
    /// What its journal's repair found worth saying, if anything.
    pub warning: Option<String>,
}

/// One agent run, wired and ready to start: what `lsm agent run`, `lsm runs resume`, the
/// queue's worker and the MCP `run_agent` tool share. Attach sinks and someone to answer
/// [`PreparedRun::channel`], then [`PreparedRun::execute`] it.
pub struct PreparedRun {
    /// The run, ready for [`super::launch_agent`].
    pub launch: AgentLaunch,
    /// The run's interaction channel (shut down when the run ends).
    pub channel: Arc<InteractionChannel>,
    /// Cancelling it stops the run at its next step.
    pub stop: CancellationToken,
    /// Cancelled when the run has ended: it ends the lease watcher of a run in PostgreSQL.
    pub lease_done: CancellationToken,
    /// How many times the provider retries a call (a progress printer says so).
    pub max_retries: u32,
    /// Set when the run continues an interrupted one.
    pub resumed: Option<Resumed>,
}

impl PreparedRun {
    /// Send the run's events to `sink` too (the test-only crash points stay in front of it).
    #[must_use]
    pub fn with_event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        let sinks = std::iter::once(sink)
            .chain(super::sinks::crash_points())
            .collect();
        if let Some(sink) = super::sinks::fanout(sinks) {
            self.launch.factory = self.launch.factory.with_event_sink(sink);
        }
        self
    }

    /// Send the agent's own log lines to `sink` (instead of the log).
    #[must_use]
    pub fn with_log_sink(mut self, sink: Arc<dyn AgentLogSink>) -> Self {
        self.launch.log_sink = Some(sink);
        self
    }

    /// Run it to its end; then the lease watcher ends and the channel is shut.
    ///
    /// # Errors
    /// When the agent cannot be built.
    pub async fn execute(self) -> Result<Finished> {
        let finished = execute(self.launch).await;
        self.lease_done.cancel();
        self.channel.shutdown("the run ended");
        finished
    }
}

/// Wire one run of `config` as `request` says: the agent and its task or topic, a resumed
/// run's records, the limits, the tools offered, the provider, the channel and the factory
/// ([`prepare_with`] on the configuration's run store, a new run id, in the working
/// directory). Cancelling `stop` stops the run at its next step (a stop cancelled before the
/// run starts stops it at its first). Runs on a multi-threaded runtime (MCP servers are
/// listed on it).
///
/// # Errors
/// A usage error (exit code 2) for a bad argument or configuration.
pub fn prepare(
    config: crate::config::Config,
    request: RunRequest,
    stop: CancellationToken,
    notify: Notify,
) -> Result<PreparedRun> {
    let pg = crate::store::pg_runs(&config)?;
    prepare_with(config, request, pg, None, None, stop, notify)
}

/// [`prepare`] on the PostgreSQL runs `pg` (when `[store] url` is set), starting the new run
/// under `run_id` when given (a queued run's), in `cwd` when given (else the process's
/// working directory).
///
/// # Errors
/// As [`prepare`].
pub fn prepare_with(
    mut config: crate::config::Config,
    mut args: RunRequest,
    pg: Option<lsm_store_pg::PgRuns>,
    run_id: Option<String>,
    cwd: Option<PathBuf>,
    stop: CancellationToken,
    notify: Notify,
) -> Result<PreparedRun> {
    let mut cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    if let Some(dir) = &args.agents_folder {
        config.agents.agents_folder = cwd.join(dir);
    }
    let catalog = crate::agent_defs::catalog(&config)?;
    let point = match args.resume.clone() {
        Some(run_id) => {
            let point = match &pg {
                Some(pg) => resume::open_pg_run(pg, &config.agents.agents_folder, &run_id)?,
                None => resume::open_run(&config.agents.agents_folder, &run_id)?,
            };
            if let Some(dir) = resume::recorded(&mut args, &point, &catalog)? {
                cwd = dir;
            }
            if let Some(dir) = &args.agents_folder {
                config.agents.agents_folder.clone_from(dir);
            }
            Some(point)
        }
        None => None,
    };
    let definition = crate::agent_defs::find(&catalog, &args.name)?.clone();
    let spec = &definition.spec;
    crate::agent_defs::apply_settings(&definition, &mut config)?;
    let max_rounds = args.max_rounds.or(definition.settings.max_rounds);
    let objective = objective(
        &definition,
        args.task.as_deref(),
        args.topic.as_deref(),
        args.max_rounds,
    )?;

    if let Some(n) = args.max_iterations {
        config.agents.max_iterations = n;
    }
    crate::agent_defs::cap_iterations(&definition, &mut config);
    if let Some(n) = args.max_tokens_budget {
        config.agents.max_tokens_budget = n;
    }
    if let Some(mode) = args.stop_mode {
        config.agents.stop_mode = mode.into();
    }
    if let Some(n) = args.max_workers {
        if n == 0 {
            return Err(usage("--max-workers must be at least 1"));
        }
        config.conductor.max_workers = n;
    }
    if let Some(path) = &args.contract {
        let contract = crate::config::read_contract(path)?;
        config.agents.contracts.insert(spec.name.clone(), contract);
    }
    let known = crate::tools::known_tool_names(&config);
    for tool in &args.allow_tools {
        // An MCP tool exists once its server has listed it; its server must be configured.
        let mcp_server_configured = lsm_mcp::naming::server_of(tool)
            .is_some_and(|server| config.mcp.servers.contains_key(server));
        if !known.contains(tool) && !lsm_harness::is_control_tool(tool) && !mcp_server_configured {
            return Err(usage(format!(
                "--allow-tool {tool}: there is no tool of that name; `lsm tools list` shows them"
            )));
        }
    }
    let mut extra_tools = config.agents.extra_tools_of(&spec.name);
    extra_tools.extend(args.allow_tools.iter().cloned());
    // The run's wiring starts the MCP servers the allowlists name, `--allow-tool` included.
    config
        .agents
        .extra_tools
        .insert(spec.name.clone(), extra_tools.clone());
    config.confine_to_working_dir_by_default(&cwd);

    let cost_from = match args.max_cost_usd {
        Some(usd) => {
            config.agents.max_cost_usd = Some(usd);
            "--max-cost-usd".to_string()
        }
        None => config.origin("agents.max_cost_usd").to_string(),
    };
    if let Some(usd) = config.agents.max_cost_usd
        && !(usd.is_finite() && usd > 0.0)
    {
        return Err(usage(format!(
            "{cost_from}: max_cost_usd = {usd} must be a positive number of dollars"
        )));
    }

    let llm = crate::agent_defs::resolve_llm(&config, &definition)?;
    let flags = wiring::ProviderFlags {
        // A script continues where the interrupted run left it.
        script_start: point.as_ref().map_or(0, |p| {
            usize::try_from(p.model_calls_made()).unwrap_or(usize::MAX)
        }),
        model_flag: true,
        ..args.llm.clone()
    };
    // What `lsm runs resume` needs to build this run again.
    let recorded = RunLaunch {
        provider_spec: args.llm.provider.as_ref().map(|spec| {
            match spec.strip_prefix("scripted:") {
                Some(file) => format!("scripted:{}", cwd.join(file).display()),
                None => spec.clone(),
            }
        }),
        model: args.llm.model.clone(),
        base_url: args.llm.base_url.clone(),
        working_dir: Some(cwd.display().to_string()),
        max_iterations: args.max_iterations,
        max_rounds: args.max_rounds,
        extra_tools: args.allow_tools.clone(),
    };
    let provider = wiring::build_provider(&llm, &flags, &cwd, &config.source_name())?.provider;
    if config.agents.max_cost_usd.is_some() && provider.pricing().is_none() {
        return Err(usage(format!(
            "max_cost_usd is set but no prices are configured for model '{}': add [llm.pricing] \"{}\" = {{ input = ..., output = ... }} (US dollars per million tokens) to {}",
            provider.model(),
            provider.model(),
            config.source_name()
        )));
    }

    // The window compaction measures prompts against: [agents.compaction], else the tier's
    // or the model's configured one, else the provider's own table.
    if config.agents.compaction.context_window.is_none() {
        config.agents.compaction.context_window = llm.context_window_for(provider.model());
    }
    let channel = interaction_wiring::run_channel(&config.agents.interaction)?;
    let parts = run_wiring::build_run(&config, provider, &channel, stop.clone())?;
    let ask_user_available = parts.ask_user_available;
    let extra_tools = parts.expand_allowlist(extra_tools);
    let mut factory = parts
        .factory
        .with_launch(recorded)
        .with_worker_spawner(Arc::new(super::workers::WorkerRuns {
            config: config.clone(),
            flags: flags.clone(),
            cwd: cwd.clone(),
            auto_approve: args.yes,
            pg: pg.clone(),
            catalog: catalog.clone(),
        }));
    let lease_done = CancellationToken::new();
    if let Some(pg) = &pg {
        factory = factory.with_store(crate::store::store_of(pg));
        let id = match &point {
            Some(p) => p.run_id().to_string(),
            None => {
                // The id is fixed now and the lease taken before the run starts, so that the
                // lease watcher renews it from the first step.
                let id = run_id.unwrap_or_else(lsm_harness::new_run_id);
                match pg.take(&id, &spec.name) {
                    Ok(lsm_store_pg::TakeOutcome::Taken) => {}
                    Ok(other) => {
                        return Err(usage(format!("run {id} cannot be started: {other:?}")));
                    }
                    Err(e) => return Err(usage(format!("[store] url: {e}"))),
                }
                factory = factory.with_next_run_id(id.clone());
                id
            }
        };
        crate::store::watch_lease(
            pg.clone(),
            id.clone(),
            stop.clone(),
            lease_done.clone(),
            notify,
        );
    }
    if let Some(contract) = config.agents.contract_of(&spec.name) {
        factory = factory.with_contract(contract);
    }
    if let Some(sink) = super::sinks::crash_points() {
        factory = factory.with_event_sink(sink);
    }
    let resumed = point.as_ref().map(|point| Resumed {
        run_id: point.run_id().to_string(),
        last_seq: point.last_seq(),
        warning: point.warning().map(str::to_string),
    });
    if let Some(point) = point {
        factory = factory.resuming(point);
    }
    let launch = AgentLaunch {
        definition,
        objective,
        factory,
        agents_folder: config.agents.agents_folder.clone(),
        max_iterations: config.agents.max_iterations,
        max_rounds,
        max_workers: config.conductor.max_workers,
        ask_user_available,
        extra_tools,
        log_sink: Some(Arc::new(TracingAgentLog)),
        interactions: Some(Arc::clone(&channel)),
    };
    Ok(PreparedRun {
        launch,
        channel,
        stop,
        lease_done,
        max_retries: llm.http.max_retries,
        resumed,
    })
}
