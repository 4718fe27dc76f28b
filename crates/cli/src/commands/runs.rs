//! `lsm runs list` and `lsm runs resume`: the runs recorded under the agents folder, and
//! continuing one whose process died; the PostgreSQL store's `submit`, `cancel` and
//! `follow`. `lsm runs show` is in [`show`].

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use lsm_app::run::{RunRequest, RunSettings};
use lsm_app::store::list::{RunRow, Status, agents_folder, pg_rows, scan, store_error};

use super::agent_run::{self, RunArgs};
use crate::exit;
use crate::terminal::output::OutputFormat;
use crate::terminal::text::{masked_line, one_line};

mod show;

/// `lsm runs ...`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List recorded runs: id, agent, status (running | interrupted | done | failed), start,
    /// task.
    List(ListArgs),
    /// Continue an interrupted run to its end (same records, nothing repeated).
    Resume(ResumeArgs),
    /// Queue a run in the PostgreSQL store for a worker (`lsm worker`); prints its id. Takes
    /// the arguments of `lsm agent run`.
    Submit(Box<RunArgs>),
    /// One run: status, agent, task, usage, tools, artifacts, its last events (and on the
    /// PostgreSQL store its lease and attempts); `--json` for the document.
    Show(show::ShowArgs),
    /// Stop a run in the PostgreSQL store: a queued run (or one whose worker died) at once,
    /// a running one at its worker's next heartbeat, on whatever machine it runs.
    Cancel(RunIdArgs),
    /// Print a run's events from the PostgreSQL store as they are recorded (stream-json
    /// lines, the format of `--output-format stream-json`) until it ends.
    Follow(FollowArgs),
}

/// `lsm runs cancel <run_id>`.
#[derive(Debug, Args)]
pub struct RunIdArgs {
    /// The run.
    run_id: String,
}

/// `lsm runs follow <run_id>`.
#[derive(Debug, Args)]
pub struct FollowArgs {
    /// The run.
    run_id: String,
    /// Start after this journal line (0: from the start).
    #[arg(long, value_name = "SEQ", default_value_t = 0)]
    after: i64,
    /// How often to look for new lines, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    poll_ms: u64,
}

/// `lsm runs list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this agent's runs.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Only runs with this status.
    #[arg(long, value_enum)]
    status: Option<Status>,
    /// Root of the agents' workspaces (default: [agents] agents_folder).
    #[arg(long, value_name = "DIR")]
    agents_folder: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// `lsm runs resume`.
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run (see `lsm runs list`).
    run_id: String,
    /// Root of the agents' workspaces (default: [agents] agents_folder).
    #[arg(long, value_name = "DIR")]
    agents_folder: Option<PathBuf>,
    /// Print only the final run summary, as JSON, on stdout.
    #[arg(long, conflicts_with = "output_format")]
    json: bool,
    /// `stream-json`: every run event as one JSON line on stdout.
    #[arg(long, value_name = "FORMAT", value_enum)]
    output_format: Option<OutputFormat>,
    /// Approve every permission request automatically (not carried over from the first run).
    #[arg(long)]
    yes: bool,
    /// Wall-clock limit of the run in seconds, counting the time it already spent (default:
    /// the limit it was started with, else [agents] max_wall_seconds).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    max_wall_seconds: Option<u64>,
    /// The result of the deferred call ID the run waits for: the text of FILE (the call and
    /// its arguments are in the run's summary, `deferred_call`, and `lsm runs show`).
    #[arg(long = "tool-result", value_name = "ID=FILE", value_parser = parse_tool_result)]
    tool_results: Vec<(String, PathBuf)>,
}

/// `ID=FILE` of `--tool-result`.
fn parse_tool_result(text: &str) -> Result<(String, PathBuf), String> {
    match text.split_once('=') {
        // Relative to where the command is typed, not to the run's own folder.
        Some((id, file)) if !id.is_empty() && !file.is_empty() => std::path::absolute(file)
            .map(|path| (id.to_string(), path))
            .map_err(|e| format!("{file}: {e}")),
        _ => Err(format!(
            "'{text}' is not ID=FILE (the deferred call's id, then the file holding its result)"
        )),
    }
}

/// Run a `lsm runs` command; returns the exit code.
pub fn run(cfg: &lsm_app::config::ConfigArgs, command: RunsCommand) -> u8 {
    match command {
        RunsCommand::List(args) => exit::block_on_command(async move { list(cfg, args).await }),
        RunsCommand::Resume(args) => resume(cfg, args),
        RunsCommand::Submit(args) => super::worker::submit(cfg, *args),
        RunsCommand::Show(args) => {
            exit::block_on_command(async move { show::show(cfg, args).await })
        }
        RunsCommand::Cancel(args) => exit::block_on_command(async move { cancel(cfg, args).await }),
        RunsCommand::Follow(args) => exit::block_on_command(async move { follow(cfg, args).await }),
    }
}

/// The PostgreSQL runs, or a usage error saying the command needs them.
fn pg_required(cfg: &lsm_app::config::ConfigArgs, command: &str) -> Result<lsm_app::store::PgRuns> {
    let config = cfg.load()?;
    lsm_app::store::pg_runs(&config)?.ok_or_else(|| {
        crate::exit::usage(format!(
            "`lsm runs {command}` works on the PostgreSQL store: set [store] url (or \
             LSM_STORE_URL) to postgres://USER@HOST:PORT/DATABASE"
        ))
    })
}

async fn cancel(cfg: &lsm_app::config::ConfigArgs, args: RunIdArgs) -> Result<u8> {
    use lsm_app::store::CancelOutcome;
    let pg = pg_required(cfg, "cancel")?;
    match pg.cancel(&args.run_id).await.map_err(store_error)? {
        CancelOutcome::Cancelled => println!("run {} cancelled", args.run_id),
        CancelOutcome::Requested => println!(
            "run {} asked to stop; its worker stops it within {:.0} s",
            args.run_id,
            pg.lease().as_secs_f64() / 3.0
        ),
        CancelOutcome::AlreadyFinished { status } => {
            println!("run {} had already ended ({status})", args.run_id);
        }
        CancelOutcome::NotFound => {
            return Err(crate::exit::usage(format!(
                "no run '{}' in the PostgreSQL store",
                args.run_id
            )));
        }
    }
    Ok(exit::OK)
}

async fn follow(cfg: &lsm_app::config::ConfigArgs, args: FollowArgs) -> Result<u8> {
    use std::io::Write;
    let pg = pg_required(cfg, "follow")?;
    if pg.get(&args.run_id).await.map_err(store_error)?.is_none() {
        return Err(crate::exit::usage(format!(
            "no run '{}' in the PostgreSQL store",
            args.run_id
        )));
    }
    let mut after = args.after;
    let poll = std::time::Duration::from_millis(args.poll_ms.max(10));
    loop {
        let lines = pg
            .lines_after(&args.run_id, after, 500)
            .await
            .map_err(store_error)?;
        let mut out = std::io::stdout().lock();
        for (seq, line) in &lines {
            // A row of a shared database: it cannot drive the terminal or forge a line.
            writeln!(out, "{}", crate::terminal::text::json_line(line))?;
            after = *seq;
        }
        out.flush()?;
        drop(out);
        if lines.is_empty() {
            let row = pg.get(&args.run_id).await.map_err(store_error)?;
            let ended = row
                .as_ref()
                .is_none_or(|r| lsm_app::store::FINISHED_STATUSES.contains(&r.status.as_str()));
            // Lines written before the end are read before it is believed.
            if ended && row.is_none_or(|r| r.last_seq <= after) {
                return Ok(exit::OK);
            }
            tokio::time::sleep(poll).await;
        }
    }
}

async fn list(cfg: &lsm_app::config::ConfigArgs, args: ListArgs) -> Result<u8> {
    let root = agents_folder(cfg, args.agents_folder.as_deref())?;
    let pg = lsm_app::store::pg_runs(&cfg.load()?)?;
    let found = match &pg {
        Some(pg) => pg_rows(pg).await?,
        None => scan(&root),
    };
    let mut rows: Vec<RunRow> = found
        .into_iter()
        .filter(|r| args.agent.as_ref().is_none_or(|a| *a == r.agent))
        .filter(|r| args.status.is_none_or(|s| s == r.status))
        .collect();
    rows.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    if args.json {
        crate::terminal::output::print_json(&serde_json::to_string_pretty(&rows)?);
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        match &pg {
            Some(pg) => println!("no runs in {}", one_line(pg.db().settings().target())),
            None => println!("no runs under {}", one_line(root.display().to_string())),
        }
        return Ok(exit::OK);
    }
    println!(
        "{:<26}  {:<18}  {:<11}  {:<24}  TOPIC",
        "RUN_ID", "AGENT", "STATUS", "STARTED"
    );
    for r in &rows {
        let topic: String = r.topic.chars().take(60).collect();
        let status = serde_json::to_value(r.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        // Every column is outside text: a database row (written by whoever can write to
        // it) or a run folder's name and summary.
        println!(
            "{:<26}  {:<18}  {:<11}  {:<24}  {}",
            masked_line(&r.run_id),
            masked_line(&r.agent),
            status,
            masked_line(&r.started_at),
            masked_line(&topic)
        );
    }
    Ok(exit::OK)
}

/// `lsm runs resume <run_id>`: the same path as `lsm agent run --resume`.
fn resume(cfg: &lsm_app::config::ConfigArgs, args: ResumeArgs) -> u8 {
    let request = RunRequest {
        settings: RunSettings {
            agents_folder: args.agents_folder,
            max_wall_seconds: args.max_wall_seconds,
            ..RunSettings::default()
        },
        resume: Some(args.run_id),
        tool_results: args.tool_results,
        yes: args.yes,
        // A resumed run keeps the provider, limits, stop mode and contract its journal
        // recorded.
        ..RunRequest::default()
    };
    agent_run::start(
        cfg,
        request,
        OutputFormat::chosen(args.json, args.output_format),
    )
}
