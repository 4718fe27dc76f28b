//! 10,000 concurrent 5-iteration runs in one process: wall time and peak RSS.
//! Run: `cargo bench -p lsm-harness --bench concurrent` (add `-- --records` to also write
//! every run's transcript and summary).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

mod common;

use std::sync::Arc;
use std::time::Instant;

use lsm_phase::{PhaseExecutor, PhaseRequest, RunOutcome, StopReason};
use lsm_test_support::process::peak_rss_mib;

const RUNS: usize = 10_000;
const ITERATIONS: usize = 5;

fn main() {
    let records = std::env::args().any(|a| a == "--records");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sandbox = common::sandbox(dir.path());
    let script = common::noop_script(ITERATIONS);
    let rss_before = peak_rss_mib();
    let start = Instant::now();
    let done = rt.block_on(async {
        let mut tasks = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let provider = Arc::new(script.replay());
            let mut h = common::harness(dir.path(), provider, sandbox.clone(), records);
            tasks.push(tokio::spawn(async move {
                let r = h
                    .run_bounded(PhaseRequest::new("go").with_max_iterations(ITERATIONS as u32))
                    .await;
                h.finish(RunOutcome::Stopped(r.stop_reason)).await;
                r.stop_reason == StopReason::MaxIterations
            }));
        }
        let mut ok = 0usize;
        for t in tasks {
            ok += usize::from(t.await.unwrap());
        }
        ok
    });
    let elapsed = start.elapsed();
    assert_eq!(
        done, RUNS,
        "every run must finish its {ITERATIONS} iterations"
    );
    println!(
        "concurrent_runs: {RUNS} runs x {ITERATIONS} iterations, records={records}: {:.3} s wall, peak RSS {:.1} MiB (before: {:.1} MiB)",
        elapsed.as_secs_f64(),
        peak_rss_mib(),
        rss_before
    );
}
