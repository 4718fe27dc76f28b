//! `lsm agent run <name>` (and `lsm runs resume`): prepare the run with the engine
//! (`lsm_app::run::prepare`), attach the terminal — progress or a stream on the output format,
//! the agent's log lines, the person answering requests, Ctrl-C — then run it and report.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use lsm_app::run::{RunRequest, StopModeArg};
use lsm_app::wiring::ProviderFlags;
use tokio_util::sync::CancellationToken;

use crate::exit;
use crate::signals;
use crate::terminal::output::OutputFormat;
use crate::terminal::{foreground, notices, report, sinks};

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
    pub llm: ProviderFlags,

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

impl RunArgs {
    /// What these arguments ask of the run (the rest is about how it is shown).
    pub fn request(&self) -> RunRequest {
        RunRequest {
            name: self.name.clone(),
            task: self.task.clone(),
            topic: self.topic.clone(),
            max_rounds: self.max_rounds,
            llm: self.llm.clone(),
            agents_folder: self.agents_folder.clone(),
            max_iterations: self.max_iterations,
            max_tokens_budget: self.max_tokens_budget,
            max_cost_usd: self.max_cost_usd,
            resume: self.resume.clone(),
            yes: self.yes,
            allow_tools: self.allow_tools.clone(),
            stop_mode: self.stop_mode,
            max_workers: self.max_workers,
            contract: self.contract.clone(),
        }
    }

    /// What stdout carries.
    pub fn format(&self) -> OutputFormat {
        OutputFormat::chosen(self.json, self.output_format)
    }
}

/// Run; returns the exit code.
pub fn run(cfg: &lsm_app::config::ConfigArgs, args: RunArgs) -> u8 {
    start(cfg, args.request(), args.format())
}

/// Run `request`, shown as `format` says; returns the exit code.
pub fn start(cfg: &lsm_app::config::ConfigArgs, request: RunRequest, format: OutputFormat) -> u8 {
    let cfg = cfg.clone();
    exit::spawn_command(async move { run_async(&cfg, request, format).await })
}

async fn run_async(
    cfg: &lsm_app::config::ConfigArgs,
    request: RunRequest,
    format: OutputFormat,
) -> Result<u8> {
    // Caught from here on: a signal during the set-up stops the run before its first step.
    let stop = CancellationToken::new();
    // Ctrl-C (SIGINT) or SIGTERM: the run stops at its next step, its summary is written
    // and the program exits with code 4 (`stop_requested`), like any requested stop.
    let signals = signals::on_stop("finishing the current step", {
        let stop = stop.clone();
        move || stop.cancel()
    });
    let config = cfg.load()?;
    let yes = request.yes;
    let mut run = lsm_app::run::prepare(config, request, stop, notices::on_stderr())?;
    if let Some(resumed) = &run.resumed {
        if let Some(w) = &resumed.warning {
            notices::show(lsm_app::notice::Notice::ResumeWarning(w.clone()));
        }
        if format == OutputFormat::Text {
            eprintln!(
                "resuming run {} after line {} of its transcript",
                resumed.run_id, resumed.last_seq
            );
        }
    }
    if let Some(sink) = sinks::for_output(format, run.max_retries) {
        run = run.with_event_sink(sink);
    }
    let run = run.with_log_sink(report::agent_log());
    let answering = foreground::answer_in_foreground(&run.channel, yes);
    let finished = run.execute().await;
    answering.abort();
    let finished = finished?;
    let code = exit::of_run(&finished);
    report::report(&finished, format, code)?;
    signals.abort();
    Ok(code)
}
