//! Shared set-up for the harness benchmarks: a sandbox with the no-op tool and a scripted
//! harness.

use std::path::Path;
use std::sync::Arc;

use lsm_harness::{AgentHarness, HarnessConfig, JournalFsync};
use lsm_phase::AgentIdentity;
use lsm_providers::{Provider, ScriptedProvider, ScriptedResponse};
use lsm_sandbox::Sandbox;
use serde_json::json;

/// A sandbox holding only the `noop` tool, with a rate limit no benchmark reaches.
pub fn sandbox(dir: &Path) -> Arc<Sandbox> {
    match lsm_test_support::noop_sandbox(dir) {
        Ok(s) => s,
        Err(e) => panic!("bench sandbox: {e}"),
    }
}

/// A script of `n` responses, each calling `noop` once.
pub fn noop_script(n: usize) -> ScriptedProvider {
    ScriptedProvider::new(
        (0..n)
            .map(|i| ScriptedResponse::tool("noop", json!({"n": i})).with_usage(100, 10))
            .collect(),
    )
    .without_recording()
}

/// A harness over `provider` and `sandbox`, writing records under `dir` when `records`.
#[allow(dead_code)]
pub fn harness(
    dir: &Path,
    provider: Arc<dyn Provider>,
    sandbox: Arc<Sandbox>,
    records: bool,
) -> AgentHarness {
    harness_with_fsync(dir, provider, sandbox, records, JournalFsync::default())
}

/// [`harness`] with the journal flushed to the disk as `fsync` says.
#[allow(dead_code)]
pub fn harness_with_fsync(
    dir: &Path,
    provider: Arc<dyn Provider>,
    sandbox: Arc<Sandbox>,
    records: bool,
    fsync: JournalFsync,
) -> AgentHarness {
    AgentHarness::new(
        AgentIdentity {
            name: "bench".into(),
            tool_allowlist: vec!["noop".into()],
            tier: Default::default(),
            topic: "benchmark".into(),
        },
        "You are a benchmark.",
        HarnessConfig {
            agents_folder: dir.join("Agents"),
            max_tokens_budget: u64::MAX,
            write_records: records,
            journal_fsync: fsync,
            // A bounded history, so that the figure is the loop's cost per iteration and not
            // the length of a phase of as many iterations as the measurement needs.
            context_window_strategy: lsm_harness::ContextStrategy::Fresh,
            ..HarnessConfig::default()
        },
        provider,
        sandbox,
    )
}
