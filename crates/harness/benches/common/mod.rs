//! Shared set-up for the harness benchmarks: a trivial tool and a scripted harness.

use std::path::Path;
use std::sync::Arc;

use lsm_harness::{AgentHarness, HarnessConfig, JournalFsync};
use lsm_phase::AgentIdentity;
use lsm_providers::{Provider, ScriptedProvider, ScriptedResponse};
use lsm_sandbox::{
    RateLimit, RiskLevel, Sandbox, SandboxConfig, Tool, ToolContext, ToolError, ToolOutput,
    ToolRegistry,
};
use serde_json::{Value, json};

/// A tool that does nothing and says so.
pub struct Noop;

#[async_trait::async_trait]
impl Tool for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn description(&self) -> &str {
        "Does nothing."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

/// A sandbox holding only [`Noop`], with a rate limit no benchmark reaches.
pub fn sandbox(dir: &Path) -> Arc<Sandbox> {
    let mut config = SandboxConfig::confined_to(dir);
    config.rate_limit = RateLimit {
        calls: u32::MAX,
        per_seconds: 1,
    };
    let registry = ToolRegistry::new().with(Arc::new(Noop));
    match Sandbox::new(config, registry, None) {
        Ok(s) => Arc::new(s),
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
