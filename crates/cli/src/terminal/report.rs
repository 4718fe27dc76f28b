//! How a finished agent run is reported: an error (once) on stderr, then what the output
//! format asks for on stdout — the answer and a summary line, the summary as JSON, or the
//! final `result` line of a stream — and the exit code it ends with.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use lsm_agents::{AgentLogSink, AgentOutput};
use lsm_app::protocol::RunSummary;
use lsm_app::run::Finished;
use lsm_app::secrets;

use super::output::OutputFormat;
use super::text::{for_stdout, masked_line, terminal_text};

/// Prints an agent's log lines on stderr.
struct StderrAgentLog;

impl AgentLogSink for StderrAgentLog {
    fn line(&self, agent: &str, message: &str) {
        eprintln!("[{agent}] {}", terminal_text(&secrets::clean(message)));
    }
}

/// The agent's own log lines, on stderr.
pub fn agent_log() -> Arc<dyn AgentLogSink> {
    Arc::new(StderrAgentLog)
}

/// Print a finished run: an error (once) on stderr, then what `mode` asks for on stdout (a
/// stream's `result` line carries `exit_code`).
///
/// # Errors
/// When the summary cannot be serialized.
pub fn report(finished: &Finished, mode: OutputFormat, exit_code: u8) -> Result<()> {
    let output = &finished.output;
    if let Some(error) = &output.error {
        eprintln!("error: {}", terminal_text(&secrets::clean(error)));
    }
    if let Some(e) = &finished.records_problem {
        eprintln!(
            "error: the run's records could not be written: {}",
            terminal_text(&secrets::clean(e))
        );
        if mode == OutputFormat::Text {
            print_artifacts(output);
        }
        return Ok(());
    }
    let (Some(summary), Some(dir)) = (&finished.summary, &finished.run_dir) else {
        return Ok(());
    };
    match mode {
        OutputFormat::Json => super::output::print_json(&lsm_app::run::summary_json(summary)?),
        OutputFormat::StreamJson => super::output::stream_line(
            "result",
            // An envelope like the run's events (`seq` 0: not a journal line).
            serde_json::json!({
                "seq": 0,
                "ts": summary.finished_at,
                "schema_version": summary.schema_version,
                "run_id": summary.run_id,
                "status": summary.status,
                "run_outcome": summary.run_outcome,
                "exit_code": exit_code,
                "final_text": summary.final_text,
                "summary": summary,
            }),
        ),
        OutputFormat::Text => print_human(output, summary, dir),
    }
    Ok(())
}

fn print_artifacts(output: &AgentOutput) {
    for a in &output.artifacts {
        println!("artifact: {}", masked_line(&a.display().to_string()));
    }
    if let Some(log) = &output.log_file {
        println!("log: {}", masked_line(&log.display().to_string()));
    }
}

fn print_human(output: &AgentOutput, s: &RunSummary, dir: &Path) {
    println!();
    if !output.text.is_empty() {
        println!("{}", for_stdout(&secrets::clean(&output.text)));
        println!();
    }
    let cost = s
        .token_usage
        .cost_usd
        .map(|c| format!(", ${c:.4}"))
        .unwrap_or_default();
    println!(
        "run {} — {} ({}), {} LLM call(s), {} of {} tokens{cost}, {} tool call(s)",
        s.run_id,
        s.status,
        s.run_outcome,
        s.token_usage.iterations,
        s.token_usage.tokens_used,
        s.token_usage.max_tokens_budget,
        s.tool_sequence.len()
    );
    // The summary lists the files the tools wrote and the artifacts the agent saved.
    for a in &s.artifacts_created {
        println!("artifact: {}", masked_line(a));
    }
    for a in &output.artifacts {
        let path = a.display().to_string();
        if !s.artifacts_created.contains(&path) {
            println!("artifact: {}", masked_line(&path));
        }
    }
    if let Some(log) = &output.log_file {
        println!("log: {}", masked_line(&log.display().to_string()));
    }
    print_completion(s);
    // Under the project's folder, whose name is not ours either.
    let record = |name: &str| masked_line(&dir.join(name).display().to_string());
    println!("summary: {}", record("run_summary.json"));
    println!("transcript: {}", record("transcript.jsonl"));
}

/// The completion checks' verdict, when the run had any: the contract, the work items, what
/// an accepted stop left unmet.
fn print_completion(s: &RunSummary) {
    if let Some(c) = &s.contract {
        let met = c.coverage.iter().filter(|i| i.met).count();
        let verdict = if c.satisfied {
            "satisfied"
        } else {
            "not satisfied"
        };
        println!(
            "contract: {verdict} ({met} of {} conditions met)",
            c.coverage.len()
        );
        for u in &c.unmet {
            println!("  unmet: {}", masked_line(u));
        }
    }
    if !s.work_items.is_empty() {
        let done = s.work_items.iter().filter(|i| i.is_done()).count();
        println!("work items: {done} of {} done", s.work_items.len());
        for item in s.work_items.iter().filter(|i| !i.is_done()) {
            println!("  open: {}", masked_line(&item.line()));
        }
    }
    if s.contract.is_none() {
        for u in &s.unmet_checks {
            println!("unmet at stop: {}", masked_line(u));
        }
    }
}
