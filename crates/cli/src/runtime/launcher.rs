//! [`HarnessLauncher`]: runs a built-in agent through the agent layer on the harness, wired
//! like `lsm agent run` but with the manager's channel, stop token and log stream.

use std::path::PathBuf;
use std::sync::Arc;

use lsm_agents::{AgentContext, AgentLogSink};
use lsm_harness::EventSink;
use lsm_phase::{ExecutorFactory, RunOutcome, StopReason};

use super::{LaunchContext, RunEnd, RunLauncher, RunStatus};
use crate::agents_cmd::RecordingFactory;
use crate::config::Config;
use crate::run_wiring;
use crate::wiring;

/// Runs built-in agents with the harness, a provider built for each run from `[llm]` (the
/// agent's tier) and the command-line flags, and a sandbox under `config.sandbox` whose
/// permission asker is the run's channel.
#[derive(Debug, Clone)]
pub struct HarnessLauncher {
    config: Config,
    flags: wiring::ProviderFlags,
    cwd: PathBuf,
}

impl HarnessLauncher {
    /// A launcher over this configuration and provider flags, relative paths resolved
    /// against `cwd`.
    pub fn new(config: Config, flags: wiring::ProviderFlags, cwd: PathBuf) -> Self {
        HarnessLauncher { config, flags, cwd }
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
        let Some(spec) = lsm_agents::find(&ctx.agent) else {
            return Self::failed(format!("unknown agent '{}'", ctx.agent));
        };
        let provider = match self.config.llm.resolve(spec.tier).and_then(|llm| {
            wiring::build_provider(&llm, &self.flags, &self.cwd, &self.config.source_name())
        }) {
            Ok(built) => built.provider,
            Err(e) => return Self::failed(format!("{e:#}")),
        };
        let parts =
            match run_wiring::build_run(&self.config, provider, &ctx.channel, ctx.stop.clone()) {
                Ok(p) => p,
                Err(e) => return Self::failed(format!("{e:#}")),
            };
        let extra_tools = parts.expand_allowlist(self.config.agents.extra_tools_of(spec.name));
        let factory = parts
            .factory
            .with_event_sink(Arc::clone(&ctx.log) as Arc<dyn EventSink>);
        let records = ctx.clone_record_setter();
        let (run_id, agent_name) = (ctx.run_id.clone(), ctx.agent.clone());
        let recording = Arc::new(
            RecordingFactory::new(factory)
                .with_interactions(Some(Arc::clone(&ctx.channel)))
                .with_on_build(move |harness| {
                    records(harness.run_id());
                    tracing::info!(run = %run_id, records = %harness.run_id(), agent = %agent_name, "run started");
                }),
        );
        let agent_ctx = AgentContext::new(
            recording as Arc<dyn ExecutorFactory>,
            self.config.agents.agents_folder.clone(),
        )
        .with_max_iterations(self.config.agents.max_iterations)
        .with_ask_user(parts.ask_user_available)
        .with_extra_tools(extra_tools)
        .with_log_sink(Arc::new(LogStreamAgentLog(Arc::clone(&ctx.log))));
        let Some(mut agent) = lsm_agents::create(spec.name, agent_ctx) else {
            return Self::failed(format!(
                "agent '{}' is listed but cannot be built",
                spec.name
            ));
        };
        let output = agent.run(&ctx.task).await;
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
