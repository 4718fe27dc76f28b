//! The one function every agent run goes through — `lsm agent run`, `lsm runs resume` and
//! the runtime manager (`lsm tui`): the agent is built on an [`AgentContext`] over the run's
//! harness factory, runs, and its summary comes back in memory through a [`RunHandle`].

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use lsm_agents::{AgentContext, AgentDefinition, AgentLogSink, AgentOutput};
use lsm_harness::{HarnessFactory, RunHandle, RunSummary};
use lsm_interaction::InteractionChannel;
use lsm_phase::ExecutorFactory;

/// Everything one agent run is made of.
pub struct AgentLaunch {
    /// The agent: a built-in, or a definition file's.
    pub definition: AgentDefinition,
    /// Its task or topic.
    pub objective: String,
    /// The run's harness factory (a new run, or one resuming an interrupted run).
    pub factory: HarnessFactory,
    /// Root of the agents' workspaces.
    pub agents_folder: PathBuf,
    /// Iteration limit of long phases.
    pub max_iterations: u32,
    /// Research refinement rounds (`None`: the default).
    pub max_rounds: Option<u32>,
    /// Worker runs a delegating agent runs at once.
    pub max_workers: usize,
    /// Whether `ask_user` is registered.
    pub ask_user_available: bool,
    /// Tools added to the agent's allowlist.
    pub extra_tools: Vec<String>,
    /// Where the agent's own log lines go.
    pub log_sink: Option<Arc<dyn AgentLogSink>>,
    /// The run's interaction channel, whose events go to the run's transcript.
    pub interactions: Option<Arc<InteractionChannel>>,
}

/// How a run ended: the agent's output and the harness's summary.
pub struct Launched {
    /// What the agent returned.
    pub output: AgentOutput,
    /// The run's summary, in memory (`None` when the run made no phase).
    pub summary: Option<RunSummary>,
    /// The run's log folder (`None` when the run made no phase).
    pub run_dir: Option<PathBuf>,
    /// Why the records could not be written, if they could not.
    pub records_error: Option<String>,
}

/// Run `launch` to its end.
///
/// # Errors
/// When the agent is listed but cannot be built.
pub async fn launch_agent(launch: AgentLaunch) -> Result<Launched> {
    let handle = RunHandle::new();
    let mut factory = launch.factory.with_run_handle(handle.clone());
    if let Some(channel) = launch.interactions {
        factory = factory.with_on_build(move |harness| {
            crate::interaction_wiring::record_interactions(&channel, harness);
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
        .with_context(|| format!("agent '{name}' is listed but cannot be built"))?;
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
