//! The recorded runs of either store, as `lsm runs list` and `lsm runs show` present them:
//! one [`RunRow`] per run (its status told from its journal and its lock, or from the
//! PostgreSQL row and its lease), and one run in full ([`Shown`]) — a run of the default
//! store is read from its folder into the PostgreSQL store's row, so both stores give the
//! same fields under the same names.

use std::path::{Path, PathBuf};

use crate::error::Result;
use lsm_harness::{EventEnvelope, LockState, RunEvent, StartedRun};
use serde_json::Value;

use super::legacy;
use crate::error::usage;

/// How many of a run's last journal lines [`Shown`] carries.
pub const LAST_EVENTS: usize = 10;

/// A run's status as `lsm runs list` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not finished, and its lock's process is alive.
    Running,
    /// Not finished, and no live process drives it: resume it.
    Interrupted,
    /// Not finished: waiting for the result of a call handled outside `lsm` (`lsm runs
    /// resume RUN --tool-result ID=FILE`).
    Deferred,
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
pub struct RunRow {
    /// The run.
    pub run_id: String,
    /// Its agent.
    pub agent: String,
    /// Its status now.
    pub status: Status,
    /// When it started.
    pub started_at: String,
    /// Its task or topic.
    pub topic: String,
    /// `completed`, `stopped` or `failed`, once finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    run_dir: String,
    /// The transcript's schema version (1: written before typed run events).
    schema_version: u64,
    /// Whether `lsm runs resume` can continue it now: interrupted, and recorded with a
    /// schema a resume can fold (version 1 runs never are).
    resumable: bool,
}

/// A PostgreSQL store error, as a usage error naming the setting.
pub fn store_error(e: lsm_store_pg::StoreError) -> crate::error::AppError {
    usage(format!("[store] url: {e}"))
}

/// Every run in the PostgreSQL store (queued ones show as `queued`, interrupted ones are
/// those whose driver's lease ran out).
///
/// # Errors
/// The store's.
pub async fn pg_rows(pg: &lsm_store_pg::PgRuns) -> Result<Vec<RunRow>> {
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
pub fn scan(root: &Path) -> Vec<RunRow> {
    let mut rows = Vec::new();
    let Ok(agents) = std::fs::read_dir(root) else {
        return rows;
    };
    for agent in agents.flatten() {
        let Ok(runs) = std::fs::read_dir(agent.path().join("logs")) else {
            continue;
        };
        for run in runs.flatten() {
            if let Some((row, _)) = read_run(&run.path()) {
                rows.push(row);
            }
        }
    }
    rows
}

/// The run in `run_dir`: its row, and its journal's events (none for a version 1 run).
pub fn read_run(run_dir: &Path) -> Option<(RunRow, Vec<EventEnvelope>)> {
    let transcript = run_dir.join("transcript.jsonl");
    if legacy::schema_version(&transcript)? < u64::from(lsm_harness::SCHEMA_VERSION) {
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
            LockState::Stale(_) | LockState::Absent
                if lsm_harness::core::Core::waiting_for(&lsm_harness::RunState::fold(
                    &journal.events,
                ))
                .is_some() =>
            {
                Status::Deferred
            }
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
        resumable: matches!(status, Status::Interrupted | Status::Deferred),
    };
    Some((row, journal.events))
}

/// A run recorded before typed run events: its status from `run_summary.json` or `run_end`;
/// never resumable.
fn legacy_row(run_dir: &Path) -> Option<RunRow> {
    let run = legacy::read(run_dir)?;
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

/// The agents folder: `flag` (under the working folder, and registered as the person's own
/// folder with the redactor), else the configuration's.
///
/// # Errors
/// When the working folder cannot be read or the configuration not loaded.
pub fn agents_folder(cfg: &crate::config::ConfigArgs, flag: Option<&Path>) -> Result<PathBuf> {
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

/// One run in full: the store's row and the run's last journal lines.
#[derive(Debug, serde::Serialize)]
pub struct Shown {
    /// The PostgreSQL store's row of the run (made from its folder in the default store).
    #[serde(flatten)]
    pub row: lsm_store_pg::RunRow,
    /// The last journal lines, oldest first, as they were recorded.
    pub last_events: Vec<Value>,
}

/// The run `run_id` in the PostgreSQL store.
///
/// # Errors
/// A usage error naming the run when there is no such run; the store's errors.
pub async fn shown_from_pg(pg: &lsm_store_pg::PgRuns, run_id: &str) -> Result<Shown> {
    let Some(row) = pg.get(run_id).await.map_err(store_error)? else {
        return Err(usage(format!(
            "no run '{run_id}' in the PostgreSQL store; `lsm runs list` shows the runs"
        )));
    };
    let last = i64::try_from(LAST_EVENTS).unwrap_or(i64::MAX);
    let lines = pg
        .lines_after(run_id, (row.last_seq - last).max(0), last)
        .await
        .map_err(store_error)?;
    // A line that is not JSON (written by something other than lsm) is shown as its text.
    let last_events = lines
        .into_iter()
        .map(|(_, line)| serde_json::from_str(&line).unwrap_or(Value::String(line)))
        .collect();
    Ok(Shown { row, last_events })
}

/// The run `run_id` under `root`, as the PostgreSQL store would keep it.
///
/// # Errors
/// A usage error naming the run when there is no such run.
pub fn shown_from_folder(root: &Path, run_id: &str) -> Result<Shown> {
    let found = super::run_folder(root, run_id).and_then(|dir| {
        let read = read_run(&dir)?;
        Some((dir, read))
    });
    let Some((run_dir, (listed, events))) = found else {
        return Err(usage(format!(
            "no run '{run_id}' under {}; `lsm runs list` shows the runs",
            root.display()
        )));
    };
    let summary: Option<Value> = std::fs::read(run_dir.join("run_summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let finished_at = events
        .iter()
        .rev()
        .find(|e| matches!(e.event, RunEvent::RunFinished { .. }))
        .map(|e| e.ts.clone())
        .or_else(|| {
            let at = summary.as_ref()?.get("finished_at")?.as_str()?;
            Some(at.to_string())
        });
    let lease_owner = match lsm_harness::lock_state(&run_dir) {
        LockState::Held(pid) if listed.finished.is_none() => Some(format!("process {pid}")),
        _ => None,
    };
    let resumed = events
        .iter()
        .filter(|e| matches!(e.event, RunEvent::RunResumed { .. }))
        .count();
    let row = lsm_store_pg::RunRow {
        request: launch(&events),
        status: listed.finished.clone().unwrap_or_else(|| {
            if listed.status == Status::Deferred {
                "deferred".into()
            } else {
                "running".into()
            }
        }),
        created_at: listed.started_at.clone(),
        started_at: Some(listed.started_at),
        finished_at,
        lease_owner,
        lease_until: None,
        lease_expired: listed.status == Status::Interrupted,
        attempts: i32::try_from(resumed + 1).unwrap_or(i32::MAX),
        cancel_requested: false,
        last_seq: events
            .last()
            .map_or(0, |e| i64::try_from(e.seq).unwrap_or(i64::MAX)),
        summary,
        run_id: listed.run_id,
        agent: listed.agent,
        topic: listed.topic,
    };
    let from = events.len().saturating_sub(LAST_EVENTS);
    let last_events = events[from..]
        .iter()
        .filter_map(|e| serde_json::to_value(e).ok())
        .collect();
    Ok(Shown { row, last_events })
}

/// How the run was started, as its `run_started` line recorded it.
fn launch(events: &[EventEnvelope]) -> Value {
    StartedRun::of(events)
        .and_then(|s| s.launch)
        .and_then(|l| serde_json::to_value(l).ok())
        .unwrap_or(Value::Null)
}
