//! `lsm runs show <run_id> [--json]`: one run as the PostgreSQL store keeps it (status,
//! agent, task, times, lease, summary) and its last journal lines, from either store. A run
//! of the default store is read from its folder into the same row, so both stores print the
//! same fields under the same names.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use lsm_harness::{EventEnvelope, LockState, RunEvent};
use lsm_store_pg::RunRow;
use serde_json::Value;

use super::Status;
use crate::exit;
use crate::text::masked_line;

/// How many of a run's last journal lines are shown.
const LAST_EVENTS: usize = 10;

/// `lsm runs show <run_id>`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The run (see `lsm runs list`).
    run_id: String,
    /// Root of the agents' workspaces (default: [agents] agents_folder).
    #[arg(long, value_name = "DIR")]
    agents_folder: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// A run as `lsm runs show` prints it: the store's row and the run's last journal lines.
#[derive(Debug, serde::Serialize)]
struct Shown {
    #[serde(flatten)]
    row: RunRow,
    /// The last journal lines, oldest first, as they were recorded.
    last_events: Vec<Value>,
}

/// `lsm runs show`: from PostgreSQL when `[store] url` is set, else from the run's folder.
///
/// # Errors
/// A usage error naming the run when there is no such run; the store's errors.
pub async fn show(cfg: &crate::config::ConfigArgs, args: ShowArgs) -> Result<u8> {
    let shown = match crate::run_store::pg_runs(&cfg.load()?)? {
        Some(pg) => from_pg(&pg, &args.run_id).await?,
        None => {
            let root = super::agents_folder(cfg, args.agents_folder.as_deref())?;
            from_folder(&root, &args.run_id)?
        }
    };
    if args.json {
        let text = serde_json::to_string_pretty(&shown)?;
        crate::output::print_json(&crate::secrets::clean_json_text(&text));
    } else {
        print_text(&shown);
    }
    Ok(exit::OK)
}

async fn from_pg(pg: &lsm_store_pg::PgRuns, run_id: &str) -> Result<Shown> {
    let Some(row) = pg.get(run_id).await.map_err(super::store_error)? else {
        return Err(exit::usage(format!(
            "no run '{run_id}' in the PostgreSQL store; `lsm runs list` shows the runs"
        )));
    };
    let last = i64::try_from(LAST_EVENTS).unwrap_or(i64::MAX);
    let lines = pg
        .lines_after(run_id, (row.last_seq - last).max(0), last)
        .await
        .map_err(super::store_error)?;
    // A line that is not JSON (written by something other than lsm) is shown as its text.
    let last_events = lines
        .into_iter()
        .map(|(_, line)| serde_json::from_str(&line).unwrap_or(Value::String(line)))
        .collect();
    Ok(Shown { row, last_events })
}

/// The run `run_id` under `root`, as the PostgreSQL store would keep it.
fn from_folder(root: &Path, run_id: &str) -> Result<Shown> {
    let found = crate::run_store::run_folder(root, run_id).and_then(|dir| {
        let read = super::read_run(&dir)?;
        Some((dir, read))
    });
    let Some((run_dir, (listed, events))) = found else {
        return Err(exit::usage(format!(
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
    let row = RunRow {
        request: launch(&events),
        status: listed.finished.clone().unwrap_or_else(|| "running".into()),
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
    lsm_harness::StartedRun::of(events)
        .and_then(|s| s.launch)
        .and_then(|l| serde_json::to_value(l).ok())
        .unwrap_or(Value::Null)
}

fn print_text(shown: &Shown) {
    let r = &shown.row;
    println!("run {}", masked_line(&r.run_id));
    let status = if r.status == "running" && r.lease_expired {
        "interrupted (no live process drives it; `lsm runs resume` continues it)".to_string()
    } else {
        masked_line(&r.status)
    };
    println!("status: {status}");
    println!("agent: {}", masked_line(&r.agent));
    println!("task: {}", masked_line(&r.topic));
    println!(
        "started: {}",
        masked_line(r.started_at.as_deref().unwrap_or(&r.created_at))
    );
    if let Some(at) = &r.finished_at {
        println!("finished: {}", masked_line(at));
    }
    if let Some(owner) = &r.lease_owner {
        let until = r
            .lease_until
            .as_ref()
            .map(|u| format!(" (lease until {u})"))
            .unwrap_or_default();
        println!("driven by: {}", masked_line(&format!("{owner}{until}")));
    }
    if r.attempts > 1 {
        println!("attempts: {}", r.attempts);
    }
    if r.cancel_requested {
        println!("cancel requested");
    }
    match &r.summary {
        Some(summary) => print_summary(summary),
        None => println!("usage: not known before the run ends"),
    }
    println!("last events:");
    for event in &shown.last_events {
        println!("  {}", event_line(event));
    }
}

/// Usage, tools and artifacts from a run summary.
fn print_summary(summary: &Value) {
    let usage = &summary["token_usage"];
    let cost = usage["cost_usd"]
        .as_f64()
        .map(|c| format!(", ${c:.4}"))
        .unwrap_or_default();
    println!(
        "usage: {} LLM call(s), {} of {} tokens{cost}",
        usage["iterations"].as_u64().unwrap_or(0),
        usage["tokens_used"].as_u64().unwrap_or(0),
        usage["max_tokens_budget"].as_u64().unwrap_or(0)
    );
    let strings = |key: &str| -> Vec<String> {
        summary[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(masked_line)
                    .collect()
            })
            .unwrap_or_default()
    };
    let tools = strings("tool_sequence");
    if tools.is_empty() {
        println!("tools: none");
    } else {
        println!("tools: {}", tools.join(", "));
    }
    for artifact in strings("artifacts_created") {
        println!("artifact: {artifact}");
    }
}

/// One journal line on one line of text: its number, its event and its other fields,
/// clipped.
fn event_line(event: &Value) -> String {
    let Some(fields) = event.as_object() else {
        return masked_line(&crate::text::clip(&event.to_string(), 120));
    };
    let mut rest = fields.clone();
    for key in ["seq", "ts", "run_id", "schema_version", "event"] {
        rest.remove(key);
    }
    let mut line = format!(
        "{:>4}  {}  ",
        fields.get("seq").and_then(Value::as_u64).unwrap_or(0),
        fields.get("event").and_then(Value::as_str).unwrap_or("?")
    );
    crate::text::clip_json_into(&mut line, &Value::Object(rest), 100);
    masked_line(&line)
}
