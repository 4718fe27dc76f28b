//! Five 200 ms read-only calls in one answer: the run's wall time with `max_parallel_tools`
//! 1 (one by one), 4 (the default: a group of four, then one) and 5 (all together).
//! Run: `cargo bench -p lsm-harness --bench parallel_reads`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use lsm_harness::{AgentHarness, HarnessConfig};
use lsm_phase::{AgentIdentity, PhaseExecutor, PhaseRequest, RunOutcome, StopReason};
use lsm_providers::{ScriptedProvider, ScriptedResponse, ScriptedToolCall};
use lsm_sandbox::{
    RateLimit, RiskLevel, Sandbox, SandboxConfig, Tool, ToolContext, ToolError, ToolOutput,
    ToolRegistry,
};
use serde_json::{Value, json};

const READS: usize = 5;
const READ_TIME: Duration = Duration::from_millis(200);
const RUNS: usize = 5;

/// A read that takes [`READ_TIME`] (a slow disk or a remote index).
struct SlowRead;

#[async_trait::async_trait]
impl Tool for SlowRead {
    fn name(&self) -> &str {
        "slow_read"
    }
    fn description(&self) -> &str {
        "A read that takes 200 ms."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(READ_TIME).await;
        Ok(ToolOutput::text("read"))
    }
}

fn harness(
    dir: &std::path::Path,
    sandbox: Arc<Sandbox>,
    max_parallel_tools: usize,
) -> AgentHarness {
    let calls = (0..READS)
        .map(|n| ScriptedToolCall {
            id: Some(format!("read-{n}")),
            name: "slow_read".into(),
            arguments: json!({"n": n}),
        })
        .collect();
    let script = vec![
        ScriptedResponse {
            tool_calls: calls,
            ..ScriptedResponse::default()
        }
        .with_usage(100, 10),
        ScriptedResponse::text("done").with_usage(100, 10),
    ];
    AgentHarness::new(
        AgentIdentity {
            name: "bench".into(),
            tool_allowlist: vec!["slow_read".into()],
            tier: Default::default(),
            topic: "benchmark".into(),
        },
        "You are a benchmark.",
        HarnessConfig {
            agents_folder: dir.join("Agents"),
            max_parallel_tools,
            ..HarnessConfig::default()
        },
        Arc::new(ScriptedProvider::new(script).without_recording()),
        sandbox,
    )
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Arc::new(
        Sandbox::new(
            SandboxConfig {
                working_dir: Some(dir.path().to_path_buf()),
                rate_limit: RateLimit {
                    calls: 1_000_000,
                    per_seconds: 1,
                },
                ..SandboxConfig::default()
            },
            ToolRegistry::new().with(Arc::new(SlowRead)),
            None,
        )
        .unwrap(),
    );
    for max_parallel in [1, 4, 5] {
        let mut times: Vec<Duration> = (0..RUNS)
            .map(|_| {
                rt.block_on(async {
                    let mut h = harness(dir.path(), Arc::clone(&sandbox), max_parallel);
                    let start = Instant::now();
                    let r = h
                        .run_bounded(PhaseRequest::new("go").with_max_iterations(3))
                        .await;
                    let elapsed = start.elapsed();
                    assert_eq!(r.stop_reason, StopReason::Done);
                    assert_eq!(r.tool_calls.len(), READS);
                    h.finish(RunOutcome::Stopped(r.stop_reason)).await;
                    elapsed
                })
            })
            .collect();
        times.sort();
        println!(
            "parallel_reads: {READS} reads of {} ms in one answer, max_parallel_tools = {max_parallel}: median {:.0} ms (min {:.0}, max {:.0}) over {RUNS} runs",
            READ_TIME.as_millis(),
            times[RUNS / 2].as_secs_f64() * 1000.0,
            times[0].as_secs_f64() * 1000.0,
            times[RUNS - 1].as_secs_f64() * 1000.0,
        );
    }
}
