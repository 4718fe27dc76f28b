//! `lsm agent list`, and the agent-layer half of `lsm agent run`: every agent runs through
//! `lsm_agents` (its `AgentCore` asks a factory for the run's harness); the run's summary is
//! read back from the records that harness wrote.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use lsm_agents::{
    AgentContext, AgentLogSink, AgentOutput, AgentSpec, RunOutcome, StopReason, TaskInput,
};
use lsm_harness::{AgentHarness, HarnessFactory, RunSummary};
use lsm_interaction::InteractionChannel;
use lsm_phase::{AgentIdentity, ExecutorFactory, PhaseExecutor};

use crate::agent_run::usage;
use crate::exit;
use crate::secrets;

/// `lsm agent list [--json]`: name, tier, input, description and tools of every agent.
pub fn list(json: bool) -> u8 {
    let ask_user = lsm_sandbox::builtin::registry().contains("ask_user");
    let rows: Vec<(&AgentSpec, Vec<String>)> = lsm_agents::BUILTIN
        .iter()
        .map(|spec| (spec, spec.identity("", ask_user).tool_allowlist))
        .collect();
    if json {
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|(spec, tools)| {
                serde_json::json!({
                    "name": spec.name,
                    "description": spec.description,
                    "tier": spec.tier,
                    "input": spec.input,
                    "tools": tools,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return exit::OK;
    }
    let width = rows
        .iter()
        .map(|(s, _)| s.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "{:<width$}  {:<7}  {:<5}  DESCRIPTION",
        "NAME", "TIER", "INPUT"
    );
    for (spec, tools) in &rows {
        let tier = serde_json::to_value(spec.tier)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        println!(
            "{:<width$}  {:<7}  {:<5}  {}",
            spec.name,
            tier,
            spec.input.as_str(),
            spec.description
        );
        println!("{:<width$}  tools: {}", "", tools.join(", "));
    }
    println!(
        "\nRun one with: lsm agent run <name> --task \"...\" (or --topic \"...\" for topic agents)"
    );
    exit::OK
}

/// What a run of `spec` is about: its `--task` or its `--topic`, whichever it takes. A missing
/// or misplaced argument is a usage error naming the right flag.
pub fn objective(
    spec: &AgentSpec,
    task: Option<&str>,
    topic: Option<&str>,
    max_rounds: Option<u32>,
) -> Result<String> {
    if max_rounds.is_some() && spec.name != lsm_agents::RESEARCH.name {
        return Err(usage(format!(
            "--max-rounds applies to the research agent only, not to '{}'",
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

/// A [`HarnessFactory`] that remembers the run folder of the last harness it built, so the
/// CLI can read the run's summary once the agent is done with it.
/// Called with every harness a [`RecordingFactory`] builds.
type BuildHook = Box<dyn Fn(&AgentHarness) + Send + Sync>;

pub struct RecordingFactory {
    inner: HarnessFactory,
    run_dir: Mutex<Option<PathBuf>>,
    interactions: Option<Arc<InteractionChannel>>,
    on_build: Option<BuildHook>,
}

impl RecordingFactory {
    /// Wrap `inner`.
    pub fn new(inner: HarnessFactory) -> Self {
        RecordingFactory {
            inner,
            run_dir: Mutex::new(None),
            interactions: None,
            on_build: None,
        }
    }

    /// Call `hook` with every harness built, before its first phase.
    pub fn with_on_build(mut self, hook: impl Fn(&AgentHarness) + Send + Sync + 'static) -> Self {
        self.on_build = Some(Box::new(hook));
        self
    }

    /// Record `channel`'s events in the transcript of every harness built.
    pub fn with_interactions(mut self, channel: Option<Arc<InteractionChannel>>) -> Self {
        self.interactions = channel;
        self
    }

    /// The run folder of the last harness built, if any was.
    pub fn run_dir(&self) -> Option<PathBuf> {
        self.run_dir.lock().ok().and_then(|d| d.clone())
    }
}

impl ExecutorFactory for RecordingFactory {
    fn create(&self, agent: &AgentIdentity, system_prompt: &str) -> Box<dyn PhaseExecutor> {
        let harness = self.inner.build(agent, system_prompt);
        if let Some(channel) = &self.interactions {
            crate::interaction_wiring::record_interactions(channel, &harness);
        }
        if let Some(hook) = &self.on_build {
            hook(&harness);
        }
        if let Ok(mut dir) = self.run_dir.lock() {
            *dir = Some(harness.run_dir());
        }
        Box::new(harness)
    }
}

/// Prints an agent's log lines on stderr.
struct StderrAgentLog;

impl AgentLogSink for StderrAgentLog {
    fn line(&self, agent: &str, message: &str) {
        eprintln!("[{agent}] {}", secrets::clean(message));
    }
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
    /// Whether `ask_user` is registered.
    pub ask_user_available: bool,
    /// Tools added to the agent's allowlist (`[agents.extra_tools]`, `--allow-tool`).
    pub extra_tools: Vec<String>,
    /// `--json`: stdout carries only the run summary.
    pub json: bool,
    /// The run's interaction channel, whose events go to the run's transcript.
    pub interactions: Option<Arc<InteractionChannel>>,
}

/// Run `spec` on `objective` through the agent layer, print the result, and return the exit
/// code: 1 when the agent failed or the run's records are missing, otherwise the code of the
/// last phase's stop reason.
pub async fn run(
    spec: &AgentSpec,
    objective: &str,
    factory: HarnessFactory,
    opts: AgentRunOptions,
) -> Result<u8> {
    let recording =
        Arc::new(RecordingFactory::new(factory).with_interactions(opts.interactions.clone()));
    let mut ctx = AgentContext::new(
        Arc::clone(&recording) as Arc<dyn ExecutorFactory>,
        opts.agents_folder.clone(),
    )
    .with_max_iterations(opts.max_iterations)
    .with_ask_user(opts.ask_user_available)
    .with_extra_tools(opts.extra_tools.clone());
    if let Some(n) = opts.max_rounds {
        ctx = ctx.with_max_rounds(n);
    }
    if !opts.json {
        ctx = ctx.with_log_sink(Arc::new(StderrAgentLog));
    }
    let mut agent = lsm_agents::create(spec.name, ctx)
        .with_context(|| format!("agent '{}' is listed but cannot be built", spec.name))?;
    let output = agent.run(objective).await;
    drop(agent);

    if let Some(error) = &output.error {
        eprintln!("error: {}", secrets::clean(error));
    }
    let records = match recording.run_dir() {
        Some(dir) => read_summary(&dir),
        None => Err(anyhow::anyhow!(
            "the run made no phase, so it has no records"
        )),
    };
    let (raw, summary, dir) = match records {
        Ok(found) => found,
        Err(e) => {
            eprintln!(
                "error: the run's records could not be written: {}",
                secrets::clean(&format!("{e:#}"))
            );
            if !opts.json {
                print_artifacts(&output);
            }
            return Ok(exit::ERROR);
        }
    };
    if opts.json {
        // Redacted when written; checked again in case it was written by something else.
        println!("{}", secrets::clean_json_text(raw.trim_end()));
    } else {
        print_human(&output, &summary, &dir);
    }
    Ok(match (output.outcome, output.stop_reason) {
        (RunOutcome::Failed, _) => exit::ERROR,
        (_, reason) => exit::for_stop_reason(reason.unwrap_or(StopReason::Done)),
    })
}

/// `run_summary.json` of the run in `dir`: its text as written, and parsed.
fn read_summary(dir: &Path) -> Result<(String, RunSummary, PathBuf)> {
    let path = dir.join("run_summary.json");
    let raw = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let summary: RunSummary = serde_json::from_str(&raw)
        .with_context(|| format!("{} is not a run summary", path.display()))?;
    Ok((raw, summary, dir.to_path_buf()))
}

fn print_artifacts(output: &AgentOutput) {
    for a in &output.artifacts {
        println!("artifact: {}", a.display());
    }
    if let Some(log) = &output.log_file {
        println!("log: {}", log.display());
    }
}

fn print_human(output: &AgentOutput, s: &RunSummary, dir: &Path) {
    println!();
    if !output.text.is_empty() {
        println!("{}", secrets::clean(&output.text));
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
        println!("artifact: {a}");
    }
    for a in &output.artifacts {
        let shown = a.display().to_string();
        if !s.artifacts_created.contains(&shown) {
            println!("artifact: {shown}");
        }
    }
    if let Some(log) = &output.log_file {
        println!("log: {}", log.display());
    }
    println!("summary: {}", dir.join("run_summary.json").display());
    println!("transcript: {}", dir.join("transcript.jsonl").display());
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
        for spec in lsm_agents::BUILTIN {
            let e = objective(spec, None, None, None).unwrap_err();
            assert!(
                e.downcast_ref::<crate::config::ConfigError>().is_some(),
                "a usage error"
            );
        }
    }
}
