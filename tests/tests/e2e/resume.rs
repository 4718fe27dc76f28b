//! Durable runs from the command line: a run killed at any journal line is finished by
//! `lsm runs resume` with nothing repeated; the lock refuses a second resume; SIGTERM;
//! `--output-format stream-json`.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use lsm_e2e::{lsm, run};
use serde_json::{Value, json};

use super::{call, stderr, stdout_json, text};

fn usage_line(v: Value, input: u64, output: u64) -> Value {
    let mut v = v;
    v["usage"] = json!({"input_tokens": input, "output_tokens": output});
    v
}

pub(super) fn general_script() -> Vec<Value> {
    vec![
        usage_line(
            call(
                "append_file",
                json!({"path": "log.txt", "content": "one\n"}),
            ),
            10,
            2,
        ),
        json!({"tool_calls": [
            {"name": "append_file", "arguments": {"path": "log.txt", "content": "two\n"}},
            {"name": "read_file", "arguments": {"path": "log.txt"}}],
            "usage": {"input_tokens": 20, "output_tokens": 3}}),
        usage_line(
            call(
                "write_file",
                json!({"path": "out.txt", "content": "three\n"}),
            ),
            30,
            4,
        ),
        usage_line(text("done"), 40, 1),
    ]
}

pub(super) fn research_script() -> Vec<Value> {
    vec![
        usage_line(text(r#"["storage", "loss"]"#), 11, 2),
        usage_line(text("Soil stores carbon."), 12, 3),
        usage_line(text("Tillage loses carbon."), 13, 4),
        usage_line(text("# Soil carbon outline"), 14, 5),
        usage_line(text(r#"{"sufficient": true}"#), 15, 6),
    ]
}

/// A workspace for one run: the script, `notes.md`, the served log.
pub(super) struct Ws {
    pub(super) dir: tempfile::TempDir,
    pub(super) script: PathBuf,
}

impl Ws {
    pub(super) fn new(lines: &[Value]) -> Ws {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.md"), "hello\n").unwrap();
        let script = dir.path().join("script.jsonl");
        let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&script, body).unwrap();
        Ws { dir, script }
    }

    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(super) fn cmd(&self) -> Command {
        let mut c = lsm(self.path());
        c.env(
            "LSM_TEST_SCRIPTED_SERVED_LOG",
            self.path().join("served.log"),
        );
        c
    }

    pub(super) fn start(&self, agent: &str, env: &[(&str, String)]) -> Output {
        let mut c = self.cmd();
        c.args(["agent", "run", agent]);
        if agent == "research" {
            c.args(["--topic", "soil carbon", "--max-rounds", "1"]);
        } else {
            c.args(["--task", "append the lines"]);
        }
        c.arg("--provider")
            .arg(format!("scripted:{}", self.script.display()))
            .args(["--agents-folder", "Agents", "--yes", "--json"]);
        for (k, v) in env {
            c.env(k, v);
        }
        run(&mut c)
    }

    pub(super) fn resume(&self, run_id: &str, extra: &[&str]) -> Output {
        let mut c = self.cmd();
        c.args([
            "runs",
            "resume",
            run_id,
            "--agents-folder",
            "Agents",
            "--yes",
        ])
        .args(extra);
        run(&mut c)
    }

    pub(super) fn run_dir(&self, agent: &str) -> PathBuf {
        let logs = self.path().join("Agents").join(agent).join("logs");
        std::fs::read_dir(&logs)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("transcript.jsonl").exists())
            .unwrap()
    }

    pub(super) fn served(&self) -> Vec<u64> {
        std::fs::read_to_string(self.path().join("served.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect()
    }

    pub(super) fn file_lines(&self, name: &str) -> usize {
        std::fs::read_to_string(self.path().join(name))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

/// The transcript's lines, each checked to be a JSON object, with `seq` 1, 2, 3, ….
pub(super) fn journal(run_dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    assert!(
        text.ends_with('\n'),
        "the transcript ends on a line boundary"
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["seq"], json!(i as u64 + 1), "seq without gaps: {l}");
    }
    lines
}

pub(super) fn tokens(summary: &Value) -> (u64, u64, u64) {
    let u = &summary["token_usage"];
    (
        u["tokens_used"].as_u64().unwrap(),
        u["input_tokens"].as_u64().unwrap(),
        u["output_tokens"].as_u64().unwrap(),
    )
}

/// Kill `agent`'s run at each crash point, resume it, and check the invariants.
fn crash_matrix(agent: &str, script: &[Value], side_effect_files: &[&str]) -> usize {
    let reference = Ws::new(script);
    let out = reference.start(agent, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ref_summary = stdout_json(&out);
    let ref_lines = journal(&reference.run_dir(agent));
    let ref_files: Vec<usize> = side_effect_files
        .iter()
        .map(|f| reference.file_lines(f))
        .collect();
    // After every line but the last, and before every tool result (the tool ran, its result
    // is not recorded).
    let mut points: Vec<(&str, u64)> = (1..ref_lines.len() as u64)
        .map(|n| ("LSM_TEST_CRASH_AFTER_SEQ", n))
        .collect();
    for l in &ref_lines {
        if l["event"] == "tool_result" {
            points.push(("LSM_TEST_CRASH_BEFORE_SEQ", l["seq"].as_u64().unwrap()));
        }
    }
    for (var, n) in &points {
        let ws = Ws::new(script);
        let crashed = ws.start(agent, &[(var, n.to_string())]);
        assert!(
            !crashed.status.success() && crashed.status.code().is_none(),
            "{agent} {var}={n}: the process aborts: {}",
            stderr(&crashed)
        );
        let run_dir = ws.run_dir(agent);
        let run_id = run_dir.file_name().unwrap().to_str().unwrap().to_string();
        let listed = run(ws.cmd().args([
            "runs",
            "list",
            "--agents-folder",
            "Agents",
            "--status",
            "interrupted",
            "--json",
        ]));
        assert_eq!(
            stdout_json(&listed)[0]["run_id"],
            json!(run_id),
            "{agent} {var}={n}: listed as interrupted"
        );
        if *var == "LSM_TEST_CRASH_AFTER_SEQ" && n % 2 == 0 {
            // The resume itself is killed three lines after its `run_resumed`, then resumed.
            let mut c = ws.cmd();
            c.args([
                "runs",
                "resume",
                &run_id,
                "--agents-folder",
                "Agents",
                "--yes",
                "--json",
            ])
            .env(var, (n + 4).to_string());
            let again = run(&mut c);
            let finished = journal(&run_dir)
                .last()
                .is_some_and(|l| l["event"] == "run_finished");
            if finished {
                // The run ended at or before that line: nothing is left to resume.
                continue;
            }
            assert!(again.status.code().is_none(), "{}", stderr(&again));
        }
        let resumed = ws.resume(&run_id, &["--json"]);
        assert_eq!(
            resumed.status.code(),
            Some(0),
            "{agent} {var}={n}: {}",
            stderr(&resumed)
        );
        let summary = stdout_json(&resumed);
        assert_eq!(
            tokens(&summary),
            tokens(&ref_summary),
            "{agent} {var}={n}: token totals"
        );
        assert_eq!(summary["run_id"], json!(run_id));
        let served = ws.served();
        let unique: BTreeSet<u64> = served.iter().copied().collect();
        assert_eq!(
            unique.len(),
            served.len(),
            "{agent} {var}={n}: a script line was served twice: {served:?}"
        );
        assert_eq!(unique.len(), script.len(), "{agent} {var}={n}");
        for (f, max) in side_effect_files.iter().zip(&ref_files) {
            assert!(
                ws.file_lines(f) <= *max,
                "{agent} {var}={n}: {f} was written more than once"
            );
        }
        let lines = journal(&run_dir);
        assert_eq!(lines.last().unwrap()["event"], "run_finished");
        assert_eq!(
            lines
                .iter()
                .filter(|l| l["event"] == "llm_response")
                .count(),
            ref_lines
                .iter()
                .filter(|l| l["event"] == "llm_response")
                .count(),
            "{agent} {var}={n}: every answer recorded once"
        );
    }
    points.len()
}

#[test]
fn crash_matrix_runs_killed_at_every_journal_line_resume_with_nothing_repeated() {
    let general = crash_matrix("general", &general_script(), &["log.txt", "out.txt"]);
    let research = crash_matrix("research", &research_script(), &[]);
    assert!(
        general + research >= 50,
        "{general} + {research} crash points"
    );
}

#[test]
fn a_second_resume_of_a_run_being_resumed_is_refused() {
    let mut script = general_script();
    // The resumed run waits on this answer long enough to be resumed a second time.
    script[1]["delay_ms"] = json!(60_000);
    let ws = Ws::new(&script);
    let crashed = ws.start("general", &[("LSM_TEST_CRASH_AFTER_SEQ", "4".into())]);
    assert!(!crashed.status.success());
    let run_dir = ws.run_dir("general");
    let run_id = run_dir.file_name().unwrap().to_str().unwrap().to_string();
    let mut first = ws
        .cmd()
        .args([
            "runs",
            "resume",
            &run_id,
            "--agents-folder",
            "Agents",
            "--yes",
        ])
        .args(["--output-format", "stream-json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Synchronised on the first resume's own event stream: once it has recorded
    // `run_resumed`, it holds the lock.
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    let resumed = lines
        .by_ref()
        .map(Result::unwrap)
        .find(|l| l.contains("\"run_resumed\""));
    assert!(resumed.is_some(), "the first resume started");
    let listed = run(ws
        .cmd()
        .args(["runs", "list", "--agents-folder", "Agents", "--json"]));
    assert_eq!(stdout_json(&listed)[0]["status"], "running");
    let second = ws.resume(&run_id, &["--json"]);
    assert_eq!(second.status.code(), Some(2), "{}", stderr(&second));
    let err = stderr(&second);
    assert!(
        err.contains("already being driven by process") && err.contains(&first.id().to_string()),
        "{err}"
    );
    first.kill().unwrap();
    first.wait().unwrap();
}

#[test]
fn sigterm_stops_a_run_with_exit_code_4_and_writes_its_summary() {
    // Once the second model call is under way.
    sigterm_stops_the_run_when(|l| l.contains("\"llm_request\"") && l.contains("\"iteration\":2"));
}

#[test]
fn sigterm_at_the_first_event_stops_the_run_too() {
    // The signals are caught before anything is printed: a SIGTERM sent on the first line
    // cannot meet the default action (exit 143, no summary), however busy the machine is.
    sigterm_stops_the_run_when(|_| true);
}

/// Start a run whose second model call never answers, send it SIGTERM on the first line of
/// its event stream that `now` accepts, and check the clean stop: exit code 4, "SIGTERM" on
/// stderr, `run_finished` on the stream and a summary with `stop_requested`.
fn sigterm_stops_the_run_when(now: impl Fn(&str) -> bool) {
    let ws = Ws::new(&[
        call("read_file", json!({"path": "notes.md"})),
        json!({"text": "never", "delay_ms": 60_000}),
    ]);
    let mut child = ws
        .cmd()
        .args([
            "agent",
            "run",
            "general",
            "--task",
            "t",
            "--agents-folder",
            "Agents",
        ])
        .arg("--provider")
        .arg(format!("scripted:{}", ws.script.display()))
        .args(["--output-format", "stream-json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let seen = lines.by_ref().map(Result::unwrap).find(|l| now(l));
    assert!(
        seen.is_some(),
        "the stream ended before the line to stop on"
    );
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("SIGTERM"), "{}", stderr(&out));
    assert!(rest.iter().any(|l| l.contains("\"run_finished\"")));
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(ws.run_dir("general").join("run_summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["run_outcome"], "stop_requested");
}

#[test]
fn stream_json_prints_every_event_as_an_envelope_in_seq_order() {
    let ws = Ws::new(&general_script());
    let mut c = ws.cmd();
    c.args([
        "agent",
        "run",
        "general",
        "--task",
        "t",
        "--agents-folder",
        "Agents",
        "--yes",
    ])
    .arg("--provider")
    .arg(format!("scripted:{}", ws.script.display()))
    .args(["--output-format", "stream-json"]);
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for e in &events {
        for key in ["seq", "ts", "run_id", "schema_version", "event"] {
            assert!(e.get(key).is_some(), "{key} missing in {e}");
        }
    }
    let journaled: Vec<Value> = events.into_iter().filter(|e| e["seq"] != 0).collect();
    let transcript = journal(&ws.run_dir("general"));
    assert_eq!(
        journaled, transcript,
        "the stream is the journal, in seq order"
    );
    let both = run(ws
        .cmd()
        .args(["agent", "run", "general", "--task", "t", "--json"])
        .args(["--output-format", "stream-json"]));
    assert_eq!(both.status.code(), Some(2), "only one of the two");
}

/// A chat-completions server that answers from `answers` in order, counting requests.
struct Answers(Vec<Value>, std::sync::atomic::AtomicUsize);

impl wiremock::Respond for Answers {
    fn respond(&self, _: &wiremock::Request) -> wiremock::ResponseTemplate {
        let n = self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body = self
            .0
            .get(n)
            .cloned()
            .unwrap_or_else(|| self.0[self.0.len() - 1].clone());
        wiremock::ResponseTemplate::new(200).set_body_json(body)
    }
}

fn chat(message: Value, n: u64) -> Value {
    json!({"id": format!("c{n}"), "object": "chat.completion", "model": "m",
           "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 10 * n, "completion_tokens": n, "total_tokens": 11 * n}})
}

/// Requests the server received for a run killed after journal line `crash` and resumed.
async fn http_run(crash: Option<u64>) -> (usize, Value) {
    let server = wiremock::MockServer::start().await;
    let answers = vec![
        chat(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function",
                   "function": {"name": "append_file", "arguments": "{\"path\":\"log.txt\",\"content\":\"x\\n\"}"}}]}),
            1,
        ),
        chat(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "t2", "type": "function",
                   "function": {"name": "read_file", "arguments": "{\"path\":\"log.txt\"}"}}]}),
            2,
        ),
        chat(json!({"role": "assistant", "content": "done"}), 3),
    ];
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Answers(answers, std::sync::atomic::AtomicUsize::new(0)))
        .mount(&server)
        .await;
    let ws = Ws::new(&[]);
    let base = format!("{}/v1", server.uri());
    let mut c = ws.cmd();
    c.env("OPENAI_API_KEY", "sk-test-resume")
        .args([
            "agent",
            "run",
            "general",
            "--task",
            "t",
            "--agents-folder",
            "Agents",
        ])
        .args(["--yes", "--json", "--provider", "openai", "--model", "m"])
        .args(["--base-url", &base]);
    if let Some(n) = crash {
        c.env("LSM_TEST_CRASH_AFTER_SEQ", n.to_string());
    }
    let out = run(&mut c);
    let summary = match crash {
        None => stdout_json(&out),
        Some(_) => {
            assert!(!out.status.success());
            let run_dir = ws.run_dir("general");
            let id = run_dir.file_name().unwrap().to_str().unwrap().to_string();
            let mut c = ws.cmd();
            c.env("OPENAI_API_KEY", "sk-test-resume");
            c.args([
                "runs",
                "resume",
                &id,
                "--agents-folder",
                "Agents",
                "--yes",
                "--json",
            ]);
            let out = run(&mut c);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            stdout_json(&out)
        }
    };
    (server.received_requests().await.unwrap().len(), summary)
}

#[tokio::test(flavor = "multi_thread")]
async fn resuming_a_run_over_http_makes_no_request_twice() {
    let (reference, ref_summary) = http_run(None).await;
    assert_eq!(reference, 3);
    // After the first answer; after the first tool's start; after the second answer.
    for n in [4, 5, 9] {
        let (requests, summary) = http_run(Some(n)).await;
        assert_eq!(requests, reference, "crash after line {n}");
        assert_eq!(
            tokens(&summary),
            tokens(&ref_summary),
            "crash after line {n}"
        );
    }
}

/// A transcript written before typed run events (schema version 1), by hand.
const V1_TRANSCRIPT: &str = r#"{"seq":1,"ts":"2026-11-01T10:00:00.000Z","run_id":"RUNID","event":"phase_start","label":"__default__","mode":"llm","user_message":"append the lines","tool_names":null,"max_iterations":20,"continue_context":true}
{"seq":2,"ts":"2026-11-01T10:00:00.100Z","run_id":"RUNID","event":"llm_request","label":"__default__","iteration":1,"messages":2}
{"seq":3,"ts":"2026-11-01T10:00:01.000Z","run_id":"RUNID","event":"llm_response","label":"__default__","iteration":1,"text":"","tool_calls":1,"tokens_used":12}
{"seq":4,"ts":"2026-11-01T10:00:01.010Z","run_id":"RUNID","event":"tool_call","label":"__default__","tool":"append_file","arguments":{"path":"log.txt","content":"one\n"}}
{"seq":5,"ts":"2026-11-01T10:00:01.020Z","run_id":"RUNID","event":"tool_result","label":"__default__","tool":"append_file","result":"Appended 4 bytes to log.txt"}
"#;

const V1_END: &str = r#"{"seq":6,"ts":"2026-11-01T10:00:02.000Z","run_id":"RUNID","event":"phase_end","label":"__default__","stop_reason":"done","tool_calls":1,"final_text":"done"}
{"seq":7,"ts":"2026-11-01T10:00:02.010Z","run_id":"RUNID","event":"run_end","status":"failed","run_outcome":"error","tokens_used":12}
"#;

/// Write a version 1 run of `general` into `ws`: `end` appends `phase_end` and `run_end`;
/// `summary` writes the `run_summary.json` of that time.
fn v1_run(ws: &Ws, run_id: &str, end: bool, summary: Option<&str>) {
    let dir = ws.path().join("Agents/general/logs").join(run_id);
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = V1_TRANSCRIPT.replace("RUNID", run_id);
    if end {
        text.push_str(&V1_END.replace("RUNID", run_id));
    }
    std::fs::write(dir.join("transcript.jsonl"), text).unwrap();
    if let Some(status) = summary {
        let summary = json!({"run_id": run_id, "agent_name": "general", "topic": "append the lines",
            "status": status, "run_outcome": "done", "started_at": "2026-11-01T10:00:00Z",
            "finished_at": "2026-11-01T10:00:02Z", "duration_seconds": 2.0,
            "provider": "scripted", "model": "scripted", "tools_used": {"append_file": 1},
            "tool_sequence": ["append_file"],
            "token_usage": {"tokens_used": 12, "input_tokens": 10, "output_tokens": 2}});
        std::fs::write(dir.join("run_summary.json"), summary.to_string()).unwrap();
    }
}

#[test]
fn runs_recorded_before_typed_events_are_listed_and_refused_by_resume() {
    let ws = Ws::new(&general_script());
    // One run of this release, interrupted: it stays resumable beside the old ones.
    let crashed = ws.start("general", &[("LSM_TEST_CRASH_AFTER_SEQ", "4".into())]);
    assert!(!crashed.status.success());
    let current = ws.run_dir("general");
    let current = current.file_name().unwrap().to_str().unwrap();
    v1_run(&ws, "20261101_100000_aaaa0001", true, Some("completed"));
    v1_run(&ws, "20261101_100000_aaaa0002", true, None);
    v1_run(&ws, "20261101_100000_aaaa0003", false, None);

    let listed = run(ws
        .cmd()
        .args(["runs", "list", "--agents-folder", "Agents", "--json"]));
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    let rows = stdout_json(&listed);
    let row = |id: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == id)
            .unwrap_or_else(|| panic!("{id} is not listed: {rows:#}"))
            .clone()
    };
    let done = row("20261101_100000_aaaa0001");
    assert_eq!(
        (&done["status"], &done["finished"], &done["topic"]),
        (
            &json!("done"),
            &json!("completed"),
            &json!("append the lines")
        ),
        "from run_summary.json"
    );
    assert_eq!(done["started_at"], "2026-11-01T10:00:00Z");
    assert_eq!(
        row("20261101_100000_aaaa0002")["status"],
        "failed",
        "from run_end"
    );
    assert_eq!(row("20261101_100000_aaaa0003")["status"], "interrupted");
    for id in [
        "20261101_100000_aaaa0001",
        "20261101_100000_aaaa0002",
        "20261101_100000_aaaa0003",
    ] {
        assert_eq!(row(id)["agent"], "general");
        assert_eq!(row(id)["schema_version"], 1);
        assert_eq!(row(id)["resumable"], false, "{id}");
    }
    assert_eq!(row(current)["schema_version"], 2);
    assert_eq!(row(current)["resumable"], true);

    let table = run(ws.cmd().args(["runs", "list", "--agents-folder", "Agents"]));
    assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("20261101_100000_aaaa0003"),
        "the table lists old runs too"
    );

    let refused = ws.resume("20261101_100000_aaaa0003", &["--json"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let err = stderr(&refused);
    assert!(
        err.contains("schema version 1") && err.contains("cannot be resumed"),
        "{err}"
    );
    assert!(
        !ws.path()
            .join("Agents/general/logs/20261101_100000_aaaa0003/run.lock")
            .exists(),
        "an old run is refused before it is touched"
    );
}

/// A second Ctrl-C or SIGTERM does not wait for the step to finish: the process ends at
/// once, killed by that signal (a shell shows 130 or 143), and the run it left is resumed to
/// its end. The step that holds the first stop up is a `pre_tool` hook that runs until `lsm`
/// is gone (it writes to its stdout, a pipe to `lsm`, until that pipe breaks) or its 20 s
/// timeout, the first time it runs; at the resume it allows at once.
fn a_second_signal_quits_at_once(first: &str, second: &str, killed_by: i32) {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::ExitStatusExt;
    let ws = Ws::new(&[call("read_file", json!({"path": "notes.md"})), text("done")]);
    let marks = ws.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let started = marks.join("hook_started");
    let hook = ws.path().join("hold.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ncat >/dev/null\n[ -e '{m}' ] && exit 0\n: > '{m}'\nwhile echo .; do sleep 0.2; done\n",
            m = started.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        ws.path().join("lsm.toml"),
        format!(
            "[sandbox]\nallowed_write_paths = [\"marks\"]\n\n[[hooks.pre_tool]]\ncommand = [{:?}]\ntimeout_seconds = 20\n",
            hook.display().to_string()
        ),
    )
    .unwrap();
    let mut child = ws
        .cmd()
        .args([
            "agent",
            "run",
            "general",
            "--task",
            "t",
            "--agents-folder",
            "Agents",
            "--yes",
            "--json",
        ])
        .arg("--provider")
        .arg(format!("scripted:{}", ws.script.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the hook never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    let kill = |signal: &str| {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .unwrap();
        assert!(status.success());
    };
    kill(first);
    // The second signal is sent once the first was taken (two pending signals of one kind
    // would be one): `lsm` says so on stderr.
    let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
    let said = err
        .by_ref()
        .map(Result::unwrap)
        .find(|l| l.contains("stop requested"));
    assert!(
        said.as_deref()
            .is_some_and(|l| l.contains("again quits at once")),
        "{said:?}"
    );
    kill(second);
    let rest: Vec<String> = err.map(Result::unwrap).collect();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.signal(),
        Some(killed_by),
        "{:?}\n{}",
        out.status,
        rest.join("\n")
    );
    assert!(
        rest.iter().any(|l| l.contains("quitting at once")),
        "{}",
        rest.join("\n")
    );
    // Nothing recorded is lost: the run is resumable and ends as it would have.
    let run_dir = ws.run_dir("general");
    assert!(!run_dir.join("run_summary.json").exists());
    let run_id = run_dir.file_name().unwrap().to_str().unwrap().to_string();
    let resumed = ws.resume(&run_id, &["--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let s = stdout_json(&resumed);
    assert_eq!(s["status"], "completed", "{s}");
    assert_eq!(s["tool_sequence"], json!(["read_file"]), "{s}");
}

#[test]
fn a_second_ctrl_c_quits_at_once_and_the_run_resumes() {
    a_second_signal_quits_at_once("INT", "INT", 2);
}

#[test]
fn a_second_sigterm_quits_at_once_too() {
    a_second_signal_quits_at_once("TERM", "TERM", 15);
}
