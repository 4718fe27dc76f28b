//! The agent-layer half of `lsm agent run`: every agent runs through
//! `lsm_agents` (its `AgentCore` asks a factory for the run's harness) via
//! [`crate::launch::launch_agent`]; the run's summary comes back in memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use lsm_agents::{AgentDefinition, AgentLogSink, AgentOutput, RunOutcome, StopReason, TaskInput};
use lsm_harness::{HarnessFactory, RunSummary};
use lsm_interaction::InteractionChannel;

use crate::exit;
use crate::exit::usage;
use crate::launch::{AgentLaunch, launch_agent};
use crate::secrets;
use crate::text::{for_stdout, masked_line, terminal_text};

/// What a run of `definition` is about: its `--task` or its `--topic`, whichever it takes. A
/// missing or misplaced argument is a usage error naming the right flag.
pub fn objective(
    definition: &AgentDefinition,
    task: Option<&str>,
    topic: Option<&str>,
    max_rounds: Option<u32>,
) -> Result<String> {
    let spec = &definition.spec;
    if max_rounds.is_some() && !definition.repeats() {
        return Err(usage(format!(
            "--max-rounds applies to agents with a phase that repeats (such as research), not to '{}'",
            spec.name
        )));
    }
    let (wanted, given, other, other_flag) = match spec.input {
        TaskInput::Task => ("task", task, topic, "--topic"),
        TaskInput::Topic => ("topic", topic, task, "--task"),
    };
    if other.is_some() {
        return Err(usage(format!(
            "agent '{}' takes --{wanted}, not {other_flag}",
            spec.name
        )));
    }
    match given.map(str::trim).filter(|t| !t.is_empty()) {
        Some(text) => Ok(text.to_string()),
        None => Err(usage(format!(
            "agent '{}' needs a {wanted}: pass --{wanted} \"...\"",
            spec.name
        ))),
    }
}

/// Prints an agent's log lines on stderr.
struct StderrAgentLog;

impl AgentLogSink for StderrAgentLog {
    fn line(&self, agent: &str, message: &str) {
        eprintln!("[{agent}] {}", terminal_text(&secrets::clean(message)));
    }
}

/// Sends an agent's log lines to the log (`-v`), for runs whose caller prints nothing.
struct TracingAgentLog;

impl AgentLogSink for TracingAgentLog {
    fn line(&self, agent: &str, message: &str) {
        tracing::info!("[{agent}] {}", secrets::clean(message));
    }
}

/// What `lsm agent run` prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Progress on stderr, the answer and a summary line on stdout.
    Human,
    /// `--json`: only the final summary, as JSON.
    Json,
    /// `--output-format stream-json`: only the run's events, one JSON line each, as they
    /// happen.
    StreamJson,
    /// Nothing at all: the caller reports the result itself (the MCP `run_agent` tool); the
    /// agent's log lines go to the log.
    Silent,
}

/// Settings of one `lsm agent run` that the agent layer needs.
#[derive(Debug, Clone)]
pub struct AgentRunOptions {
    /// Root of the agents' workspaces.
    pub agents_folder: PathBuf,
    /// Iteration limit of long phases.
    pub max_iterations: u32,
    /// Research refinement rounds (`None`: the default).
    pub max_rounds: Option<u32>,
    /// Worker runs a delegating agent (the conductor) runs at once.
    pub max_workers: usize,
    /// Whether `ask_user` is registered.
    pub ask_user_available: bool,
    /// Tools added to the agent's allowlist (`[agents.extra_tools]`, `--allow-tool`).
    pub extra_tools: Vec<String>,
    /// What stdout carries.
    pub output: Output,
    /// The run's interaction channel, whose events go to the run's transcript.
    pub interactions: Option<Arc<InteractionChannel>>,
}

/// How a run ended, as the command reports it.
pub struct Finished {
    /// What the agent returned.
    pub output: AgentOutput,
    /// The run's summary, its `final_text` the agent's answer (for multi-phase agents, not
    /// the last phase's text); `None` when the run has no records.
    pub summary: Option<RunSummary>,
    /// The run's log folder.
    pub run_dir: Option<PathBuf>,
    /// Why the run's records are missing or incomplete, if they are.
    pub records_problem: Option<String>,
    /// The exit code: 1 when the agent failed or the records are missing, otherwise the code
    /// of the last phase's stop reason.
    pub code: u8,
}

/// Run `definition` on `objective` through the agent layer ([`crate::launch::launch_agent`]).
///
/// # Errors
/// When the agent cannot be built.
pub async fn execute(
    definition: AgentDefinition,
    objective: &str,
    factory: HarnessFactory,
    opts: AgentRunOptions,
) -> Result<Finished> {
    let log_sink: Arc<dyn AgentLogSink> = match opts.output {
        Output::Silent => Arc::new(TracingAgentLog),
        _ => Arc::new(StderrAgentLog),
    };
    let launched = launch_agent(AgentLaunch {
        definition,
        objective: objective.to_string(),
        factory,
        agents_folder: opts.agents_folder.clone(),
        max_iterations: opts.max_iterations,
        max_rounds: opts.max_rounds,
        max_workers: opts.max_workers,
        ask_user_available: opts.ask_user_available,
        extra_tools: opts.extra_tools.clone(),
        log_sink: Some(log_sink),
        interactions: opts.interactions.clone(),
    })
    .await?;
    let output = launched.output;
    let records_problem = match (&launched.summary, launched.records_error) {
        (None, _) => Some("the run made no phase, so it has no records".to_string()),
        (Some(_), Some(e)) => Some(e),
        (Some(_), None) => None,
    };
    let summary = launched.summary.map(|mut summary| {
        if !output.text.is_empty() {
            summary.final_text.clone_from(&output.text);
        }
        summary
    });
    let code = match (&records_problem, output.outcome, output.stop_reason) {
        (Some(_), _, _) | (None, RunOutcome::Failed, _) => exit::ERROR,
        (None, _, reason) => exit::for_stop_reason(reason.unwrap_or(StopReason::Done)),
    };
    Ok(Finished {
        output,
        summary,
        run_dir: launched.run_dir,
        records_problem,
        code,
    })
}

/// Run `definition` on `objective` through the agent layer, print the result as `opts.output`
/// says, and return the exit code (see [`Finished::code`]).
///
/// # Errors
/// When the agent cannot be built or the summary cannot be serialized.
pub async fn run(
    definition: AgentDefinition,
    objective: &str,
    factory: HarnessFactory,
    opts: AgentRunOptions,
) -> Result<u8> {
    let output_mode = opts.output;
    let finished = execute(definition, objective, factory, opts).await?;
    report(&finished, output_mode)?;
    Ok(finished.code)
}

/// Print a finished run: an error (once) on stderr, then what `mode` asks for on stdout.
///
/// # Errors
/// When the summary cannot be serialized.
pub fn report(finished: &Finished, mode: Output) -> Result<()> {
    let output = &finished.output;
    if let Some(error) = &output.error {
        eprintln!("error: {}", terminal_text(&secrets::clean(error)));
    }
    if let Some(e) = &finished.records_problem {
        eprintln!(
            "error: the run's records could not be written: {}",
            terminal_text(&secrets::clean(e))
        );
        if mode == Output::Human {
            print_artifacts(output);
        }
        return Ok(());
    }
    let (Some(summary), Some(dir)) = (&finished.summary, &finished.run_dir) else {
        return Ok(());
    };
    match mode {
        Output::Json => crate::output::print_json(&summary_json(summary)?),
        Output::StreamJson => crate::output::stream_line(
            "result",
            // An envelope like the run's events (`seq` 0: not a journal line).
            serde_json::json!({
                "seq": 0,
                "ts": summary.finished_at,
                "schema_version": summary.schema_version,
                "run_id": summary.run_id,
                "status": summary.status,
                "run_outcome": summary.run_outcome,
                "exit_code": finished.code,
                "final_text": summary.final_text,
                "summary": summary,
            }),
        ),
        Output::Silent => {}
        Output::Human => print_human(output, summary, dir),
    }
    Ok(())
}

/// The run summary as the final JSON document of `--output-format json` (and of the MCP
/// `run_agent` tool): pretty-printed, secrets redacted value by value.
///
/// # Errors
/// When the summary cannot be serialized.
pub fn summary_json(summary: &RunSummary) -> Result<String> {
    let text = serde_json::to_string_pretty(summary).context("cannot serialize the run summary")?;
    Ok(secrets::clean_json_text(&text).into_owned())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objective_takes_the_flag_each_agent_needs_and_names_it_when_missing() {
        let general = lsm_agents::find("general").unwrap();
        let research = lsm_agents::find("research").unwrap();
        assert_eq!(
            objective(general, Some(" do it "), None, None).unwrap(),
            "do it"
        );
        assert_eq!(
            objective(research, None, Some("soil"), Some(1)).unwrap(),
            "soil"
        );
        let e = objective(general, None, None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--task"), "{e}");
        let e = objective(research, None, Some("  "), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs a topic: pass --topic"), "{e}");
        let e = objective(research, Some("x"), None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes --topic, not --task"), "{e}");
        let e = objective(general, Some("x"), None, Some(2))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--max-rounds"), "{e}");
        for def in lsm_agents::definition::builtin() {
            let e = objective(def, None, None, None).unwrap_err();
            assert!(
                e.downcast_ref::<crate::exit::ConfigError>().is_some(),
                "a usage error"
            );
        }
    }
}
