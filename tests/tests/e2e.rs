//! Black-box tests of the built `lsm` binary: commands, flags, exit codes, JSON output and
//! the files a run leaves on disk.

// Helpers outside #[test] functions may fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use lsm_e2e::{lsm, run, workspace_root};
use serde_json::{Value, json};

/// A temp workspace holding a copy of `examples/file-task`.
fn example_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace_root().join("examples/file-task"), dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A workspace with `notes.md` and a script made of `lines`.
fn workspace_with_script(lines: &[Value]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "hello notes\n").unwrap();
    let script = dir.path().join("script.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&script, text).unwrap();
    (dir, script)
}

fn stdout_json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn agent_run(cwd: &Path, script: &Path, extra: &[&str]) -> std::process::Output {
    let mut cmd = lsm(cwd);
    cmd.args([
        "agent",
        "run",
        "general",
        "--task",
        "work on the notes",
        "--provider",
    ])
    .arg(format!("scripted:{}", script.display()))
    .args(["--agents-folder", "Agents", "--json"])
    .args(extra);
    run(&mut cmd)
}

fn text(s: &str) -> Value {
    json!({"text": s, "usage": {"input_tokens": 10, "output_tokens": 5}})
}

fn call(name: &str, args: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": args}], "usage": {"input_tokens": 10, "output_tokens": 5}})
}

// ---------- help, version, tools ----------

#[test]
fn help_and_version() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(lsm(dir.path()).arg("--help"));
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("agent") && help.contains("tools"), "{help}");
    let out = run(lsm(dir.path()).arg("--version"));
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("lsm "));
}

#[test]
fn tools_list_shows_every_builtin_with_its_risk() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(lsm(dir.path()).args(["tools", "list"]));
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    for name in [
        "read_file",
        "read_folder",
        "write_file",
        "append_file",
        "create_folder",
        "edit_file",
        "find_file",
        "file_metadata",
        "hash_file",
        "bash",
    ] {
        assert!(table.contains(name), "{name} missing:\n{table}");
    }
    let out = run(lsm(dir.path()).args(["tools", "list", "--json"]));
    let rows = stdout_json(&out);
    let bash = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "bash")
        .unwrap();
    assert_eq!(bash["risk"], "exec");
    let read = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "read_file")
        .unwrap();
    assert_eq!(read["risk"], "read_only");
}

// ---------- the bundled example ----------

#[test]
fn the_bundled_example_reads_and_writes_in_its_workspace() {
    let dir = example_copy();
    let config = dir.path().join("lsm.toml");
    let mut cmd = lsm(dir.path());
    cmd.args(["agent", "run", "general", "--json", "--config"])
        .arg(&config)
        .args(["--task", "Summarize notes.md into summary.md"]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["run_outcome"], "done");
    assert_eq!(summary["tool_sequence"], json!(["read_file", "write_file"]));
    assert_eq!(summary["token_usage"]["tokens_used"], 1180);
    let written = dir.path().join("workspace/summary.md");
    assert!(
        std::fs::read_to_string(&written)
            .unwrap()
            .contains("Three rules")
    );
    let artifacts = summary["artifacts_created"].as_array().unwrap();
    assert_eq!(artifacts.len(), 1);
    assert!(artifacts[0].as_str().unwrap().ends_with("summary.md"));

    // The records on disk agree with stdout.
    let run_dir = dir
        .path()
        .join("Agents/general/logs")
        .join(summary["run_id"].as_str().unwrap());
    let on_disk: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("run_summary.json")).unwrap()).unwrap();
    assert_eq!(on_disk, summary);
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    let events: Vec<String> = transcript
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(events.first().map(String::as_str), Some("phase_start"));
    assert_eq!(events.last().map(String::as_str), Some("run_end"));
    assert_eq!(events.iter().filter(|e| *e == "tool_result").count(), 2);
}

#[test]
fn human_output_streams_progress_and_names_the_records() {
    let dir = example_copy();
    let mut cmd = lsm(dir.path());
    cmd.args(["agent", "run", "general", "--config", "lsm.toml"])
        .args(["--task", "Summarize notes.md into summary.md"]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("-> read_file") && err.contains("<- write_file"),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("summary: ") && stdout.contains("run_summary.json"),
        "{stdout}"
    );
    assert!(stdout.contains("artifact: "), "{stdout}");
}

// ---------- exit codes ----------

#[test]
fn exit_code_3_when_the_budget_runs_out() {
    let (dir, script) = workspace_with_script(&[
        json!({"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.md"}}],
               "usage": {"input_tokens": 80, "output_tokens": 40}}),
        text("never reached"),
    ]);
    let out = agent_run(dir.path(), &script, &["--max-tokens-budget", "100"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let s = stdout_json(&out);
    assert_eq!(s["run_outcome"], "budget_exhausted");
    assert_eq!(s["token_usage"]["iterations"], 1);
}

#[test]
fn exit_code_6_at_the_iteration_limit() {
    let lines: Vec<Value> = (0..5)
        .map(|_| call("read_file", json!({"path": "notes.md"})))
        .collect();
    let (dir, script) = workspace_with_script(&lines);
    let out = agent_run(dir.path(), &script, &["--max-iterations", "2"]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let s = stdout_json(&out);
    assert_eq!(s["run_outcome"], "max_iterations");
    assert_eq!(s["token_usage"]["iterations"], 2);
}

#[test]
fn exit_code_5_when_the_model_blocks() {
    let (dir, script) =
        workspace_with_script(&[call("block", json!({"reason": "no such dataset"}))]);
    let out = agent_run(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["run_outcome"], "blocked");
}

#[test]
fn exit_code_1_when_the_script_runs_out_and_records_are_still_written() {
    let (dir, script) = workspace_with_script(&[call("read_file", json!({"path": "notes.md"}))]);
    let out = agent_run(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let s = stdout_json(&out);
    assert_eq!(s["status"], "failed");
    assert!(s["error"].as_str().unwrap().contains("no response left"));
    let run_dir = dir
        .path()
        .join("Agents/general/logs")
        .join(s["run_id"].as_str().unwrap());
    assert!(run_dir.join("run_summary.json").is_file());
    assert!(run_dir.join("transcript.jsonl").is_file());
}

#[test]
fn a_malformed_script_line_is_an_error_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.jsonl");
    std::fs::write(&script, "{\"text\": \"fine\", \"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}]}\n{not json\n").unwrap();
    let out = agent_run(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stdout_json(&out)["error"].as_str().unwrap().to_string();
    assert!(err.contains("line 2"), "{err}");
}

#[test]
fn exit_code_2_for_usage_and_config_errors_with_clear_messages() {
    let (dir, script) = workspace_with_script(&[text("x")]);
    let provider = format!("scripted:{}", script.display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "agent",
                "run",
                "nosuch",
                "--task",
                "x",
                "--provider",
                &provider,
            ],
            "unknown agent 'nosuch'",
        ),
        (
            vec!["agent", "run", "general", "--provider", &provider],
            "--task",
        ),
        (
            vec!["agent", "run", "general", "--task", "x"],
            "no LLM provider configured",
        ),
        (
            vec![
                "agent",
                "run",
                "general",
                "--task",
                "x",
                "--provider",
                "martian",
            ],
            "unknown provider",
        ),
        (
            vec![
                "agent",
                "run",
                "general",
                "--task",
                "x",
                "--provider",
                "scripted:/no/such.jsonl",
            ],
            "/no/such.jsonl",
        ),
        (
            vec![
                "agent",
                "run",
                "general",
                "--task",
                "x",
                "--max-iterations",
                "lots",
            ],
            "invalid value",
        ),
        (vec!["no-such-command"], "unrecognized subcommand"),
        (
            vec![
                "agent",
                "run",
                "general",
                "--task",
                "x",
                "--config",
                "/no/lsm.toml",
            ],
            "does not exist",
        ),
    ];
    for (args, needle) in cases {
        let out = run(lsm(dir.path()).args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents]\nmax_token_budget = 5\n",
    )
    .unwrap();
    let out = run(lsm(dir.path()).args([
        "agent",
        "run",
        "general",
        "--task",
        "x",
        "--provider",
        &provider,
    ]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("max_token_budget"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn env_overrides_reach_the_run() {
    let (dir, script) = workspace_with_script(&[text("x")]);
    let mut cmd = lsm(dir.path());
    cmd.env("LSM_AGENTS_MAX_TOKENS_BUDGET", "777");
    cmd.args([
        "agent",
        "run",
        "general",
        "--task",
        "t",
        "--json",
        "--provider",
    ])
    .arg(format!("scripted:{}", script.display()));
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["token_usage"]["max_tokens_budget"], 777);
}

#[test]
fn an_unwritable_agents_folder_exits_1_with_a_clear_message() {
    let (dir, script) = workspace_with_script(&[text("x")]);
    std::fs::write(dir.path().join("blocker"), "a file, not a folder").unwrap();
    let mut cmd = lsm(dir.path());
    cmd.args([
        "agent",
        "run",
        "general",
        "--task",
        "t",
        "--agents-folder",
        "blocker",
        "--provider",
    ])
    .arg(format!("scripted:{}", script.display()));
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot create the run's log folder"),
        "{}",
        stderr(&out)
    );
}

// ---------- the sandbox from the outside ----------

#[test]
fn escapes_and_denials_go_back_to_the_model_and_the_run_completes() {
    let (dir, script) = workspace_with_script(&[
        call("read_file", json!({"path": "../../../../etc/passwd"})),
        call("read_file", json!({"path": "/etc/passwd"})),
        call("write_file", json!({"path": "out.md", "content": "x"})),
        call("bash", json!({"command": "ls; rm -rf /"})),
        call("read_file", json!({"path": "notes.md", "bogus": 1})),
        text("gave up politely"),
    ]);
    let out = agent_run(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = stdout_json(&out);
    assert_eq!(s["run_outcome"], "done");
    // write_file and bash need a person; nobody was there: denied.
    assert!(
        s["approvals_denials"]["denials"].as_u64().unwrap() >= 4,
        "{s}"
    );
    assert!(!dir.path().join("out.md").exists());
    let run_dir = dir
        .path()
        .join("Agents/general/logs")
        .join(s["run_id"].as_str().unwrap());
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    assert!(
        !transcript.contains("root:x:0:0"),
        "no secret file content leaked"
    );
}

#[test]
fn yes_approves_permission_requests_and_says_so() {
    let (dir, script) = workspace_with_script(&[
        call(
            "write_file",
            json!({"path": "out.md", "content": "written"}),
        ),
        text("ok"),
    ]);
    let out = agent_run(dir.path(), &script, &["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.md")).unwrap(),
        "written"
    );
    let s = stdout_json(&out);
    assert_eq!(s["approvals_denials"]["approvals"], 1);
    let reason = s["approvals_denials"]["events"][0]["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("--yes"), "{reason}");
}

#[test]
fn sigint_stops_a_run_with_exit_code_4() {
    // The second model call takes 60 s: the run is interrupted while waiting on it.
    let (dir, script) = workspace_with_script(&[
        call("read_file", json!({"path": "notes.md"})),
        json!({"text": "never", "delay_ms": 60000}),
    ]);
    let mut cmd = lsm(dir.path());
    cmd.args([
        "agent",
        "run",
        "general",
        "--task",
        "t",
        "--json",
        "--provider",
    ])
    .arg(format!("scripted:{}", script.display()))
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    // Wait until the second LLM call is under way, then interrupt.
    let logs = dir.path().join("Agents/general/logs");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let started = std::fs::read_dir(&logs)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| std::fs::read_to_string(e.ok()?.path().join("transcript.jsonl")).ok());
        if started.is_some_and(|t| t.matches("\"llm_request\"").count() == 2) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never reached its second LLM call"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}\n{}",
        stderr(&out),
        String::from_utf8_lossy(&out.stdout)
    );
    let s = stdout_json(&out);
    assert_eq!(s["run_outcome"], "stop_requested");
    assert_eq!(s["status"], "stopped");
    assert_eq!(
        s["tool_sequence"],
        json!(["read_file"]),
        "work before the stop is recorded"
    );
}

// ---------- the knowledge base ----------

/// A scratch copy of `tests/fixtures/kb` (notes, `lsm.toml`, an answer script).
fn kb_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace_root().join("tests/fixtures/kb"), dir.path());
    dir
}

/// Replace what differs between runs (the temp folder, timings, generated ids) so a
/// snapshot holds only what the code decides.
fn normalized(mut v: Value, dir: &Path) -> Value {
    fn walk(v: &mut Value, dir: &str, key: &str) {
        match v {
            Value::String(s) => {
                if matches!(key, "chunk_id" | "conversation_id") {
                    *s = format!("<{key}>");
                } else if s.contains(dir) {
                    *s = s.replace(dir, "<DIR>");
                }
            }
            Value::Number(_) if matches!(key, "ms" | "total_ms" | "seconds" | "index_bytes") => {
                *v = json!(0);
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, dir, key)),
            Value::Object(map) => {
                let chunk_ids: Vec<String> = if key == "source_labels" {
                    map.keys().cloned().collect()
                } else {
                    Vec::new()
                };
                for (k, x) in map.iter_mut() {
                    let k = if chunk_ids.is_empty() {
                        k.as_str()
                    } else {
                        "chunk_id"
                    };
                    walk(x, dir, k);
                }
            }
            _ => {}
        }
    }
    let dir = dir.canonicalize().unwrap().display().to_string();
    walk(&mut v, &dir, "");
    v
}

#[test]
fn golden_ingest_then_query_json_with_a_scripted_llm() {
    let dir = kb_fixture();
    let out = run(lsm(dir.path()).args(["ingest", "notes", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = normalized(stdout_json(&out), dir.path());
    insta::assert_json_snapshot!("kb_ingest_report", report);

    let out = run(lsm(dir.path()).args([
        "query",
        "What is flutter?",
        "--provider",
        "scripted:answer.jsonl",
        "--filter",
        "path_contains=aero",
        "--k",
        "2",
        "--json",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let response = normalized(stdout_json(&out), dir.path());
    insta::assert_json_snapshot!("kb_query_response", response);
    // The invalid citation is gone from the answer and reported.
    assert_eq!(response["invalid_citations"], json!(["S7"]));
    assert!(!response["answer"].as_str().unwrap().contains("S7"));
}

#[test]
fn ingest_is_incremental_and_kb_stats_and_rm_report_the_index() {
    let dir = kb_fixture();
    assert_eq!(
        run(lsm(dir.path()).args(["ingest", "notes"])).status.code(),
        Some(0)
    );
    let again = run(lsm(dir.path()).args(["ingest", "notes", "--json"]));
    let r = stdout_json(&again);
    assert_eq!(
        (r["indexed"].as_u64(), r["skipped"].as_u64()),
        (Some(0), Some(3))
    );
    std::fs::remove_file(dir.path().join("notes/kitchen/bread.md")).unwrap();
    let r = stdout_json(&run(lsm(dir.path()).args(["ingest", "notes", "--json"])));
    assert_eq!(r["removed"], 1);

    let stats = stdout_json(&run(lsm(dir.path()).args(["kb", "stats", "--json"])));
    assert_eq!(
        (stats["files"].as_u64(), stats["embedder"].as_str()),
        (Some(2), Some("none"))
    );
    let human = run(lsm(dir.path()).args(["kb", "stats"]));
    assert!(String::from_utf8_lossy(&human.stdout).contains("files:    2"));

    let rm = stdout_json(&run(lsm(dir.path()).args([
        "kb",
        "rm",
        "notes/aero",
        "--json",
    ])));
    assert_eq!(rm["removed"].as_array().unwrap().len(), 2);
    let stats = stdout_json(&run(lsm(dir.path()).args(["kb", "stats", "--json"])));
    assert_eq!(stats["files"], 0);
}

#[test]
fn query_without_an_index_or_with_bad_filters_is_a_usage_error() {
    let dir = kb_fixture();
    let out = run(lsm(dir.path()).args(["query", "flutter"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("lsm ingest"), "{}", stderr(&out));
    assert_eq!(
        run(lsm(dir.path()).args(["ingest", "notes"])).status.code(),
        Some(0)
    );
    let out = run(lsm(dir.path()).args(["query", "flutter", "--filter", "colour=red"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("path_contains"), "{}", stderr(&out));
    let out = run(lsm(dir.path()).args(["query", "flutter", "--mode", "nope"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown mode"), "{}", stderr(&out));
    // Without a provider the answer lists the closest excerpts.
    let out = run(lsm(dir.path()).args(["query", "aeroelastic flutter oscillation"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("No LLM provider") && text.contains("[S1]"),
        "{text}"
    );
}

#[test]
fn an_agent_asks_the_knowledge_base_through_query_and_synthesize() {
    let dir = kb_fixture();
    assert_eq!(
        run(lsm(dir.path()).args(["ingest", "notes"])).status.code(),
        Some(0)
    );
    // The same scripted provider serves the agent and the tool's synthesis, in call order.
    let script = [
        call(
            "query_and_synthesize",
            json!({"query": "What is flutter?", "mode": "grounded"}),
        ),
        json!({"text": "An aeroelastic instability [S1].", "response_id": "kb-1",
               "usage": {"input_tokens": 700, "output_tokens": 50}}),
        call(
            "query_and_synthesize",
            json!({"query": "flutter", "mode": {"remote_policy": {"enabled": true}}}),
        ),
        text("Flutter is an aeroelastic instability."),
    ];
    let lines: String = script.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("agent.jsonl"), lines).unwrap();
    let out = agent_run(dir.path(), &dir.path().join("agent.jsonl"), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["tools_used"]["query_and_synthesize"], 2);
    // The tool's own LLM call counts against the run's budget: 3 agent calls of 15 + 750.
    assert_eq!(summary["token_usage"]["tokens_used"], 795, "{summary}");
    assert_eq!(summary["approvals_denials"]["denials"], 1, "{summary}");
    let reason = summary["approvals_denials"]["events"][0]["reason"]
        .as_str()
        .unwrap();
    assert!(reason.contains("allow_url_access"), "{reason}");
    let run_dir = dir.path().join("Agents/general/logs");
    let run_dir = std::fs::read_dir(run_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    let first_result = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "tool_result")
        .unwrap();
    let resp: Value = serde_json::from_str(first_result["result"].as_str().unwrap()).unwrap();
    assert_eq!(resp["answer"], "An aeroelastic instability [S1].");
    assert!(
        resp["citations"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("wings.md")
    );
}
