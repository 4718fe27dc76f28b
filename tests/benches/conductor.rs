//! 100 conductor runs of 5 workers × 10 iterations each, in one process, on scripted models:
//! wall time, peak RSS, and the harness's CPU per worker iteration.
//! Run: `cargo bench -p lsm-e2e --bench conductor` (add `-- --records` to write every run's
//! transcript and summary).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::cast_precision_loss
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use lsm_agents::{Agent, AgentContext, ConductorAgent};
use lsm_harness::{
    AgentHarness, EventEnvelope, EventSink, HarnessConfig, HarnessFactory, WorkerJob,
    WorkerReporter, WorkerSpawner,
};
use lsm_phase::{AgentIdentity, ExecutorFactory, WorkerOutcome};
use lsm_providers::{ScriptedProvider, ScriptedResponse};
use lsm_sandbox::Sandbox;
use serde_json::{Value, json};

const RUNS: usize = 100;
const WORKERS: usize = 5;
const ITERATIONS: usize = 10;

fn sandbox(dir: &Path) -> Arc<Sandbox> {
    lsm_test_support::noop_sandbox(dir).unwrap()
}

fn config(dir: &Path, records: bool) -> HarnessConfig {
    HarnessConfig {
        agents_folder: dir.join("Agents"),
        max_tokens_budget: u64::MAX,
        write_records: records,
        ..HarnessConfig::default()
    }
}

/// A worker: nine `noop` calls, then a report.
fn worker_script() -> Vec<ScriptedResponse> {
    let mut lines: Vec<ScriptedResponse> = (0..ITERATIONS - 1)
        .map(|n| ScriptedResponse::tool("noop", json!({"n": n})).with_usage(100, 10))
        .collect();
    lines.push(
        ScriptedResponse::tool(
            "complete",
            json!({"summary": "done", "findings": [{"claim": "ok", "confidence": 1.0,
                   "evidence_refs": ["call_1_0"]}]}),
        )
        .with_usage(100, 10),
    );
    lines
}

struct ToParent(WorkerReporter);

impl EventSink for ToParent {
    fn event(&self, event: &EventEnvelope) {
        self.0.progress(event);
    }
}

struct Spawner {
    dir: PathBuf,
    records: bool,
    sandbox: Arc<Sandbox>,
}

#[async_trait::async_trait]
impl WorkerSpawner for Spawner {
    async fn run(&self, job: WorkerJob) -> WorkerOutcome {
        let identity = AgentIdentity {
            name: "worker".into(),
            tool_allowlist: vec!["noop".into()],
            tier: Default::default(),
            topic: job.request.objective.clone(),
        };
        let mut h = AgentHarness::new(
            identity,
            "You work.",
            config(&self.dir, self.records),
            Arc::new(ScriptedProvider::new(worker_script()).without_recording()),
            Arc::clone(&self.sandbox),
        )
        .with_budget(job.budget.clone())
        .with_stop_token(job.stop.clone())
        .with_event_sink(Arc::new(ToParent(job.reporter.clone())));
        job.reporter
            .started(h.run_id(), "worker", &h.run_dir(), &job.request.objective);
        let report = h.run(&job.request.objective).await;
        WorkerOutcome {
            item_id: job.request.item_id.clone(),
            capability: job.request.capability.clone(),
            worker_run_id: Some(h.run_id().to_string()),
            stop_reason: report.result.stop_reason,
            report: h.run_report().unwrap_or_default(),
            error: None,
        }
    }
}

fn conductor_script() -> Vec<ScriptedResponse> {
    let items: Vec<Value> = (0..WORKERS)
        .map(|i| {
            json!({"id": format!("a{i}"), "objective": format!("item {i}"),
                        "capability": "researcher"})
        })
        .collect();
    vec![
        ScriptedResponse::text(Value::Array(items).to_string()).with_usage(100, 50),
        ScriptedResponse::text(r#"{"complete": true}"#).with_usage(100, 5),
        ScriptedResponse::text("# Report\nAll fine [F1].").with_usage(100, 20),
    ]
}

use lsm_test_support::process::{cpu_seconds, peak_rss_mib};

fn main() {
    let records = std::env::args().any(|a| a == "--records");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sandbox = sandbox(dir.path());
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let reports: Vec<usize> = rt.block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..RUNS {
            let spawner = Arc::new(Spawner {
                dir: dir.path().to_path_buf(),
                records,
                sandbox: Arc::clone(&sandbox),
            });
            let factory = HarnessFactory::new(
                config(dir.path(), records),
                Arc::new(ScriptedProvider::new(conductor_script()).without_recording()),
                Arc::clone(&sandbox),
            )
            .with_worker_spawner(spawner);
            let ctx = AgentContext::new(
                Arc::new(factory) as Arc<dyn ExecutorFactory>,
                dir.path().join("Agents"),
            )
            .with_max_workers(WORKERS);
            tasks.push(tokio::spawn(async move {
                let mut agent = ConductorAgent::new(ctx);
                let out = agent.run("bench").await;
                out.report.map_or(0, |r| r.summary.len())
            }));
        }
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.unwrap());
        }
        done
    });
    let wall = start.elapsed();
    let cpu = cpu_seconds() - cpu0;
    assert_eq!(reports.len(), RUNS);
    let worker_iterations = (RUNS * WORKERS * ITERATIONS) as f64;
    println!(
        "{RUNS} conductor runs × {WORKERS} workers × {ITERATIONS} iterations (records {}): \
         wall {:.2} s, CPU {:.2} s, peak RSS {:.1} MiB, CPU per worker iteration {:.1} µs",
        if records { "on" } else { "off" },
        wall.as_secs_f64(),
        cpu,
        peak_rss_mib(),
        cpu / worker_iterations * 1e6
    );
}
