//! Black-box tests of the built `lsm` binary: commands, flags, exit codes, JSON output and
//! the files a run leaves on disk.

// Helpers outside #[test] functions may fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use lsm_e2e::{lsm, run, workspace_root};
use serde_json::{Value, json};

/// `lsm agent list` and every agent through `lsm agent run`.
#[path = "e2e/agents_cli.rs"]
mod agents_cli;
/// Every agent in process on the real harness, with test doubles for tools not built yet.
#[path = "e2e/agents_harness.rs"]
mod agents_harness;

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
    // The file the tool wrote, then the answer the agent saved in its own workspace.
    let artifacts = summary["artifacts_created"].as_array().unwrap();
    assert_eq!(artifacts.len(), 2, "{artifacts:?}");
    assert!(
        artifacts[0]
            .as_str()
            .unwrap()
            .ends_with("workspace/summary.md")
    );
    let saved = Path::new(artifacts[1].as_str().unwrap());
    assert_eq!(
        saved.parent().unwrap(),
        dir.path().join("Agents/general/artifacts")
    );
    assert!(
        saved
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("result_")
    );
    assert!(
        std::fs::read_to_string(saved)
            .unwrap()
            .contains("Summarize notes.md into summary.md")
    );

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
        // The run's folder (the agent's own log file sits beside it).
        let started = std::fs::read_dir(&logs)
            .ok()
            .and_then(|d| d.filter_map(Result::ok).find(|e| e.path().is_dir()))
            .and_then(|e| std::fs::read_to_string(e.path().join("transcript.jsonl")).ok());
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

// ---------- persistent memory ----------

/// A workspace whose `lsm.toml` turns memory on (global memory inside the workspace too).
fn memory_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents]\nagents_folder = \"Agents\"\n\n[agents.memory]\nenabled = true\nglobal_db = \"data/global_memory.db\"\n",
    )
    .unwrap();
    dir
}

fn write_script(dir: &Path, name: &str, lines: &[Value]) -> PathBuf {
    let path = dir.join(name);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// `lsm <args>` in `dir`, with the user's data folder inside it too.
fn lsm_in(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = lsm(dir);
    cmd.env("XDG_DATA_HOME", dir.join("xdg")).args(args);
    run(&mut cmd)
}

/// `lsm agent run librarian` (its allowlist has the memory tools) with `--json`.
fn run_with_task(dir: &Path, script: &Path, task: &str, extra: &[&str]) -> Value {
    run_agent_with_task(dir, "librarian", script, task, extra)
}

fn run_agent_with_task(
    dir: &Path,
    agent: &str,
    script: &Path,
    task: &str,
    extra: &[&str],
) -> Value {
    let provider = format!("scripted:{}", script.display());
    let mut args = vec![
        "agent",
        "run",
        agent,
        "--task",
        task,
        "--provider",
        &provider,
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = lsm_in(dir, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    stdout_json(&out)
}

fn transcript_of(dir: &Path, summary: &Value) -> Vec<Value> {
    let path = dir
        .join("Agents")
        .join(summary["agent_name"].as_str().unwrap())
        .join("logs")
        .join(summary["run_id"].as_str().unwrap())
        .join("transcript.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn memory_carries_a_fact_from_one_run_to_the_next_and_lsm_memory_lists_it() {
    let dir = memory_workspace();
    let fact = "The user's favourite colour is teal";

    // Run 1: the model stores the fact; --yes approves the permission request.
    let s1 = write_script(
        dir.path(),
        "run1.jsonl",
        &[
            call(
                "memory_put",
                json!({"text": fact, "tags": ["prefs"], "scope": "project"}),
            ),
            text("Noted."),
        ],
    );
    let first = run_with_task(
        dir.path(),
        &s1,
        "Remember that my favourite colour is teal",
        &["--yes"],
    );
    assert_eq!(
        first["memory"],
        json!({"written": 1, "approved": 1, "removed": 0})
    );
    let events: Vec<String> = transcript_of(dir.path(), &first)
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    let written = events.iter().position(|e| e == "memory_written").unwrap();
    assert_eq!(events[written + 1], "memory_approved");
    assert!(dir.path().join("Agents/project_memory.db").is_file());

    // `lsm memory list` shows it, approved, with the run that wrote it.
    let out = lsm_in(dir.path(), &["memory", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listed = stdout_json(&out);
    let rows = listed.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{listed}");
    assert_eq!(rows[0]["text"], fact);
    assert_eq!(rows[0]["status"], "approved");
    assert_eq!(rows[0]["scope"], "project");
    assert_eq!(rows[0]["owner_agent"], "librarian");
    assert_eq!(rows[0]["tags"], json!(["prefs"]));
    assert_eq!(rows[0]["source_run_id"], first["run_id"]);
    let id = rows[0]["id"].as_str().unwrap().to_string();
    let out = lsm_in(dir.path(), &["memory", "list"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains(&id) && table.contains(fact), "{table}");

    // Run 2: the fact is standing context before the model is called.
    let s2 = write_script(dir.path(), "run2.jsonl", &[text("Teal.")]);
    let second = run_with_task(dir.path(), &s2, "What is my favourite colour?", &[]);
    let transcript = transcript_of(dir.path(), &second);
    let standing = transcript
        .iter()
        .find(|e| e["event"] == "standing_context")
        .unwrap_or_else(|| panic!("no standing context recorded: {transcript:?}"));
    let block = standing["text"].as_str().unwrap();
    assert!(
        block.starts_with("Standing context from persistent memory"),
        "{block}"
    );
    assert!(block.contains(fact), "{block}");
    let request = transcript
        .iter()
        .find(|e| e["event"] == "llm_request")
        .unwrap();
    assert_eq!(request["standing_context"], true);
    let offered: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"memory_put") && offered.contains(&"memory_search"),
        "{offered:?}"
    );
    let seq = |e: &Value| e["seq"].as_u64().unwrap();
    assert!(seq(standing) < seq(request));
    assert_eq!(
        second["memory"],
        json!({"written": 0, "approved": 0, "removed": 0})
    );

    // Search finds it; rm removes it; the next run has no standing context.
    let out = lsm_in(
        dir.path(),
        &["memory", "search", "favourite colours", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)[0]["id"], id.as_str());
    let out = lsm_in(dir.path(), &["memory", "rm", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed"));
    let out = lsm_in(dir.path(), &["memory", "list", "--json"]);
    assert_eq!(stdout_json(&out), json!([]));
    let s3 = write_script(dir.path(), "run3.jsonl", &[text("I do not know.")]);
    let third = run_with_task(dir.path(), &s3, "What is my favourite colour?", &[]);
    assert!(
        !transcript_of(dir.path(), &third)
            .iter()
            .any(|e| e["event"] == "standing_context")
    );
}

#[test]
fn an_unasked_memory_put_is_a_candidate_until_lsm_memory_approve() {
    // Memory on from the environment alone; memory_put configured not to ask anyone.
    let dir = tempfile::tempdir().unwrap();
    let s1 = write_script(
        dir.path(),
        "run1.jsonl",
        &[
            call("memory_put", json!({"text": "Deploys happen on Tuesdays"})),
            text("ok"),
        ],
    );
    let provider = format!("scripted:{}", s1.display());
    let mut cmd = lsm(dir.path());
    cmd.env("XDG_DATA_HOME", dir.path().join("xdg"))
        .env("LSM_AGENTS_MEMORY_ENABLED", "true")
        .env(
            "LSM_SANDBOX_REQUIRE_USER_PERMISSION",
            "{ memory_put = false }",
        )
        .args([
            "agent",
            "run",
            "librarian",
            "--task",
            "note the deploy day",
            "--json",
        ])
        .args(["--provider", &provider, "--agents-folder", "Agents"]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = stdout_json(&out);
    assert_eq!(
        s["memory"],
        json!({"written": 1, "approved": 0, "removed": 0})
    );
    assert!(
        dir.path()
            .join("Agents/librarian/memory/memory.db")
            .is_file()
    );

    let list = |status: &str| {
        let out = lsm_in(
            dir.path(),
            &[
                "memory",
                "list",
                "--agents-folder",
                "Agents",
                "--status",
                status,
                "--json",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout_json(&out)
    };
    let candidates = list("candidate");
    assert_eq!(candidates[0]["scope"], "agent");
    let id = candidates[0]["id"].as_str().unwrap().to_string();
    assert_eq!(list("approved"), json!([]));

    let out = lsm_in(
        dir.path(),
        &[
            "memory",
            "approve",
            &id,
            "--agents-folder",
            "Agents",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let approved = stdout_json(&out);
    assert_eq!(approved["changed"], true);
    assert_eq!(approved["approved"]["status"], "approved");
    assert_eq!(list("approved")[0]["id"], id.as_str());
    let out = lsm_in(
        dir.path(),
        &["memory", "approve", &id, "--agents-folder", "Agents"],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("already approved"));

    // Agent scope: the librarian sees it in its next run.
    let s2 = write_script(dir.path(), "run2.jsonl", &[text("Tuesday.")]);
    let provider = format!("scripted:{}", s2.display());
    let mut cmd = lsm(dir.path());
    cmd.env("XDG_DATA_HOME", dir.path().join("xdg"))
        .env("LSM_AGENTS_MEMORY_ENABLED", "true")
        .args([
            "agent",
            "run",
            "librarian",
            "--task",
            "Which day are deploys?",
            "--json",
        ])
        .args(["--provider", &provider, "--agents-folder", "Agents"]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = stdout_json(&out);
    let transcript = transcript_of(dir.path(), &s);
    let block = transcript
        .iter()
        .find(|e| e["event"] == "standing_context")
        .map(|e| e["text"].as_str().unwrap().to_string())
        .unwrap();
    assert!(
        block.contains("[agent] Deploys happen on Tuesdays"),
        "{block}"
    );
}

#[test]
fn memory_is_off_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        "s.jsonl",
        &[
            call("memory_put", json!({"text": "should not be stored"})),
            text("ok"),
        ],
    );
    let s = run_agent_with_task(
        dir.path(),
        "librarian",
        &script,
        "remember this",
        &["--yes", "--agents-folder", "Agents"],
    );
    assert_eq!(
        s["memory"],
        json!({"written": 0, "approved": 0, "removed": 0})
    );
    let transcript = transcript_of(dir.path(), &s);
    let request = transcript
        .iter()
        .find(|e| e["event"] == "llm_request")
        .unwrap();
    assert!(
        !request["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("memory_put")),
        "memory tools are not offered when memory is off"
    );
    assert_eq!(request["standing_context"], false);
    assert!(!dir.path().join("Agents/project_memory.db").exists());
    assert!(
        !dir.path()
            .join("Agents/librarian/memory/memory.db")
            .exists()
    );
}

#[test]
fn the_assistant_remembers_across_runs() {
    let dir = memory_workspace();
    let fact = "The user prefers answers in French";
    // Run 1: RECALL finds nothing, RESPOND answers, REMEMBER stores the preference.
    let s1 = write_script(
        dir.path(),
        "a1.jsonl",
        &[
            call("memory_search", json!({"query": "language preference"})),
            text("nothing relevant"),
            text("D'accord, je répondrai en français."),
            call("memory_put", json!({"text": fact, "scope": "agent"})),
            text("Stored one preference."),
        ],
    );
    let first = run_agent_with_task(
        dir.path(),
        "assistant",
        &s1,
        "Please answer in French from now on",
        &["--yes"],
    );
    assert_eq!(first["status"], "completed", "{first}");
    assert_eq!(first["memory"]["written"], 1, "{first}");
    assert_eq!(first["memory"]["approved"], 1, "{first}");

    let out = lsm_in(
        dir.path(),
        &["memory", "list", "--agent", "assistant", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows = stdout_json(&out);
    assert_eq!(rows[0]["text"], fact, "{rows}");
    assert_eq!(rows[0]["owner_agent"], "assistant");

    // Run 2: the preference is standing context from the first call on.
    let s2 = write_script(
        dir.path(),
        "a2.jsonl",
        &[
            text("The user prefers French."),
            text("Bonjour !"),
            text("NONE"),
        ],
    );
    let second = run_agent_with_task(
        dir.path(),
        "assistant",
        &s2,
        "Which language should your answers use?",
        &[],
    );
    assert_eq!(second["status"], "completed", "{second}");
    let transcript = transcript_of(dir.path(), &second);
    let block = transcript
        .iter()
        .find(|e| e["event"] == "standing_context")
        .and_then(|e| e["text"].as_str())
        .unwrap_or_else(|| panic!("no standing context in run 2: {transcript:?}"));
    assert!(block.contains(fact), "{block}");
    let first_request = transcript
        .iter()
        .find(|e| e["event"] == "llm_request")
        .unwrap();
    assert_eq!(first_request["standing_context"], true);
}

#[test]
fn lsm_memory_errors_have_clear_messages_and_exit_codes() {
    let dir = memory_workspace();
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["memory", "approve", "m-0000000000000000"],
            1,
            "no memory with id 'm-0000000000000000'",
        ),
        (vec!["memory", "rm", "m-nope"], 1, "no memory with id"),
        (
            vec!["memory", "list", "--scope", "universe"],
            2,
            "unknown scope 'universe'",
        ),
        (
            vec!["memory", "list", "--agent", "../etc"],
            2,
            "not an agent name",
        ),
        (
            vec!["memory", "search", " "],
            2,
            "give the text to search for",
        ),
        (
            vec!["memory", "search", "x", "--tag", "two words"],
            2,
            "tag 'two words'",
        ),
        (vec!["memory"], 2, "Usage"),
    ];
    for (args, code, needle) in cases {
        let out = lsm_in(dir.path(), &args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents.memory]\nenabeld = true\n",
    )
    .unwrap();
    let out = lsm_in(dir.path(), &["memory", "list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("enabeld"), "{}", stderr(&out));
    // An empty store lists nothing and creates nothing.
    std::fs::remove_file(dir.path().join("lsm.toml")).unwrap();
    let out = lsm_in(dir.path(), &["memory", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no memories"));
    assert!(!dir.path().join("Agents").exists());
}

#[test]
fn tools_list_includes_the_memory_tools_and_their_permission_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(lsm(dir.path()).args(["tools", "list", "--json"]));
    assert!(out.status.success());
    let rows = stdout_json(&out);
    let find = |name: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {rows}"))
            .clone()
    };
    assert_eq!(find("memory_put")["needs_permission"], true);
    assert_eq!(find("memory_remove")["needs_permission"], true);
    assert_eq!(find("memory_search")["risk"], "read_only");
    assert!(
        !dir.path().join("Agents").exists(),
        "listing opens no database"
    );
}
