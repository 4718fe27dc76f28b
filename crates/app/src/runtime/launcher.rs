//! [`HarnessLauncher`]: starts each run of the manager through [`crate::run::prepare`] —
//! the one way every run starts — with the manager's channel, stop token and log stream.

use std::path::PathBuf;
use std::sync::Arc;

use lsm_agents::AgentLogSink;
use lsm_harness::EventSink;
use lsm_phase::{RunOutcome, StopReason};

use super::{LaunchContext, RunEnd, RunLauncher, RunStatus};
use crate::config::Config;
use crate::run::{Start, Store, prepare};

/// Runs the catalog's agents as their requests say, under `config`, relative paths against
/// `cwd`; their journals in the run folders' files.
#[derive(Debug, Clone)]
pub struct HarnessLauncher {
    config: Config,
    catalog: lsm_agents::Catalog,
    cwd: PathBuf,
}

impl HarnessLauncher {
    /// A launcher of `catalog`'s agents over this configuration, relative paths resolved
    /// against `cwd`.
    pub fn new(config: Config, catalog: lsm_agents::Catalog, cwd: PathBuf) -> Self {
        HarnessLauncher {
            config,
            catalog,
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
        let start = Start::new(ctx.stop.clone(), crate::notice::to_log())
            .in_store(Store::Files)
            .in_dir(self.cwd.clone())
            .with_channel(Arc::clone(&ctx.channel))
            .with_catalog(self.catalog.clone());
        let records = ctx.clone_record_setter();
        let prepared = match prepare(ctx.request, &self.config, start) {
            Ok(p) => p,
            Err(e) => return Self::failed(format!("{e:#}")),
        };
        let (run_id, agent_name) = (ctx.run_id.clone(), prepared.agent().to_string());
        let prepared = prepared
            .with_event_sink(Arc::clone(&ctx.log) as Arc<dyn EventSink>)
            .with_log_sink(Arc::new(LogStreamAgentLog(Arc::clone(&ctx.log))))
            .on_start(move |harness| {
                records(harness.run_id());
                tracing::info!(run = %run_id, records = %harness.run_id(), agent = %agent_name, "run started");
            });
        let output = match prepared.execute().await {
            Ok(finished) => finished.output,
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
