//! `lsm runs list` and `lsm runs resume`: the runs recorded under the agents folder, and
//! continuing one whose process died; the PostgreSQL store's `submit`, `cancel` and
//! `follow`. `lsm runs show` is in [`show`].

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Args, Subcommand};
use lsm_harness::{EventEnvelope, LockState, RunEvent, StartedRun};

use crate::agent_run::{self, OutputFormat, RunArgs};
use crate::exit;
use crate::legacy_runs;

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
}

/// A run's status as `lsm runs list` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// Not finished, and its lock's process is alive.
    Running,
    /// Not finished, and no live process drives it: resume it.
    Interrupted,
    /// Finished: completed or stopped.
    Done,
    /// Finished as failed.
    Failed,
    /// In the PostgreSQL store, waiting for a worker.
    Queued,
    /// In the PostgreSQL store, cancelled (`lsm runs cancel`).
    Cancelled,
}

/// One recorded run.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct RunRow {
    pub(crate) run_id: String,
    pub(crate) agent: String,
    pub(crate) status: Status,
    pub(crate) started_at: String,
    pub(crate) topic: String,
    /// `completed`, `stopped` or `failed`, once finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) finished: Option<String>,
    run_dir: String,
    /// The transcript's schema version (1: written before typed run events).
    schema_version: u64,
    /// Whether `lsm runs resume` can continue it now: interrupted, and recorded with a
    /// schema a resume can fold (version 1 runs never are).
    resumable: bool,
}

/// Run a `lsm runs` command; returns the exit code.
pub fn run(cfg: &crate::config::ConfigArgs, command: RunsCommand) -> u8 {
    match command {
        RunsCommand::List(args) => exit::block_on_command(async move { list(cfg, args).await }),
        RunsCommand::Resume(args) => resume(cfg, args),
        RunsCommand::Submit(args) => crate::queue::submit(cfg, *args),
        RunsCommand::Show(args) => {
            exit::block_on_command(async move { show::show(cfg, args).await })
        }
        RunsCommand::Cancel(args) => exit::block_on_command(async move { cancel(cfg, args).await }),
        RunsCommand::Follow(args) => exit::block_on_command(async move { follow(cfg, args).await }),
    }
}

/// The PostgreSQL runs, or a usage error saying the command needs them.
fn pg_required(cfg: &crate::config::ConfigArgs, command: &str) -> Result<lsm_store_pg::PgRuns> {
    let config = cfg.load()?;
    crate::run_store::pg_runs(&config)?.ok_or_else(|| {
        exit::usage(format!(
            "`lsm runs {command}` works on the PostgreSQL store: set [store] url (or \
             LSM_STORE_URL) to postgres://USER@HOST:PORT/DATABASE"
        ))
    })
}

async fn cancel(cfg: &crate::config::ConfigArgs, args: RunIdArgs) -> Result<u8> {
    use lsm_store_pg::CancelOutcome;
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
            return Err(exit::usage(format!(
                "no run '{}' in the PostgreSQL store",
                args.run_id
            )));
        }
    }
    Ok(exit::OK)
}

async fn follow(cfg: &crate::config::ConfigArgs, args: FollowArgs) -> Result<u8> {
    use std::io::Write;
    let pg = pg_required(cfg, "follow")?;
    if pg.get(&args.run_id).await.map_err(store_error)?.is_none() {
        return Err(exit::usage(format!(
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
            writeln!(out, "{}", crate::text::json_line(line))?;
            after = *seq;
        }
        out.flush()?;
        drop(out);
        if lines.is_empty() {
            let row = pg.get(&args.run_id).await.map_err(store_error)?;
            let ended = row
                .as_ref()
                .is_none_or(|r| lsm_store_pg::FINISHED_STATUSES.contains(&r.status.as_str()));
            // Lines written before the end are read before it is believed.
            if ended && row.is_none_or(|r| r.last_seq <= after) {
                return Ok(exit::OK);
            }
            tokio::time::sleep(poll).await;
        }
    }
}

pub(crate) fn store_error(e: lsm_store_pg::StoreError) -> anyhow::Error {
    exit::usage(format!("[store] url: {e}"))
}

/// The agents folder: `flag` (under the working folder), else the configuration's.
pub(crate) fn agents_folder(
    cfg: &crate::config::ConfigArgs,
    flag: Option<&Path>,
) -> Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    Ok(match flag {
        Some(dir) => {
            let folder = cwd.join(dir);
            crate::secrets::register_own_folders([cwd.as_path(), folder.as_path()]);
            folder
        }
        None => cfg.load()?.agents.agents_folder.clone(),
    })
}

async fn list(cfg: &crate::config::ConfigArgs, args: ListArgs) -> Result<u8> {
    let root = agents_folder(cfg, args.agents_folder.as_deref())?;
    let pg = crate::run_store::pg_runs(&cfg.load()?)?;
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
        crate::output::print_json(&serde_json::to_string_pretty(&rows)?);
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        match &pg {
            Some(pg) => println!(
                "no runs in {}",
                crate::text::one_line(pg.db().settings().target())
            ),
            None => println!(
                "no runs under {}",
                crate::text::one_line(root.display().to_string())
            ),
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
            crate::text::masked_line(&r.run_id),
            crate::text::masked_line(&r.agent),
            status,
            crate::text::masked_line(&r.started_at),
            crate::text::masked_line(&topic)
        );
    }
    Ok(exit::OK)
}

/// Every run in the PostgreSQL store (queued ones show as `queued`, interrupted ones are
/// those whose driver's lease ran out).
async fn pg_rows(pg: &lsm_store_pg::PgRuns) -> Result<Vec<RunRow>> {
    let rows = pg
        .list(&lsm_store_pg::ListFilter::default())
        .await
        .map_err(store_error)?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let status = match r.status.as_str() {
                "queued" => Status::Queued,
                "running" if r.lease_expired => Status::Interrupted,
                "running" => Status::Running,
                "failed" => Status::Failed,
                "cancelled" => Status::Cancelled,
                _ => Status::Done,
            };
            let finished = lsm_store_pg::FINISHED_STATUSES
                .contains(&r.status.as_str())
                .then(|| r.status.clone());
            RunRow {
                run_id: r.run_id,
                agent: r.agent,
                status,
                started_at: r.started_at.unwrap_or(r.created_at),
                topic: r.topic,
                finished,
                run_dir: String::new(),
                schema_version: u64::from(lsm_harness::SCHEMA_VERSION),
                resumable: status == Status::Interrupted,
            }
        })
        .collect())
}

/// Every run under `root`: `<root>/<agent>/logs/<run_id>/transcript.jsonl`.
fn scan(root: &Path) -> Vec<RunRow> {
    let mut rows = Vec::new();
    let Ok(agents) = std::fs::read_dir(root) else {
        return rows;
    };
    for agent in agents.flatten() {
        let Ok(runs) = std::fs::read_dir(agent.path().join("logs")) else {
            continue;
        };
        for run in runs.flatten() {
            if let Some(row) = row_of(&run.path()) {
                rows.push(row);
            }
        }
    }
    rows
}

fn row_of(run_dir: &Path) -> Option<RunRow> {
    read_run(run_dir).map(|(row, _)| row)
}

/// The run in `run_dir`: its row, and its journal's events (none for a version 1 run).
pub(crate) fn read_run(run_dir: &Path) -> Option<(RunRow, Vec<EventEnvelope>)> {
    let transcript = run_dir.join("transcript.jsonl");
    if legacy_runs::schema_version(&transcript)? < u64::from(lsm_harness::SCHEMA_VERSION) {
        return legacy_row(run_dir).map(|row| (row, Vec::new()));
    }
    let journal = lsm_harness::read_journal(&run_dir.join("transcript.jsonl")).ok()?;
    let started = StartedRun::of(&journal.events)?;
    let finished = journal.events.iter().rev().find_map(|e| match &e.event {
        RunEvent::RunFinished { status, .. } => Some(status.clone()),
        _ => None,
    });
    let status = match finished.as_deref() {
        Some("failed") => Status::Failed,
        Some(_) => Status::Done,
        None => match lsm_harness::lock_state(run_dir) {
            LockState::Held(_) => Status::Running,
            LockState::Stale(_) | LockState::Absent => Status::Interrupted,
        },
    };
    let row = RunRow {
        run_id: journal.events.first()?.run_id.clone(),
        agent: started.agent,
        status,
        started_at: started.started_at,
        topic: started.topic,
        finished,
        run_dir: run_dir.display().to_string(),
        schema_version: u64::from(journal.events.first()?.schema_version),
        resumable: status == Status::Interrupted,
    };
    Some((row, journal.events))
}

/// A run recorded before typed run events: its status from `run_summary.json` or `run_end`;
/// never resumable.
fn legacy_row(run_dir: &Path) -> Option<RunRow> {
    let run = legacy_runs::read(run_dir)?;
    let status = match run.finished.as_deref() {
        Some("failed") => Status::Failed,
        Some(_) => Status::Done,
        None => Status::Interrupted,
    };
    Some(RunRow {
        run_id: run.run_id,
        agent: run.agent,
        status,
        started_at: run.started_at,
        topic: run.topic,
        finished: run.finished,
        run_dir: run_dir.display().to_string(),
        schema_version: 1,
        resumable: false,
    })
}

/// `lsm runs resume <run_id>`: the same path as `lsm agent run --resume`.
fn resume(cfg: &crate::config::ConfigArgs, args: ResumeArgs) -> u8 {
    let run = RunArgs {
        name: String::new(),
        task: None,
        topic: None,
        max_rounds: None,
        llm: crate::wiring::ProviderFlags::default(),
        agents_folder: args.agents_folder,
        max_iterations: None,
        max_tokens_budget: None,
        max_cost_usd: None,
        json: args.json,
        output_format: args.output_format,
        resume: Some(args.run_id),
        yes: args.yes,
        allow_tools: Vec::new(),
        // A resumed run keeps the stop mode and contract its journal recorded.
        stop_mode: None,
        contract: None,
        max_workers: None,
        enqueue: false,
    };
    agent_run::run(cfg, run)
}
