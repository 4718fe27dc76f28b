//! One `read_file` call through the sandbox — permission gate, schema validation, rate
//! limiter, path confinement, the read, redaction, the output cap — of a small file two
//! folders below the workspace. Run: `cargo bench -p lsm-sandbox --bench tool_call`.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use lsm_sandbox::builtin::ReadFile;
use lsm_sandbox::{RateLimit, Sandbox, SandboxConfig, ToolRegistry};

fn read_file(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("files/notes");
    std::fs::create_dir_all(&folder).unwrap();
    // The 257 bytes of `cargo xtask bench-peers`' files.
    let text = format!("File 0.\n{}\n", "Some notes of a small project. ".repeat(8));
    std::fs::write(folder.join("f0.txt"), &text).unwrap();
    let mut config = SandboxConfig::confined_to(dir.path());
    config.rate_limit = RateLimit {
        calls: u32::MAX,
        per_seconds: 1,
    };
    let registry = ToolRegistry::new().with(Arc::new(ReadFile));
    let sandbox = Sandbox::new(config, registry, None).unwrap();
    let args = serde_json::json!({ "path": "files/notes/f0.txt" });
    c.bench_function("read_file_two_folders_deep", |b| {
        b.iter(|| {
            let done = rt.block_on(sandbox.execute("read_file", &args));
            assert_eq!(done.outcome.unwrap().len(), text.len());
        });
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = read_file
}
criterion_main!(benches);
