//! Wiring a run's interaction channel: the sandbox asks it, `ask_user` posts on it, and its
//! events land in the run's transcript.

use std::sync::Arc;

use crate::error::Result;
use lsm_harness::{AgentHarness, RecordHandle};
use lsm_interaction::{
    AskUserTool, InteractionChannel, InteractionConfig, InteractionEvent, InteractionObserver,
};
use lsm_sandbox::{Sandbox, SandboxConfig, ToolRegistry};

use crate::error::usage;

/// A fresh channel for one run.
pub fn run_channel(config: &InteractionConfig) -> Result<Arc<InteractionChannel>> {
    InteractionChannel::new(config)
        .map(Arc::new)
        .map_err(|e| usage(e.to_string()))
}

/// The sandbox of one run: `registry` plus `ask_user`, with `channel` deciding every call
/// that needs a person.
pub fn sandbox_with_channel(
    config: &SandboxConfig,
    registry: ToolRegistry,
    channel: &Arc<InteractionChannel>,
) -> Result<Sandbox, lsm_sandbox::SandboxConfigError> {
    let registry = registry.with(Arc::new(AskUserTool::new(Arc::clone(channel))));
    Sandbox::new(config.clone(), registry, Some(Arc::clone(channel) as _))
}

/// Record every event of `channel` in `harness`'s transcript (and its event sink).
pub fn record_interactions(channel: &InteractionChannel, harness: &AgentHarness) {
    channel.set_observer(Arc::new(TranscriptObserver(harness.record_handle())));
}

/// Writes interaction events to a run's transcript.
struct TranscriptObserver(RecordHandle);

impl InteractionObserver for TranscriptObserver {
    fn on_event(&self, event: &InteractionEvent) {
        if let Err(e) = self.0.record(event.name(), event.fields()) {
            // The loop's own next record hits the same failure and ends the run as an error.
            tracing::warn!("cannot record {}: {e}", event.name());
        }
    }
}
