//! `lsm agent run <name>` (and `lsm runs resume`): prepare the run with the engine
//! (`lsm_app::run::prepare`), attach the terminal — progress or a stream on the output format,
//! the agent's log lines, the person answering requests, Ctrl-C — then run it and report.

use anyhow::Result;
use clap::Args;
use lsm_app::run::{RunRequest, Start};
use tokio_util::sync::CancellationToken;

use crate::exit;
use crate::signals;
use crate::terminal::output::OutputFormat;
use crate::terminal::{foreground, notices, report, sinks};

/// Arguments of `lsm agent run` (and `lsm runs submit`): the run, and how it is shown.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The run.
    #[command(flatten)]
    pub request: RunRequest,

    /// Print only the final run summary, as JSON, on stdout (same as `--output-format json`).
    #[arg(long, conflicts_with = "output_format")]
    pub json: bool,

    /// What stdout carries: `text` (the answer and a summary line; progress on stderr),
    /// `json` (only the final run summary), `stream-json` (every run event as one JSON line
    /// as it happens, then the final result line).
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub output_format: Option<OutputFormat>,

    /// Store the run in the PostgreSQL store for a worker (`lsm worker`) instead of running
    /// it here; prints its id. Needs `[store] url`. Same as `lsm runs submit`.
    #[arg(long)]
    pub enqueue: bool,
}

/// Run; returns the exit code.
pub fn run(cfg: &lsm_app::config::ConfigArgs, args: RunArgs) -> u8 {
    let format = OutputFormat::chosen(args.json, args.output_format);
    start(cfg, args.request, format)
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
    let run = lsm_app::run::prepare(request, &config, Start::new(stop, notices::on_stderr()))?;
    if let Some(resumed) = run.resumed() {
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
    let sink = sinks::for_output(format, run.max_retries());
    let run = run.watched_by(sink).with_log_sink(report::agent_log());
    let answering = foreground::answer_in_foreground(run.channel(), yes);
    let finished = run.execute().await;
    answering.abort();
    let finished = finished?;
    let code = exit::of_run(&finished);
    report::report(&finished, format, code)?;
    signals.abort();
    Ok(code)
}
