//! Runs on PostgreSQL (`[store] url`): workers in separate processes drain a queue, a worker
//! killed with SIGKILL has its runs finished by the others with no answered line asked
//! again (only a call in flight at the kill is repeated), a cancel reaches a run on another
//! process within a heartbeat, `lsm runs follow` streams a run's events, and a database
//! restart mid-run is ridden out. A row of the shared database (a queued run's, a memory's)
//! cannot drive the terminal of a command that shows it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use std::time::Duration;

use lsm_e2e::{lsm, run};
use lsm_store_pg::{Db, ListFilter, PgRuns, PgSettings};
use lsm_test_support::pg;
use serde_json::{Value, json};

use super::stderr;

/// The store's settings for a test: its URL and schema, a short lease.
struct Store {
    url: String,
    schema: String,
    lease: &'static str,
}

impl Store {
    fn env(&self, c: &mut Command) {
        c.env("LSM_STORE_URL", &self.url)
            .env("LSM_STORE_SCHEMA", &self.schema)
            .env("LSM_STORE_LEASE_SECONDS", self.lease);
        if let Ok(p) = std::env::var("LSM_STORE_PASSWORD") {
            c.env("LSM_STORE_PASSWORD", p);
        }
    }

    fn cmd(&self, dir: &Path) -> Command {
        let mut c = lsm(dir);
        self.env(&mut c);
        c.env("LSM_TEST_SCRIPTED_SERVED_LOG", dir.join("served"));
        c
    }

    fn runs(&self) -> PgRuns {
        let settings = PgSettings::new(&self.url).with_schema(&self.schema);
        PgRuns::new(
            Db::connect(settings).unwrap(),
            "test",
            Duration::from_secs(60),
        )
    }
}

/// The shared test database's store for `test`, with a lease of `lease` seconds, and a
/// working folder with its `served/` log folder; `None` (the test skipped) without one.
fn shared_store(test: &str, lease: &'static str) -> Option<(Store, tempfile::TempDir)> {
    let db = pg::database(test)?;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("served")).unwrap();
    let store = Store {
        url: db.url,
        schema: db.schema,
        lease,
    };
    Some((store, dir))
}

/// A run's script: two appends and an answer, each answer held back `delay_ms`.
fn script(k: usize, delay_ms: u64) -> String {
    [
        json!({"tool_calls": [{"name": "append_file", "arguments": {"path": format!("log{k}.txt"), "content": "one\n"}}],
               "usage": {"input_tokens": 10, "output_tokens": 2}, "delay_ms": delay_ms}),
        json!({"tool_calls": [{"name": "append_file", "arguments": {"path": format!("log{k}.txt"), "content": "two\n"}}],
               "usage": {"input_tokens": 20, "output_tokens": 3}, "delay_ms": delay_ms}),
        json!({"text": "done", "usage": {"input_tokens": 30, "output_tokens": 1}, "delay_ms": delay_ms}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect()
}

fn submit(store: &Store, dir: &Path, k: usize, delay_ms: u64) -> String {
    std::fs::write(dir.join(format!("r{k}.jsonl")), script(k, delay_ms)).unwrap();
    let out = run(store.cmd(dir).args([
        "runs",
        "submit",
        "general",
        "--task",
        &format!("append to log{k}.txt"),
        "--provider",
        &format!("scripted:r{k}.jsonl"),
        "--yes",
        "--json",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "queued");
    v["run_id"].as_str().unwrap().to_string()
}

fn worker(store: &Store, dir: &Path, concurrency: &str) -> Child {
    store
        .cmd(dir)
        .args(["worker", "--exit-when-idle", "--poll-ms", "50"])
        .args(["--concurrency", concurrency, "--agents-folder", "Agents"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Each served log of `dir/served`: the script lines served, in order.
fn served(dir: &Path) -> BTreeMap<String, Vec<u64>> {
    std::fs::read_dir(dir.join("served"))
        .unwrap()
        .flatten()
        .map(|e| {
            let lines = std::fs::read_to_string(e.path())
                .unwrap()
                .lines()
                .map(|l| l.parse().unwrap())
                .collect();
            (e.file_name().to_string_lossy().into_owned(), lines)
        })
        .collect()
}

/// The events of a journal, checked to be numbered 1, 2, 3, … without a gap.
fn events(runs: &PgRuns, run_id: &str) -> Vec<Value> {
    let lines: Vec<Value> = runs
        .read(run_id)
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["seq"], json!(i as u64 + 1), "{run_id}: seq without gaps");
    }
    lines
}

fn count(events: &[Value], name: &str) -> usize {
    events.iter().filter(|e| e["event"] == name).count()
}

#[test]
fn three_workers_drain_sixty_runs_and_finish_the_runs_of_one_killed_mid_run() {
    let Some((store, dir)) = shared_store("three_workers_drain_sixty_runs", "3") else {
        return;
    };
    let ids: Vec<String> = (0..60).map(|k| submit(&store, dir.path(), k, 60)).collect();

    // The first worker is killed once it drives runs (with lines of their journals written).
    let mut doomed = worker(&store, dir.path(), "3");
    let mut lines = BufReader::new(doomed.stderr.take().unwrap()).lines();
    let mut started = 0;
    while started < 3 {
        let line = lines.next().expect("the worker's stderr").unwrap();
        if line.contains(": starting") {
            started += 1;
        }
    }
    std::thread::sleep(Duration::from_millis(150));
    let pid = nix_pid(&doomed);
    kill9(pid);
    doomed.wait().unwrap();

    let others: Vec<Child> = (0..2).map(|_| worker(&store, dir.path(), "3")).collect();
    for mut w in others {
        let status = w.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut w.stderr.take().unwrap(), &mut err).unwrap();
        assert!(status.success(), "a worker failed: {err}");
    }

    let runs = store.runs();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rows = rt.block_on(runs.list(&ListFilter::default())).unwrap();
    assert_eq!(rows.len(), 60);
    let taken_over: Vec<&str> = rows
        .iter()
        .filter(|r| r.attempts > 1)
        .map(|r| r.run_id.as_str())
        .collect();
    assert!(
        !taken_over.is_empty(),
        "the killed worker's runs were taken over by the others"
    );
    for r in &rows {
        assert_eq!(r.status, "completed", "{}: {:?}", r.run_id, r.summary);
        let ev = events(&runs, &r.run_id);
        assert_eq!(count(&ev, "run_started"), 1, "{}", r.run_id);
        assert_eq!(count(&ev, "run_finished"), 1, "{}", r.run_id);
        assert_eq!(
            count(&ev, "llm_response"),
            3,
            "{}: one answer per line",
            r.run_id
        );
        // The budget is the run's, whoever drove which step: every call counted once.
        let summary = r.summary.as_ref().unwrap();
        assert_eq!(
            summary["token_usage"]["tokens_used"],
            json!(66),
            "{}",
            r.run_id
        );
    }
    // Every line served, in order, and none asked again once its answer was journaled. A
    // line is served twice only in a run that was taken over, when its call was in flight
    // as the worker was killed: the answer came, the process died before the journal held
    // it, and the next worker asked again. The journal still holds one answer per line and
    // the budget counts it once (above).
    let served = served(dir.path());
    assert_eq!(served.len(), 60);
    for (k, id) in ids.iter().enumerate() {
        let name = format!("r{k}.jsonl.served");
        let lines = &served[&name];
        let mut distinct = lines.clone();
        distinct.dedup();
        assert_eq!(distinct, vec![1, 2, 3], "{name}: {lines:?}");
        let row = rows.iter().find(|r| &r.run_id == id).unwrap();
        let takeovers = usize::try_from(row.attempts).unwrap() - 1;
        assert!(
            lines.len() - distinct.len() <= takeovers,
            "{name}: {lines:?}, but the run was attempted {} time(s)",
            row.attempts
        );
    }
    // A completed append is never run again.
    for k in 0..60 {
        let text = std::fs::read_to_string(dir.path().join(format!("log{k}.txt"))).unwrap();
        assert!(
            text.matches("one").count() <= 1 && text.matches("two").count() <= 1,
            "log{k}: {text}"
        );
    }
    assert_eq!(ids.len(), 60);
}

#[test]
fn cancel_reaches_a_run_in_another_process_and_follow_streams_its_events_to_the_end() {
    let Some((store, dir)) = shared_store("cancel_across_processes", "3") else {
        return;
    };
    // Each answer takes 3 s: the run is mid-call when it is cancelled.
    let id = submit(&store, dir.path(), 0, 3000);
    let follow = store
        .cmd(dir.path())
        .args(["runs", "follow", &id, "--poll-ms", "50"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut w = worker(&store, dir.path(), "1");
    let runs = store.runs();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Wait until the worker drives it.
    loop {
        let row = rt.block_on(runs.get(&id)).unwrap().unwrap();
        if row.status == "running" && row.last_seq >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = run(store.cmd(dir.path()).args(["runs", "cancel", &id]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("asked to stop"));
    assert!(w.wait().unwrap().success());
    let row = rt.block_on(runs.get(&id)).unwrap().unwrap();
    assert_eq!(row.status, "cancelled");
    assert!(row.cancel_requested);
    let ev = events(&runs, &id);
    assert_eq!(ev.last().unwrap()["event"], "run_finished");
    assert_eq!(ev.last().unwrap()["status"], "stopped");

    let out = follow.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let followed: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(followed, ev, "follow printed the journal, line for line");

    // A finished run cannot be cancelled again; an unknown one is a usage error.
    let out = run(store.cmd(dir.path()).args(["runs", "cancel", &id]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("had already ended"));
    let out = run(store.cmd(dir.path()).args(["runs", "cancel", "nope"]));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_database_restart_mid_run_is_ridden_out_and_the_run_completes() {
    let Some(server) = pg::PgServer::start("database_restart_mid_run") else {
        return;
    };
    let store = Store {
        url: server.url(),
        schema: "lsm".into(),
        lease: "30",
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("served")).unwrap();
    let id = submit(&store, dir.path(), 0, 700);
    let mut w = worker(&store, dir.path(), "1");
    let runs = store.runs();
    let rt = tokio::runtime::Runtime::new().unwrap();
    loop {
        let row = rt.block_on(runs.get(&id)).unwrap().unwrap();
        if row.last_seq >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(runs);
    server.stop();
    std::thread::sleep(Duration::from_millis(800));
    server.start_again();
    let status = w.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut w.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let runs = store.runs();
    let row = rt.block_on(runs.get(&id)).unwrap().unwrap();
    assert_eq!(row.status, "completed", "{err}");
    assert_eq!(row.attempts, 1, "the same worker finished it");
    assert_eq!(served(dir.path())["r0.jsonl.served"], vec![1, 2, 3]);
}

fn nix_pid(child: &Child) -> i32 {
    i32::try_from(child.id()).unwrap()
}

fn kill9(pid: i32) {
    let ok = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

#[test]
fn a_foreground_run_on_postgres_that_crashed_is_listed_interrupted_and_resumed_from_the_database() {
    let Some((store, dir)) = shared_store("foreground_run_on_postgres", "2") else {
        return;
    };
    std::fs::write(dir.path().join("r0.jsonl"), script(0, 0)).unwrap();
    let out = run(store
        .cmd(dir.path())
        .env("LSM_TEST_CRASH_AFTER_SEQ", "6")
        .args(["agent", "run", "general", "--task", "append to log0.txt"])
        .args(["--provider", "scripted:r0.jsonl", "--yes", "--json"])
        .args(["--agents-folder", "Agents"]));
    assert!(!out.status.success(), "the run was cut: {}", stderr(&out));
    // No transcript file: the journal is in the database.
    let logs = dir.path().join("Agents/general/logs");
    let transcripts = std::fs::read_dir(&logs)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().join("transcript.jsonl").exists())
                .count()
        })
        .unwrap_or(0);
    assert_eq!(transcripts, 0);
    let out = run(store.cmd(dir.path()).args(["runs", "list", "--json"]));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = rows[0]["run_id"].as_str().unwrap().to_string();

    // Listed running until its lease runs out, then interrupted.
    let listed = loop {
        let out = run(store.cmd(dir.path()).args(["runs", "list", "--json"]));
        let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = rows.as_array().unwrap()[0].clone();
        assert_eq!(row["run_id"], json!(id));
        if row["status"] == "interrupted" {
            break row;
        }
        assert_eq!(row["status"], "running");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(listed["resumable"], json!(true));
    let out = run(store.cmd(dir.path()).args([
        "runs",
        "resume",
        &id,
        "--yes",
        "--json",
        "--agents-folder",
        "Agents",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["token_usage"]["tokens_used"], json!(66));
    assert_eq!(served(dir.path())["r0.jsonl.served"], vec![1, 2, 3]);
    let runs = store.runs();
    let ev = events(&runs, &id);
    assert_eq!(count(&ev, "run_finished"), 1);
    // A finished run is not resumed again.
    let out = run(store
        .cmd(dir.path())
        .args(["runs", "resume", &id, "--agents-folder", "Agents"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("already finished"),
        "{}",
        stderr(&out)
    );

    // Continued from the database: a new turn of its conversation (its script goes on after
    // the three calls the conversation made).
    let next: String = [
        text_line("x"),
        text_line("x"),
        text_line("x"),
        text_line("and again"),
    ]
    .concat();
    std::fs::write(dir.path().join("r1.jsonl"), next).unwrap();
    let out = run(store
        .cmd(dir.path())
        .args([
            "agent",
            "run",
            "general",
            "--task",
            "once more",
            "--continue",
            &id,
        ])
        .args(["--provider", "scripted:r1.jsonl", "--yes", "--json"])
        .args(["--agents-folder", "Agents"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["continues"], json!(id));
    assert_eq!(summary["final_text"], "and again");
}

fn text_line(text: &str) -> String {
    format!("{}\n", json!({"text": text}))
}

/// A row of the shared queue is outside text to a worker: anyone who can write to the
/// database chooses a run's id and agent. The worker's lines about it are shown cleaned, so
/// a row cannot drive the terminal the worker runs in.
#[test]
fn a_hostile_row_in_the_queue_cannot_drive_the_workers_terminal() {
    let Some((store, dir)) = shared_store("hostile_row_in_the_queue", "3") else {
        return;
    };
    // A real request, queued again under an id and agent that hold terminal commands.
    let id = submit(&store, dir.path(), 0, 0);
    let runs = store.runs();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let request = rt.block_on(runs.get(&id)).unwrap().unwrap().request;
    let hostile_id = "20261130_000000_\u{1b}]0;pwned\u{7}\u{1b}[2J\nrun forged: completed";
    rt.block_on(runs.submit(hostile_id, "general\u{1b}[31m", "t", request))
        .unwrap();
    let out = worker(&store, dir.path(), "1").wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    for row in [&id, hostile_id] {
        let row = rt.block_on(runs.get(row)).unwrap().unwrap();
        assert_ne!(row.status, "queued", "the worker took {:?}", row.run_id);
    }
    assert!(
        !err.contains('\u{1b}') && !err.contains('\u{7}'),
        "a control character reached the terminal: {err:?}"
    );
    assert!(err.contains("pwned"), "the run's line is shown: {err}");
    assert!(
        !err.lines().any(|l| l.starts_with("run forged")),
        "a line break in a row's id forged a line: {err}"
    );
    // Nor the terminal of whoever lists the runs.
    let out = run(store.cmd(dir.path()).args(["runs", "list"]));
    let listed = String::from_utf8_lossy(&out.stdout).into_owned() + &stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{listed}");
    assert!(listed.contains("pwned"), "{listed}");
    assert!(
        !listed.contains('\u{1b}') && !listed.contains('\u{7}'),
        "a control character reached the terminal: {listed:?}"
    );
    assert!(
        !listed.lines().any(|l| l.starts_with("run forged")),
        "{listed}"
    );
    // Nor a journal line a database writer stored: `lsm runs follow` escapes it.
    let last = rt.block_on(runs.get(&id)).unwrap().unwrap().last_seq;
    let run_id = id.clone();
    rt.block_on(runs.db().run("a hostile journal line", move |c| {
        let run_id = run_id.clone();
        async move {
            c.execute(
                "INSERT INTO lsm_run_events (run_id, seq, line) VALUES ($1, $2, $3)",
                &[
                    &run_id,
                    &(last + 1),
                    &"{}\u{1b}]0;pwned\u{7}\n{\"event\":\"forged\"}",
                ],
            )
            .await?;
            Ok(())
        }
    }))
    .unwrap();
    let followed = run(store.cmd(dir.path()).args(["runs", "follow", &id]));
    let shown = String::from_utf8_lossy(&followed.stdout);
    assert_eq!(followed.status.code(), Some(0), "{}", stderr(&followed));
    assert!(shown.contains("pwned"), "{shown}");
    assert!(!shown.contains(['\u{1b}', '\u{7}']), "{shown:?}");
    assert!(
        !shown.lines().any(|l| l.starts_with("{\"event\":\"forged")),
        "{shown}"
    );
}

/// A memory in the shared database is outside text as a queued run is: `lsm memory list`
/// shows a row's id and agent (which a database writer chooses, past the checks `lsm`
/// makes when it writes one) cleaned, on one line.
#[test]
fn a_hostile_memory_row_cannot_drive_the_terminal_of_memory_list() {
    let Some((store, dir)) = shared_store("hostile_memory_row", "3") else {
        return;
    };
    let runs = store.runs();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(runs.db().run("a hostile memory", |c| async move {
        c.execute(
            "INSERT INTO lsm_memories (id, scope, project, owner_agent, text, created_at, \
             updated_at, status) VALUES ($1, 'global', '', $2, 'a fact', now(), now(), 'approved')",
            &[&"m-\u{1b}]0;pwned\u{7}\nforged", &"general\u{1b}[2J"],
        )
        .await?;
        Ok(())
    }))
    .unwrap();
    let out = run(store
        .cmd(dir.path())
        .args(["memory", "list", "--agents-folder", "Agents"]));
    let listed = String::from_utf8_lossy(&out.stdout).into_owned() + &stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{listed}");
    assert!(
        listed.contains("pwned") && listed.contains("a fact"),
        "{listed}"
    );
    assert!(
        !listed.contains('\u{1b}') && !listed.contains('\u{7}'),
        "a control character reached the terminal: {listed:?}"
    );
    assert!(!listed.lines().any(|l| l.starts_with("forged")), "{listed}");
}
