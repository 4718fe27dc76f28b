//! `lsm runs show <run_id> [--json]`: one run as the PostgreSQL store keeps it (status,
//! agent, task, times, lease, summary) and its last journal lines, from either store. A run
//! of the default store is read from its folder into the same row, so both stores print the
//! same fields under the same names.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use lsm_app::store::list::{self, Shown};
use serde_json::Value;

use crate::exit;
use crate::terminal::text::{clip, clip_json_into, masked_line};

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

/// `lsm runs show`: from PostgreSQL when `[store] url` is set, else from the run's folder.
///
/// # Errors
/// A usage error naming the run when there is no such run; the store's errors.
pub async fn show(cfg: &lsm_app::config::ConfigArgs, args: ShowArgs) -> Result<u8> {
    let shown = match lsm_app::store::pg_runs(&cfg.load()?)? {
        Some(pg) => list::shown_from_pg(&pg, &args.run_id).await?,
        None => {
            let root = list::agents_folder(cfg, args.agents_folder.as_deref())?;
            list::shown_from_folder(&root, &args.run_id)?
        }
    };
    if args.json {
        let text = serde_json::to_string_pretty(&shown)?;
        crate::terminal::output::print_json(&lsm_app::secrets::clean_json_text(&text));
    } else {
        print_text(&shown);
    }
    Ok(exit::OK)
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
    if let Some(call) = r
        .summary
        .as_ref()
        .and_then(|s| s.get("deferred_call"))
        .filter(|c| c.is_object())
    {
        let id = call["call_id"].as_str().unwrap_or_default();
        println!(
            "waiting for: call {} of {} with {} (handled outside lsm; `lsm runs resume {} --tool-result {}=FILE` gives its result)",
            masked_line(id),
            masked_line(call["tool"].as_str().unwrap_or_default()),
            masked_line(&call["arguments"].to_string()),
            masked_line(&r.run_id),
            masked_line(id),
        );
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
        return masked_line(&clip(&event.to_string(), 120));
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
    clip_json_into(&mut line, &Value::Object(rest), 100);
    masked_line(&line)
}
