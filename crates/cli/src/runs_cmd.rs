//! `lsm runs list` and `lsm runs resume`: the runs recorded under the agents folder, and
//! continuing one whose process died.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::{Args, Subcommand};
use lsm_harness::{HarnessError, LockState, ResumePoint, RunEvent, StartedRun};

use crate::agent_run::{self, OutputFormat, RunArgs, usage};
use crate::config;
use crate::exit;
use crate::legacy_runs;

/// `lsm runs ...`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List recorded runs: id, agent, status (running | interrupted | done | failed), start,
    /// task.
    List(ListArgs),
    /// Continue an interrupted run to its end (same records, nothing repeated).
    Resume(ResumeArgs),
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
pub enum Status {
    /// Not finished, and its lock's process is alive.
    Running,
    /// Not finished, and no live process drives it: resume it.
    Interrupted,
    /// Finished: completed or stopped.
    Done,
    /// Finished as failed.
    Failed,
}

/// One recorded run.
#[derive(Debug, Clone, serde::Serialize)]
struct RunRow {
    run_id: String,
    agent: String,
    status: Status,
    started_at: String,
    topic: String,
    /// `completed`, `stopped` or `failed`, once finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    finished: Option<String>,
    run_dir: String,
    /// The transcript's schema version (1: written before typed run events).
    schema_version: u64,
    /// Whether `lsm runs resume` can continue it now: interrupted, and recorded with a
    /// schema a resume can fold (version 1 runs never are).
    resumable: bool,
}

/// Run a `lsm runs` command; returns the exit code.
pub fn run(config_path: Option<&Path>, command: RunsCommand) -> u8 {
    match command {
        RunsCommand::List(args) => exit::block_on_command(async move { list(config_path, args) }),
        RunsCommand::Resume(args) => resume(config_path, args),
    }
}

fn agents_folder(config_path: Option<&Path>, flag: Option<&Path>) -> Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    Ok(match flag {
        Some(dir) => cwd.join(dir),
        None => config::load(config_path, &config::lsm_env())?
            .agents
            .agents_folder
            .clone(),
    })
}

fn list(config_path: Option<&Path>, args: ListArgs) -> Result<u8> {
    let root = agents_folder(config_path, args.agents_folder.as_deref())?;
    let mut rows: Vec<RunRow> = scan(&root)
        .into_iter()
        .filter(|r| args.agent.as_ref().is_none_or(|a| *a == r.agent))
        .filter(|r| args.status.is_none_or(|s| s == r.status))
        .collect();
    rows.sort_by(|a, b| a.started_at.cmp(&b.started_at));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        println!("no runs under {}", root.display());
        return Ok(exit::OK);
    }
    println!(
        "{:<26}  {:<18}  {:<11}  {:<24}  TOPIC",
        "RUN_ID", "AGENT", "STATUS", "STARTED"
    );
    for r in &rows {
        let status = serde_json::to_value(r.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let topic: String = r.topic.chars().take(60).collect();
        println!(
            "{:<26}  {:<18}  {:<11}  {:<24}  {}",
            r.run_id,
            r.agent,
            status,
            r.started_at,
            crate::secrets::clean(&topic.replace('\n', " "))
        );
    }
    Ok(exit::OK)
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
    let transcript = run_dir.join("transcript.jsonl");
    if legacy_runs::schema_version(&transcript)? < u64::from(lsm_harness::SCHEMA_VERSION) {
        return legacy_row(run_dir);
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
    Some(RunRow {
        run_id: journal.events.first()?.run_id.clone(),
        agent: started.agent,
        status,
        started_at: started.started_at,
        topic: started.topic,
        finished,
        run_dir: run_dir.display().to_string(),
        schema_version: u64::from(journal.events.first()?.schema_version),
        resumable: status == Status::Interrupted,
    })
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

/// Find the run `run_id` under `root` and open it to be resumed (locking it).
///
/// # Errors
/// A usage error when there is no such run, it is driven by a live process, or it has
/// finished.
pub fn open_run(root: &Path, run_id: &str) -> Result<ResumePoint> {
    let valid = !run_id.is_empty()
        && run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let found = valid
        .then(|| {
            std::fs::read_dir(root).ok().and_then(|agents| {
                agents
                    .flatten()
                    .map(|a| a.path().join("logs").join(run_id))
                    .find(|d| d.join("transcript.jsonl").is_file())
            })
        })
        .flatten();
    let Some(run_dir) = found else {
        return Err(usage(format!(
            "no run '{run_id}' under {}; `lsm runs list` shows the runs",
            root.display()
        )));
    };
    if legacy_runs::schema_version(&run_dir.join("transcript.jsonl"))
        .is_some_and(|v| v < u64::from(lsm_harness::SCHEMA_VERSION))
    {
        return Err(usage(legacy_runs::not_resumable(run_id)));
    }
    ResumePoint::open(&run_dir).map_err(|e| match e {
        HarnessError::Locked { pid, .. } => usage(format!(
            "run {run_id} is already being driven by process {}; a run is resumed by one process at a time",
            pid.map_or_else(|| "(unknown)".to_string(), |p| p.to_string())
        )),
        other => usage(other.to_string()),
    })
}

/// Fill `args` in from what the run recorded (agent, task or topic, provider, limits);
/// returns the working directory the run was started in, when it was recorded.
///
/// # Errors
/// When `args` names another agent than the run's.
pub fn recorded(args: &mut RunArgs, point: &ResumePoint) -> Result<Option<PathBuf>> {
    let started = point.started();
    if !args.name.is_empty() && args.name != started.agent {
        return Err(usage(format!(
            "run {} is a run of agent '{}', not '{}'",
            point.run_id(),
            started.agent,
            args.name
        )));
    }
    args.name.clone_from(&started.agent);
    let takes_topic =
        lsm_agents::find(&started.agent).is_some_and(|s| s.input == lsm_agents::TaskInput::Topic);
    if takes_topic {
        args.topic = Some(started.topic.clone());
        args.task = None;
    } else {
        args.task = Some(started.topic.clone());
        args.topic = None;
    }
    let launch = started.launch.clone().unwrap_or_default();
    args.provider = launch.provider_spec;
    args.model = launch.model;
    args.base_url = launch.base_url;
    args.max_iterations = launch.max_iterations;
    args.max_rounds = launch.max_rounds;
    args.allow_tools = launch.extra_tools;
    args.max_tokens_budget = Some(started.max_tokens_budget);
    args.max_cost_usd = started.max_cost_usd;
    // The run's own folder decides where its records are, whatever the configuration says.
    args.agents_folder = point
        .run_dir()
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    Ok(launch.working_dir.map(PathBuf::from))
}

/// `lsm runs resume <run_id>`: the same path as `lsm agent run --resume`.
fn resume(config_path: Option<&Path>, args: ResumeArgs) -> u8 {
    let run = RunArgs {
        name: String::new(),
        task: None,
        topic: None,
        max_rounds: None,
        provider: None,
        model: None,
        base_url: None,
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
    };
    agent_run::run(config_path, run)
}
