//! The one `prepare` every run is started through — `lsm agent run` and `lsm runs resume`,
//! `run-many` and the TUI (the runtime manager's launcher), the queue's worker, the MCP
//! `run_agent` tool and the conductor's workers: the agent and its task or topic from a
//! [`RunRequest`], a resumed run's records, the request's options as the configuration's top
//! layer, the limits, the tools offered, the provider, the channel and the harness factory.
//! What differs between those callers is said in [`Start`]. A front end then attaches its
//! sinks and someone to answer [`PreparedRun::channel`], and starts it with
//! [`PreparedRun::execute`]: the only way to run an agent from outside this module.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::Result;
use lsm_agents::{AgentLogSink, Catalog};
use lsm_harness::{AgentHarness, EventSink, RunBudget};
use lsm_interaction::InteractionChannel;
use lsm_sandbox::SandboxConfig;
use tokio_util::sync::CancellationToken;

use super::launch::{AgentLaunch, Finished, execute, objective};
use super::request::RunRequest;
use super::resume;
use crate::config::Config;
use crate::error::usage;
use crate::notice::Notify;
use crate::store::PgRuns;
use crate::wiring::{self, interaction as interaction_wiring, run as run_wiring};

/// Which store keeps a run's journal.
#[derive(Debug, Clone, Default)]
pub enum Store {
    /// The configuration's: PostgreSQL with `[store] url`, else the run folder's files.
    #[default]
    Configured,
    /// The run folder's files, whatever the configuration says.
    Files,
    /// These PostgreSQL runs (a worker's, a parent run's).
    Pg(PgRuns),
}

/// How a run is started, besides what it is: who stops it, who is told what happens, where
/// its journal goes, and for the callers that have them, its id, its folder, its channel and
/// the agents it can run.
pub struct Start {
    stop: CancellationToken,
    notify: Notify,
    store: Store,
    run_id: Option<String>,
    cwd: Option<PathBuf>,
    channel: Option<Arc<InteractionChannel>>,
    catalog: Option<Catalog>,
    worker: Option<WorkerOf>,
}

/// A conductor's worker run: on a child of its parent's budget, under its own sandbox
/// policy; its journal's lease is its parent's affair.
pub(super) struct WorkerOf {
    pub(super) budget: RunBudget,
    pub(super) sandbox: SandboxConfig,
}

impl Start {
    /// A run that `stop` stops (at its next step; before its first if cancelled early), whose
    /// notices (a cancel asked from elsewhere) go to `notify`; the configuration's store, a
    /// new id, the process's working directory, a fresh channel, the configuration's agents.
    pub fn new(stop: CancellationToken, notify: Notify) -> Start {
        Start {
            stop,
            notify,
            store: Store::Configured,
            run_id: None,
            cwd: None,
            channel: None,
            catalog: None,
            worker: None,
        }
    }

    /// Its journal in `store`.
    #[must_use]
    pub fn in_store(mut self, store: Store) -> Start {
        self.store = store;
        self
    }

    /// A new run under `run_id` (a queued run's).
    #[must_use]
    pub fn with_run_id(mut self, run_id: String) -> Start {
        self.run_id = Some(run_id);
        self
    }

    /// Relative paths against `cwd`, its tools confined there by default.
    #[must_use]
    pub fn in_dir(mut self, cwd: PathBuf) -> Start {
        self.cwd = Some(cwd);
        self
    }

    /// Its requests on `channel` (a front end's, the runtime manager's).
    #[must_use]
    pub fn with_channel(mut self, channel: Arc<InteractionChannel>) -> Start {
        self.channel = Some(channel);
        self
    }

    /// The agents of `catalog` (loaded once for many runs).
    #[must_use]
    pub fn with_catalog(mut self, catalog: Catalog) -> Start {
        self.catalog = Some(catalog);
        self
    }

    /// A conductor's worker run.
    #[must_use]
    pub(super) fn for_worker(mut self, worker: WorkerOf) -> Start {
        self.worker = Some(worker);
        self
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

/// One agent run, wired and ready to start (made by [`prepare`] only). Attach sinks and
/// someone to answer [`PreparedRun::channel`], then [`PreparedRun::execute`] it.
pub struct PreparedRun {
    launch: AgentLaunch,
    channel: Arc<InteractionChannel>,
    stop: CancellationToken,
    lease_done: CancellationToken,
    max_retries: u32,
    resumed: Option<Resumed>,
    request: RunRequest,
}

impl PreparedRun {
    /// The run's interaction channel (shut down when the run ends).
    pub fn channel(&self) -> &Arc<InteractionChannel> {
        &self.channel
    }

    /// Cancelling it stops the run at its next step.
    pub fn stop(&self) -> &CancellationToken {
        &self.stop
    }

    /// How many times the provider retries a call (a progress printer says so).
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// Set when the run continues an interrupted one.
    pub fn resumed(&self) -> Option<&Resumed> {
        self.resumed.as_ref()
    }

    /// The request as the run goes (a resumed run's filled in from its records).
    pub fn request(&self) -> &RunRequest {
        &self.request
    }

    /// The agent's name.
    pub fn agent(&self) -> &str {
        self.launch.definition.name()
    }

    /// Send the run's events to `sink`.
    #[must_use]
    pub fn with_event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.launch.factory = self.launch.factory.with_event_sink(sink);
        self
    }

    /// Send the run's events to a front end's `sink`, if any, and to the test-only crash
    /// points ([`super::sinks::crash_points`]) when their variables are set: what each entry
    /// point of a person's run (`lsm agent run`, the queue's worker, `run_agent`) attaches.
    #[must_use]
    pub fn watched_by(self, sink: Option<Arc<dyn EventSink>>) -> Self {
        match super::sinks::fanout(
            sink.into_iter()
                .chain(super::sinks::crash_points())
                .collect(),
        ) {
            Some(sink) => self.with_event_sink(sink),
            None => self,
        }
    }

    /// Send the agent's own log lines to `sink` (without one, they go to the log only).
    #[must_use]
    pub fn with_log_sink(mut self, sink: Arc<dyn AgentLogSink>) -> Self {
        self.launch.log_sink = Some(sink);
        self
    }

    /// Call `hook` with the run's harness once it is built, before its first phase.
    #[must_use]
    pub fn on_start(mut self, hook: impl Fn(&AgentHarness) + Send + Sync + 'static) -> Self {
        self.launch.factory = self.launch.factory.with_on_build(hook);
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

/// What [`prepare`] refuses at once, checked without wiring a run: the options, the agent,
/// its task or topic, the provider. For a front end that starts many runs of one request
/// (`run-many`): it fails once, not in every run. Returns the configuration's agents.
///
/// # Errors
/// As [`prepare`]'s usage errors.
pub fn check(request: &RunRequest, config: &Config) -> Result<Catalog> {
    let cwd = std::env::current_dir()?;
    let config = config.with_options(&request.options(), &cwd)?;
    let catalog = crate::agent_defs::catalog(&config)?;
    let definition = crate::agent_defs::find(&catalog, &request.name)?;
    objective(
        definition,
        request.task.as_deref(),
        request.topic.as_deref(),
        request.max_rounds,
    )?;
    let llm = crate::agent_defs::resolve_llm(&config, definition)?;
    wiring::build_provider(&llm, &request.llm, &cwd, &config.source_name())?;
    Ok(catalog)
}

/// Wire the run `request` asks for under `config`, as `start` says. Runs on a
/// multi-threaded runtime (MCP servers are listed on it).
///
/// # Errors
/// A usage error (exit code 2) for a bad request or configuration.
pub fn prepare(mut request: RunRequest, config: &Config, start: Start) -> Result<PreparedRun> {
    let Start {
        stop,
        notify,
        store,
        run_id,
        cwd,
        channel,
        catalog,
        worker,
    } = start;
    let mut cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let is_worker = worker.is_some();
    let pg = match store {
        Store::Configured => crate::store::pg_runs(config)?,
        Store::Files => None,
        Store::Pg(pg) => Some(pg),
    };
    if request.settings.max_workers == Some(0) {
        return Err(usage("--max-workers must be at least 1"));
    }
    let mut config = config.with_options(&request.options(), &cwd)?;
    let catalog = match catalog {
        Some(catalog) => catalog,
        None => crate::agent_defs::catalog(&config)?,
    };
    let point = match request.resume.clone() {
        Some(run_id) => {
            let point = match &pg {
                Some(pg) => resume::open_pg_run(pg, &config.agents.agents_folder, &run_id)?,
                None => resume::open_run(&config.agents.agents_folder, &run_id)?,
            };
            if let Some(dir) = resume::recorded(&mut request, &point, &catalog)? {
                cwd = dir;
            }
            let point = resume::supply_results(point, &request.tool_results, &cwd)?;
            // The run's own folder and limits, from its records.
            config = config.with_options(&request.options(), &cwd)?;
            Some(point)
        }
        None => None,
    };
    if let Some(worker) = &worker {
        config.sandbox = worker.sandbox.clone();
    }
    let definition = crate::agent_defs::find(&catalog, &request.name)?.clone();
    let spec = &definition.spec;
    crate::agent_defs::apply_settings(&definition, &mut config)?;
    let max_rounds = request.max_rounds.or(definition.settings.max_rounds);
    let objective = objective(
        &definition,
        request.task.as_deref(),
        request.topic.as_deref(),
        request.max_rounds,
    )?;
    if let Some(path) = &request.contract {
        let contract = crate::config::read_contract(path)?;
        config.agents.contracts.insert(spec.name.clone(), contract);
    }

    let known = crate::tools::known_tool_names(&config);
    for tool in &request.allow_tools {
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
    extra_tools.extend(request.allow_tools.iter().cloned());
    // The run's wiring starts the MCP servers the allowlists name, `--allow-tool` included.
    config
        .agents
        .extra_tools
        .insert(spec.name.clone(), extra_tools.clone());
    config.confine_to_working_dir_by_default(&cwd);

    if let Some(usd) = config.agents.max_cost_usd
        && !(usd.is_finite() && usd > 0.0)
    {
        return Err(usage(format!(
            "{}: max_cost_usd = {usd} must be a positive number of dollars",
            config.origin("agents.max_cost_usd")
        )));
    }

    // A new turn of a finished run's conversation starts from its contexts and spending.
    let continuation = match &request.continue_run {
        Some(earlier) => Some(super::resume::continuation(
            &config.agents.agents_folder,
            earlier,
            &spec.name,
            pg.as_ref(),
        )?),
        None => None,
    };
    let llm = crate::agent_defs::resolve_llm(&config, &definition)?;
    let flags = wiring::ProviderFlags {
        // A script continues where the interrupted run (or the conversation) left it.
        script_start: match (&point, &continuation) {
            (Some(p), _) => usize::try_from(p.model_calls_made()).unwrap_or(usize::MAX),
            (None, Some(c)) => usize::try_from(c.usage.llm_calls).unwrap_or(usize::MAX),
            (None, None) => 0,
        },
        model_flag: true,
        ..request.llm.clone()
    };
    let provider = wiring::build_provider(&llm, &flags, &cwd, &config.source_name())?.provider;
    // A worker's cost is its parent's ceiling's affair, priced or not.
    if !is_worker && config.agents.max_cost_usd.is_some() && provider.pricing().is_none() {
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
    let channel = match channel {
        Some(channel) => channel,
        None => interaction_wiring::run_channel(&config.agents.interaction)?,
    };
    let budget = worker.map(|w| w.budget);
    let parts = run_wiring::build_run(&config, provider, &channel, stop.clone(), budget)?;
    let ask_user_available = parts.ask_user_available;
    let extra_tools = parts.expand_allowlist(extra_tools);
    let mut factory = parts
        .factory
        // What `lsm runs resume` needs to build this run again.
        .with_launch(request.launch(&cwd))
        .with_worker_spawner(Arc::new(super::workers::WorkerRuns {
            config: config.clone(),
            request: request.clone(),
            cwd: cwd.clone(),
            pg: pg.clone(),
            catalog: catalog.clone(),
        }));
    let lease_done = CancellationToken::new();
    if let Some(pg) = &pg {
        factory = factory.with_store(crate::store::store_of(pg));
    }
    if let Some(pg) = pg.as_ref().filter(|_| !is_worker) {
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
    let resumed = point.as_ref().map(|point| Resumed {
        run_id: point.run_id().to_string(),
        last_seq: point.last_seq(),
        warning: point.warning().map(str::to_string),
    });
    if let Some(point) = point {
        factory = factory.resuming(point);
    }
    if let Some(continuation) = continuation {
        factory = factory.continuing(continuation);
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
        log_sink: None,
        interactions: Some(Arc::clone(&channel)),
    };
    Ok(PreparedRun {
        launch,
        channel,
        stop,
        lease_done,
        max_retries: llm.http.max_retries,
        resumed,
        request,
    })
}
