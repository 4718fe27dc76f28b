//! `lsm agent run <name>`: wire a provider, the sandbox and a harness factory, then run the
//! agent through the agent layer (`agents_cmd`) and report.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use tokio_util::sync::CancellationToken;

use lsm_harness::RunLaunch;

mod resume;

use crate::agents_cmd::{self, AgentRunOptions, Output};
use crate::config::Config;
use crate::exit::{self, usage};
use crate::foreground;
use crate::interaction_wiring;
pub use crate::output::OutputFormat;
use crate::run_sinks;
use crate::run_wiring;
use crate::wiring;

/// Arguments of `lsm agent run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The agent to run (see `lsm agent list`).
    pub name: String,

    /// What the agent should do (agents that take a task).
    #[arg(long)]
    pub task: Option<String>,

    /// What the agent should work on (agents that take a topic: research, synthesis, writing).
    #[arg(long)]
    pub topic: Option<String>,

    /// Refinement rounds of the research agent (default 2).
    #[arg(long, value_name = "N")]
    pub max_rounds: Option<u32>,

    #[command(flatten)]
    pub llm: wiring::ProviderFlags,

    /// Root of the agents' workspaces and run records (default: [agents] agents_folder).
    #[arg(long, value_name = "DIR")]
    pub agents_folder: Option<PathBuf>,

    /// Iteration limit of the run (default: [agents] max_iterations).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_iterations: Option<u32>,

    /// Token ceiling of the run (default: [agents] max_tokens_budget).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens_budget: Option<u64>,

    /// Cost ceiling of the run in US dollars (default: [agents] max_cost_usd); needs the
    /// model's prices in [llm] pricing.
    #[arg(long, value_name = "USD")]
    pub max_cost_usd: Option<f64>,

    /// Print only the final run summary, as JSON, on stdout (same as `--output-format json`).
    #[arg(long, conflicts_with = "output_format")]
    pub json: bool,

    /// What stdout carries: `text` (the answer and a summary line; progress on stderr),
    /// `json` (only the final run summary), `stream-json` (every run event as one JSON line
    /// as it happens, then the final result line).
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub output_format: Option<OutputFormat>,

    /// Continue the interrupted run RUN_ID instead of starting one (see `lsm runs list`);
    /// the task, provider and limits come from the run's records.
    #[arg(long, value_name = "RUN_ID")]
    pub resume: Option<String>,

    /// Approve every permission request automatically (recorded as such in the transcript
    /// and the summary). Without it, a request is asked on the terminal, or denied at once
    /// when stdin is not a terminal.
    #[arg(long)]
    pub yes: bool,

    /// Offer the agent this tool too, beyond its allowlist (repeatable; e.g. `bash`). Same as
    /// `[agents.extra_tools] <agent> = [...]`; the tool must exist (`lsm tools list`).
    #[arg(long = "allow-tool", value_name = "TOOL")]
    pub allow_tools: Vec<String>,

    /// How strictly the run must prove its task complete before it stops:
    /// `interactive` (after the retries a stop is accepted, the summary lists what was unmet)
    /// or `strict_automation` (`done` only with `work_complete` called and the contract and
    /// work items satisfied; otherwise exit code 8). Default: [agents] stop_mode.
    #[arg(long, value_name = "MODE", value_enum)]
    pub stop_mode: Option<StopModeArg>,

    /// Worker runs the conductor runs at once (default: [conductor] max_workers, 3).
    #[arg(long, value_name = "N")]
    pub max_workers: Option<usize>,

    /// Store the run in the PostgreSQL store for a worker (`lsm worker`) instead of running
    /// it here; prints its id. Needs `[store] url`. Same as `lsm runs submit`.
    #[arg(long)]
    pub enqueue: bool,

    /// The task contract the run is held to: a TOML file of `[[require]]` predicates and
    /// `required_outputs` (see docs/CONFIG.md). Replaces [agents.contracts.<agent>].
    #[arg(long, value_name = "FILE")]
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

impl From<OutputFormat> for Output {
    fn from(format: OutputFormat) -> Output {
        match format {
            OutputFormat::Text => Output::Human,
            OutputFormat::Json => Output::Json,
            OutputFormat::StreamJson => Output::StreamJson,
        }
    }
}

/// Run; returns the exit code.
pub fn run(cfg: &crate::config::ConfigArgs, args: RunArgs) -> u8 {
    let cfg = cfg.clone();
    exit::spawn_command(async move { run_async(&cfg, args).await })
}

async fn run_async(cfg: &crate::config::ConfigArgs, args: RunArgs) -> Result<u8> {
    // Caught from here on: a signal during the set-up stops the run before its first step.
    let stop = CancellationToken::new();
    // Ctrl-C (SIGINT) or SIGTERM: the run stops at its next step, its summary is written
    // and the program exits with code 4 (`stop_requested`), like any requested stop.
    let signals = crate::signals::on_stop("finishing the current step", {
        let stop = stop.clone();
        move || stop.cancel()
    });
    let config = cfg.load()?;
    let output = Output::from(OutputFormat::chosen(args.json, args.output_format));
    let yes = args.yes;
    let run = prepare(config, args, output, stop)?;
    let answering = foreground::answer_in_foreground(&run.channel, yes);
    let channel = Arc::clone(&run.channel);
    let lease_done = run.lease_done.clone();
    let code = agents_cmd::run(run.definition, &run.objective, run.factory, run.opts).await;
    lease_done.cancel();
    channel.shutdown("the run ended");
    answering.abort();
    signals.abort();
    code
}

/// One agent run, wired and ready to start: what `lsm agent run`, `lsm runs resume` and the
/// MCP `run_agent` tool share. Start it with [`agents_cmd::run`] or [`agents_cmd::execute`],
/// after attaching someone to answer its channel.
pub struct PreparedRun {
    /// The agent.
    pub definition: lsm_agents::AgentDefinition,
    /// Its task or topic.
    pub objective: String,
    /// The run's harness factory.
    pub factory: lsm_harness::HarnessFactory,
    /// What the agent layer needs.
    pub opts: AgentRunOptions,
    /// The run's interaction channel (shut it down when the run ends).
    pub channel: Arc<lsm_interaction::InteractionChannel>,
    /// Cancelling it stops the run at its next step.
    pub stop: CancellationToken,
    /// Cancel it when the run has ended: it ends the lease watcher of a run in PostgreSQL.
    pub lease_done: CancellationToken,
}

/// Wire one run of `config` as `args` say: the agent and its task or topic, a resumed run's
/// records, the limits, the tools offered, the provider, the channel and the factory, with
/// `output`'s event sink; cancelling `stop` stops the run at its next step (a stop cancelled
/// before the run starts stops it at its first). Runs on a multi-threaded runtime (MCP
/// servers are listed on it).
///
/// # Errors
/// A usage error (exit code 2) for a bad argument or configuration.
pub fn prepare(
    config: Config,
    args: RunArgs,
    output: Output,
    stop: CancellationToken,
) -> Result<PreparedRun> {
    let pg = crate::run_store::pg_runs(&config)?;
    prepare_with(config, args, output, pg, None, None, stop)
}

/// [`prepare`] on the PostgreSQL runs `pg` (when `[store] url` is set), starting the new run
/// under `run_id` when given (a queued run's), in `cwd` when given (else the process's
/// working directory).
///
/// # Errors
/// As [`prepare`].
pub fn prepare_with(
    mut config: Config,
    mut args: RunArgs,
    output: Output,
    pg: Option<lsm_store_pg::PgRuns>,
    run_id: Option<String>,
    cwd: Option<PathBuf>,
    stop: CancellationToken,
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
    let objective = agents_cmd::objective(
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
        let contract = crate::agents_config::read_contract(path)?;
        config.agents.contracts.insert(spec.name.clone(), contract);
    }
    let known = crate::tool_rows::known_tool_names(&config);
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
    let launch = RunLaunch {
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
        .with_launch(launch)
        .with_worker_spawner(Arc::new(crate::workers::CliWorkers {
            config: config.clone(),
            flags: flags.clone(),
            cwd: cwd.clone(),
            auto_approve: args.yes,
            pg: pg.clone(),
            catalog: catalog.clone(),
        }));
    let lease_done = CancellationToken::new();
    if let Some(pg) = &pg {
        factory = factory.with_store(crate::run_store::store_of(pg));
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
        crate::run_store::watch_lease(pg.clone(), id.clone(), stop.clone(), lease_done.clone());
    }
    if let Some(contract) = config.agents.contract_of(&spec.name) {
        factory = factory.with_contract(contract);
    }
    if let Some(sink) = run_sinks::for_output(output, Some(llm.http.max_retries)) {
        factory = factory.with_event_sink(sink);
    }
    if let Some(point) = point {
        if let Some(w) = point.warning() {
            eprintln!("note: {}", crate::text::masked_line(w));
        }
        if output == Output::Human {
            eprintln!(
                "resuming run {} after line {} of its transcript",
                point.run_id(),
                point.last_seq()
            );
        }
        factory = factory.resuming(point);
    }
    let opts = AgentRunOptions {
        agents_folder: config.agents.agents_folder.clone(),
        max_iterations: config.agents.max_iterations,
        max_rounds,
        max_workers: config.conductor.max_workers,
        ask_user_available,
        extra_tools,
        output,
        interactions: Some(Arc::clone(&channel)),
    };
    Ok(PreparedRun {
        definition,
        objective,
        factory,
        opts,
        channel,
        stop,
        lease_done,
    })
}
