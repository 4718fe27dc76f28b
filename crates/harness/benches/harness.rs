//! One harness iteration (one scripted LLM call + one trivial tool through the sandbox),
//! without and with the transcript file. Run: `cargo bench -p lsm-harness --bench harness`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use lsm_harness::JournalFsync;
use lsm_phase::{PhaseExecutor, PhaseRequest, StopReason};

fn iteration(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sandbox = common::sandbox(dir.path());
    let mut group = c.benchmark_group("harness_iteration");
    for (name, records, fsync) in [
        ("no_file_io", false, JournalFsync::Batched),
        ("with_transcript", true, JournalFsync::Batched),
        ("with_transcript_fsync_always", true, JournalFsync::Always),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                // One phase of `iters` iterations: every iteration is one LLM call and one
                // tool call; the `fresh` strategy keeps the history bounded.
                let provider = Arc::new(common::noop_script(iters as usize));
                let mut h = common::harness_with_fsync(
                    dir.path(),
                    provider,
                    sandbox.clone(),
                    records,
                    fsync,
                );
                let start = Instant::now();
                let r = rt.block_on(
                    h.run_bounded(PhaseRequest::new("go").with_max_iterations(iters as u32)),
                );
                let elapsed = start.elapsed();
                assert_eq!(r.stop_reason, StopReason::MaxIterations);
                elapsed
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = iteration
}
criterion_main!(benches);
