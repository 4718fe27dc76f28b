//! [`HarnessLauncher`]: runs a built-in agent through the harness, wired like
//! `lsm agent run` but with the manager's channel, stop token and log stream.

use std::path::PathBuf;
use std::sync::Arc;

use lsm_harness::HarnessFactory;
use lsm_phase::StopReason;

use super::{LaunchContext, RunEnd, RunLauncher, RunStatus};
use crate::config::Config;
use crate::interaction_wiring;
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
        let sandbox = match interaction_wiring::sandbox_with_channel(
            &self.config.sandbox,
            lsm_sandbox::builtin::registry(),
            &ctx.channel,
        ) {
            Ok(s) => s,
            Err(e) => return Self::failed(format!("{e:#}")),
        };
        let factory = HarnessFactory::new(
            self.config.agents.harness.clone(),
            provider,
            Arc::new(sandbox),
        )
        .with_stop_token(ctx.stop.clone())
        .with_event_sink(Arc::clone(&ctx.log) as _);
        let identity = spec.identity(&ctx.task, true);
        let mut harness = factory.build(&identity, spec.system_prompt);
        ctx.set_record_id(harness.run_id());
        tracing::info!(run = %ctx.run_id, records = %harness.run_id(), agent = %ctx.agent, "run started");
        interaction_wiring::record_interactions(&ctx.channel, &harness);
        let report = harness.run(&ctx.task).await;
        let status = match (report.result.stop_reason, &report.records_error) {
            (_, Some(_)) | (StopReason::Error, _) => RunStatus::Failed,
            (StopReason::Done, None) => RunStatus::Completed,
            _ => RunStatus::Stopped,
        };
        let final_text = match &report.records_error {
            Some(e) => format!("the run's records could not be written: {e}"),
            None => report.result.final_text,
        };
        RunEnd {
            status,
            outcome: report.summary.run_outcome,
            final_text,
        }
    }
}
