//! Runs on PostgreSQL: throughput of scripted 5-iteration runs through 1, 2 and 4 `lsm worker`
//! processes; the cost of one journal append in PostgreSQL and in the run folder's file; the
//! time from a worker's death to its run continuing on another worker.
//!
//! Run: `cargo build --release -p lsm-cli`, then
//! `LSM_BIN=target/release/lsm LSM_TEST_DATABASE_URL=postgres://lsm@127.0.0.1:5432/lsm_test
//! LSM_STORE_PASSWORD=… cargo bench -p lsm-e2e --bench workers_pg`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::cast_precision_loss
)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lsm_harness::{EventEnvelope, FileStore, RunEvent, RunKey, RunStore};
use lsm_store_pg::{Db, ListFilter, PgRuns, PgSettings};
use serde_json::json;

const RUNS: usize = 40;

fn lsm_command(dir: &Path, url: &str, schema: &str, lease: &str) -> Command {
    let mut c = lsm_e2e::lsm(dir);
    c.env("LSM_STORE_URL", url)
        .env("LSM_STORE_SCHEMA", schema)
        .env("LSM_STORE_LEASE_SECONDS", lease);
    if let Ok(p) = std::env::var("LSM_STORE_PASSWORD") {
        c.env("LSM_STORE_PASSWORD", p);
    }
    c
}

fn runs(url: &str, schema: &str) -> PgRuns {
    let db = Db::connect(PgSettings::new(url).with_schema(schema)).unwrap();
    PgRuns::new(db, "bench", Duration::from_secs(60))
}

fn script(delay_ms: u64) -> String {
    let mut lines: Vec<serde_json::Value> = (0..4)
        .map(|i| json!({"tool_calls": [{"name": "read_file", "arguments": {"path": format!("notes{i}.md")}}],
                        "usage": {"input_tokens": 10, "output_tokens": 2}, "delay_ms": delay_ms}))
        .collect();
    lines.push(json!({"text": "done", "usage": {"input_tokens": 10, "output_tokens": 1}}));
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn submit(rt: &tokio::runtime::Runtime, pg: &PgRuns, dir: &Path, n: usize, delay_ms: u64) {
    for i in 0..4 {
        std::fs::write(dir.join(format!("notes{i}.md")), format!("note {i}\n")).unwrap();
    }
    std::fs::write(dir.join("s.jsonl"), script(delay_ms)).unwrap();
    for k in 0..n {
        let request = json!({"agent": "general", "task": "read the notes",
            "provider": format!("scripted:{}", dir.join("s.jsonl").display()),
            "yes": true, "working_dir": dir.display().to_string()});
        rt.block_on(pg.submit(&format!("run{k:03}"), "general", "read the notes", request))
            .unwrap();
    }
}

fn worker(dir: &Path, url: &str, schema: &str, lease: &str, idle_exit: bool) -> Child {
    let mut c = lsm_command(dir, url, schema, lease);
    c.args(["worker", "--poll-ms", "20", "--agents-folder", "Agents"]);
    if idle_exit {
        c.arg("--exit-when-idle");
    }
    c.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn throughput(rt: &tokio::runtime::Runtime, url: &str, workers: usize) -> f64 {
    let schema = lsm_test_support::pg::fresh_schema();
    let pg = runs(url, &schema);
    let dir = tempfile::tempdir().unwrap();
    submit(rt, &pg, dir.path(), RUNS, 0);
    let t = Instant::now();
    let children: Vec<Child> = (0..workers)
        .map(|_| worker(dir.path(), url, &schema, "30", true))
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let wall = t.elapsed().as_secs_f64();
    let rows = rt.block_on(pg.list(&ListFilter::default())).unwrap();
    for r in &rows {
        assert_eq!(r.status, "completed", "{:?}", r.summary);
    }
    RUNS as f64 / wall
}

fn line(seq: u64) -> (RunEvent, Vec<u8>) {
    let event = RunEvent::from_parts(
        "llm_error",
        json!({"label": "__default__", "error": "x".repeat(400)}),
    )
    .unwrap();
    let envelope = EventEnvelope {
        seq,
        ts: "2026-11-25T00:00:00.000Z".into(),
        run_id: "r".into(),
        schema_version: lsm_harness::SCHEMA_VERSION,
        event: event.clone(),
    };
    let mut bytes = serde_json::to_vec(&envelope).unwrap();
    bytes.push(b'\n');
    (event, bytes)
}

/// Mean microseconds per append of a ~500-byte line, `n` appends, with `sync` as given.
fn append_cost(store: &dyn RunStore, key: &RunKey, n: u64, sync: bool) -> f64 {
    let mut w = store.create(key).unwrap();
    let t = Instant::now();
    for seq in 1..=n {
        let (event, bytes) = line(seq);
        w.append(seq, &event, &bytes, sync).unwrap();
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    w.release();
    us
}

fn failover(rt: &tokio::runtime::Runtime, url: &str, lease: &str) -> f64 {
    let schema = lsm_test_support::pg::fresh_schema();
    let pg = runs(url, &schema);
    let dir = tempfile::tempdir().unwrap();
    submit(rt, &pg, dir.path(), 1, 400);
    let mut a = worker(dir.path(), url, &schema, lease, false);
    loop {
        let r = rt.block_on(pg.get("run000")).unwrap().unwrap();
        if r.last_seq >= 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut b = worker(dir.path(), url, &schema, lease, true);
    a.kill().unwrap();
    let killed = Instant::now();
    a.wait().unwrap();
    let seq_at_kill = rt.block_on(pg.get("run000")).unwrap().unwrap().last_seq;
    loop {
        let r = rt.block_on(pg.get("run000")).unwrap().unwrap();
        if r.attempts >= 2 && r.last_seq > seq_at_kill {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let secs = killed.elapsed().as_secs_f64();
    assert!(b.wait().unwrap().success());
    secs
}

/// Pseudo-PgRunStore for the append figure: lsm-store-pg's append as the adapter calls it.
#[derive(Debug)]
struct PgAppend(PgRuns);

impl RunStore for PgAppend {
    fn create(
        &self,
        key: &RunKey,
    ) -> Result<Box<dyn lsm_harness::JournalWriter>, lsm_harness::HarnessError> {
        self.0.take(&key.run_id, &key.agent).unwrap();
        Ok(Box::new(PgAppendWriter(self.0.clone(), key.run_id.clone())))
    }
    fn reopen(
        &self,
        _: &RunKey,
    ) -> Result<
        (Box<dyn lsm_harness::JournalWriter>, lsm_harness::Journal),
        lsm_harness::HarnessError,
    > {
        unreachable!()
    }
    fn read(&self, _: &RunKey) -> Result<Option<lsm_harness::Journal>, lsm_harness::HarnessError> {
        Ok(None)
    }
}

#[derive(Debug)]
struct PgAppendWriter(PgRuns, String);

impl lsm_harness::JournalWriter for PgAppendWriter {
    fn append(
        &mut self,
        seq: u64,
        _: &RunEvent,
        line: &[u8],
        _: bool,
    ) -> Result<(), lsm_harness::HarnessError> {
        let text = std::str::from_utf8(line.strip_suffix(b"\n").unwrap()).unwrap();
        self.0.append(&self.1, seq, text, None).unwrap();
        Ok(())
    }
    fn sync(&mut self) -> Result<(), lsm_harness::HarnessError> {
        Ok(())
    }
    fn finished(&mut self, _: &serde_json::Value) -> Result<(), lsm_harness::HarnessError> {
        Ok(())
    }
    fn release(self: Box<Self>) {}
    fn location(&self) -> String {
        String::new()
    }
}

fn main() {
    let Ok(url) = std::env::var(lsm_test_support::pg::DATABASE_URL_ENV) else {
        println!("set LSM_TEST_DATABASE_URL (and LSM_STORE_PASSWORD) to a PostgreSQL database");
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    println!("binary: {}", lsm_e2e::lsm_bin().display());

    let dir = tempfile::tempdir().unwrap();
    let key = |id: &str| RunKey {
        run_id: id.into(),
        agent: "general".into(),
        run_dir: dir.path().join("general/logs").join(id),
    };
    let pg = PgAppend(runs(&url, &lsm_test_support::pg::fresh_schema()));
    for (name, store, sync) in [
        (
            "file, no fsync (batched policy, most lines)",
            &FileStore as &dyn RunStore,
            false,
        ),
        (
            "file, fsync (a side-effect call's start)",
            &FileStore as &dyn RunStore,
            true,
        ),
        (
            "PostgreSQL (every line committed)",
            &pg as &dyn RunStore,
            false,
        ),
    ] {
        let id = format!("append-{}", name.len() + usize::from(sync));
        let us = append_cost(store, &key(&id), 2000, sync);
        println!("journal append, {name}: {us:.1} µs per ~500-byte line (2000 lines)");
    }

    for workers in [1, 2, 4] {
        let per_s = throughput(&rt, &url, workers);
        println!("{RUNS} scripted 5-iteration runs through {workers} worker(s): {per_s:.1} runs/s");
    }

    for lease in ["1.5", "5"] {
        let s = failover(&rt, &url, lease);
        println!("lease {lease} s: a killed worker's run continued elsewhere after {s:.2} s");
    }
}
