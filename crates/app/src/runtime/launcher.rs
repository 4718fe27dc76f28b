//! [`HarnessLauncher`]: runs an agent of the catalog through [`crate::run::launch_agent`] —
//! the function `lsm agent run` uses — with the manager's channel, stop token and log stream.

use std::path::PathBuf;
use std::sync::Arc;

use lsm_agents::AgentLogSink;
use lsm_harness::EventSink;
use lsm_phase::{RunOutcome, StopReason};

use super::{LaunchContext, RunEnd, RunLauncher, RunStatus};
use crate::config::Config;
use crate::run::{AgentLaunch, launch_agent};
use crate::wiring::{self, run as run_wiring};

/// Runs the catalog's agents with the harness, a provider built for each run from `[llm]` (the
/// agent's tier) and the command-line flags, and a sandbox under `config.sandbox` whose
/// permission asker is the run's channel.
#[derive(Debug, Clone)]
pub struct HarnessLauncher {
    config: Config,
    catalog: lsm_agents::Catalog,
    flags: wiring::ProviderFlags,
    cwd: PathBuf,
}

impl HarnessLauncher {
    /// A launcher of `catalog`'s agents over this configuration and provider flags,
    /// relative paths resolved against `cwd`.
    pub fn new(
        config: Config,
        catalog: lsm_agents::Catalog,
        flags: wiring::ProviderFlags,
        cwd: PathBuf,
    ) -> Self {
        HarnessLauncher {
            config,
            catalog,
            flags,
            cwd,
        }
    }

    fn failed(message: String) -> RunEnd {
        RunEnd {
            status: RunStatus::Failed,
            outcome: "error".into(),
            final_text: message,
        }
    }
}

#[async_trait::async_trait]
impl RunLauncher for HarnessLauncher {
    async fn launch(&self, ctx: LaunchContext) -> RunEnd {
        let Some(definition) = self.catalog.get(&ctx.agent).cloned() else {
            return Self::failed(format!("unknown agent '{}'", ctx.agent));
        };
        let mut config = self.config.clone();
        if let Err(e) = crate::agent_defs::apply_settings(&definition, &mut config) {
            return Self::failed(format!("{e:#}"));
        }
        let spec = &definition.spec;
        let (provider, window) = match crate::agent_defs::resolve_llm(&config, &definition)
            .and_then(|llm| {
                let built =
                    wiring::build_provider(&llm, &self.flags, &self.cwd, &config.source_name())?;
                let window = llm.context_window_for(built.provider.model());
                Ok((built.provider, window))
            }) {
            Ok(built) => built,
            Err(e) => return Self::failed(format!("{e:#}")),
        };
        if config.agents.compaction.context_window.is_none() {
            config.agents.compaction.context_window = window;
        }
        let parts = match run_wiring::build_run(&config, provider, &ctx.channel, ctx.stop.clone()) {
            Ok(p) => p,
            Err(e) => return Self::failed(format!("{e:#}")),
        };
        let extra_tools = parts.expand_allowlist(config.agents.extra_tools_of(&spec.name));
        let records = ctx.clone_record_setter();
        let (run_id, agent_name) = (ctx.run_id.clone(), ctx.agent.clone());
        let mut factory = parts
            .factory
            .with_worker_spawner(Arc::new(crate::run::WorkerRuns {
                pg: None,
                config: config.clone(),
                flags: self.flags.clone(),
                cwd: self.cwd.clone(),
                auto_approve: false,
                catalog: self.catalog.clone(),
            }));
        if let Some(contract) = config.agents.contract_of(&spec.name) {
            factory = factory.with_contract(contract);
        }
        let factory = factory
            .with_event_sink(Arc::clone(&ctx.log) as Arc<dyn EventSink>)
            .with_on_build(move |harness| {
                records(harness.run_id());
                tracing::info!(run = %run_id, records = %harness.run_id(), agent = %agent_name, "run started");
            });
        let max_rounds = definition.settings.max_rounds;
        let launched = launch_agent(AgentLaunch {
            definition,
            objective: ctx.task.clone(),
            factory,
            agents_folder: config.agents.agents_folder.clone(),
            max_iterations: config.agents.max_iterations,
            max_rounds,
            max_workers: config.conductor.max_workers,
            ask_user_available: parts.ask_user_available,
            extra_tools,
            log_sink: Some(Arc::new(LogStreamAgentLog(Arc::clone(&ctx.log)))),
            interactions: Some(Arc::clone(&ctx.channel)),
        })
        .await;
        let output = match launched {
            Ok(l) => l.output,
            Err(e) => return Self::failed(format!("{e:#}")),
        };
        let status = match output.outcome {
            RunOutcome::Completed => RunStatus::Completed,
            RunOutcome::Failed | RunOutcome::Stopped(StopReason::Error) => RunStatus::Failed,
            RunOutcome::Stopped(_) => RunStatus::Stopped,
        };
        RunEnd {
            status,
            outcome: output
                .stop_reason
                .map_or("error", StopReason::as_str)
                .to_string(),
            final_text: output.error.unwrap_or(output.text),
        }
    }
}

/// An agent's own log lines, into the run's live log.
struct LogStreamAgentLog(Arc<super::LogStream>);

impl AgentLogSink for LogStreamAgentLog {
    fn line(&self, agent: &str, message: &str) {
        self.0.push("agent_log", format!("[{agent}] {message}"));
    }
}
