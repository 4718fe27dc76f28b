//! Running a prepared run through the agent layer ([`execute`], reached only through
//! `PreparedRun::execute`): the agent is built on an [`AgentContext`] over the run's harness
//! factory, runs, and its summary comes back in memory through a [`RunHandle`].

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Context, Result};
use lsm_agents::{AgentContext, AgentDefinition, AgentLogSink, AgentOutput, TaskInput};
use lsm_harness::{HarnessFactory, RunHandle, RunSummary};
use lsm_interaction::InteractionChannel;
use lsm_phase::ExecutorFactory;

use crate::error::usage;

/// Everything one agent run is made of.
pub(super) struct AgentLaunch {
    /// The agent: a built-in, or a definition file's.
    pub(super) definition: AgentDefinition,
    /// Its task or topic.
    pub(super) objective: String,
    /// The run's harness factory (a new run, or one resuming an interrupted run).
    pub(super) factory: HarnessFactory,
    /// Root of the agents' workspaces.
    pub(super) agents_folder: PathBuf,
    /// Iteration limit of long phases.
    pub(super) max_iterations: u32,
    /// Research refinement rounds (`None`: the default).
    pub(super) max_rounds: Option<u32>,
    /// Worker runs a delegating agent runs at once.
    pub(super) max_workers: usize,
    /// Whether `ask_user` is registered.
    pub(super) ask_user_available: bool,
    /// Tools added to the agent's allowlist.
    pub(super) extra_tools: Vec<String>,
    /// Where the agent's own log lines go.
    pub(super) log_sink: Option<Arc<dyn AgentLogSink>>,
    /// The run's interaction channel, whose events go to the run's transcript.
    pub(super) interactions: Option<Arc<InteractionChannel>>,
}

/// How a run ended: the agent's output and the harness's summary.
struct Launched {
    /// What the agent returned.
    output: AgentOutput,
    /// The run's summary, in memory (`None` when the run made no phase).
    pub(super) summary: Option<RunSummary>,
    /// The run's log folder (`None` when the run made no phase).
    pub(super) run_dir: Option<PathBuf>,
    /// Why the records could not be written, if they could not.
    pub(super) records_error: Option<String>,
}

/// Run `launch` to its end.
///
/// # Errors
/// When the agent is listed but cannot be built.
async fn launch_agent(launch: AgentLaunch) -> Result<Launched> {
    let handle = RunHandle::new();
    let mut factory = launch.factory.with_run_handle(handle.clone());
    if let Some(channel) = launch.interactions {
        factory = factory.with_on_build(move |harness| {
            crate::wiring::interaction::record_interactions(&channel, harness);
        });
    }
    let mut ctx = AgentContext::new(
        Arc::new(factory) as Arc<dyn ExecutorFactory>,
        launch.agents_folder,
    )
    .with_max_iterations(launch.max_iterations)
    .with_max_workers(launch.max_workers)
    .with_ask_user(launch.ask_user_available)
    .with_extra_tools(launch.extra_tools);
    if let Some(n) = launch.max_rounds {
        ctx = ctx.with_max_rounds(n);
    }
    if let Some(sink) = launch.log_sink {
        ctx = ctx.with_log_sink(sink);
    }
    let name = launch.definition.name().to_string();
    let mut agent = lsm_agents::Catalog::agent_of(launch.definition, ctx)
        .ok_or_else(|| crate::error::AppError::AgentUnbuildable { name: name.clone() })?;
    let output = agent.run(&launch.objective).await;
    // The executor is finished by `run`; dropping the agent drops what is left of it.
    drop(agent);
    Ok(Launched {
        output,
        summary: handle.summary(),
        run_dir: handle.run_dir(),
        records_error: handle.records_error(),
    })
}

/// What a run of `definition` is about: its `--task` or its `--topic`, whichever it takes. A
/// missing or misplaced argument is a usage error naming the right flag.
///
/// # Errors
/// A [`crate::error::ConfigError`] naming the flag to pass.
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

/// Sends an agent's log lines to the log (`-v`): for runs whose front end shows nothing of
/// them (a worker's, `run_agent`'s).
pub struct TracingAgentLog;

impl AgentLogSink for TracingAgentLog {
    fn line(&self, agent: &str, message: &str) {
        tracing::info!("[{agent}] {}", crate::secrets::clean(message));
    }
}

/// How a run ended, as a front end reports it.
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
}

/// Run `launch` through the agent layer ([`launch_agent`]) and say how it ended.
///
/// # Errors
/// When the agent cannot be built.
pub(super) async fn execute(launch: AgentLaunch) -> Result<Finished> {
    let launched = launch_agent(launch).await?;
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
    Ok(Finished {
        output,
        summary,
        run_dir: launched.run_dir,
        records_problem,
    })
}

/// The run summary as the final JSON document of `--output-format json` (and of the MCP
/// `run_agent` tool): pretty-printed, secrets redacted value by value.
///
/// # Errors
/// When the summary cannot be serialized.
pub fn summary_json(summary: &RunSummary) -> Result<String> {
    let text = serde_json::to_string_pretty(summary).context("cannot serialize the run summary")?;
    Ok(crate::secrets::clean_json_text(&text).into_owned())
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
            assert!(crate::error::is_usage(&e), "a usage error");
        }
    }
}
