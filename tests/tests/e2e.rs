//! Black-box tests of the built `lsm` binary: commands, flags, exit codes, JSON output and
//! the files a run leaves on disk.

// Helpers outside #[test] functions may fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use lsm_e2e::{lsm, run, workspace_root};
use lsm_test_support::script::{call, text};
use serde_json::{Value, json};

/// The `coder` preset: a shell inside the OS sandbox on a small project.
#[path = "e2e/coding.rs"]
mod coding;

/// `lsm agent list` and every agent through `lsm agent run`.
#[path = "e2e/agents_cli.rs"]
mod agents_cli;
/// Every agent in process on the real harness, with the real knowledge-base and memory tools.
#[path = "e2e/agents_harness.rs"]
mod agents_harness;
/// Context compaction through `lsm agent run`.
#[path = "e2e/compaction.rs"]
mod compaction;
/// The conductor and its workers through `lsm agent run conductor`.
#[path = "e2e/conductor.rs"]
mod conductor;
/// Configuration layers, `lsm config show`, `lsm init`.
#[path = "e2e/config.rs"]
mod config;
/// Project instructions, the environment block and nested guidance through `lsm agent run`.
#[path = "e2e/context.rs"]
mod context;
/// Stall detection and hooks through `lsm agent run`.
#[path = "e2e/control.rs"]
mod control;
/// Deferred tools: a run waits for a call handled outside lsm, exit code 10, and resumes.
#[path = "e2e/deferred.rs"]
mod deferred;
/// Agent definition files: list, show, check, run, override.
#[path = "e2e/definitions.rs"]
mod definitions;
/// `lsm mcp list` and runs using an MCP server's tools.
#[path = "e2e/mcp.rs"]
mod mcp;
/// `lsm mcp serve` answered by independent MCP clients (Python's `mcp`), stdio and HTTP.
#[path = "e2e/mcp_serve.rs"]
mod mcp_serve;
/// `--output-format` on every command that runs something.
#[path = "e2e/output.rs"]
mod output;
/// The paths `lsm` prints, in folders whose names look random.
#[path = "e2e/printed_paths.rs"]
mod printed_paths;
/// Progress on stderr: retries, labels, errors.
#[path = "e2e/progress.rs"]
mod progress;
/// Crash and resume, the run lock, SIGTERM, `--output-format stream-json`.
#[path = "e2e/resume.rs"]
mod resume;
/// Runs killed with SIGKILL at random points of their event stream, then resumed.
#[path = "e2e/resume_sigkill.rs"]
mod resume_sigkill;
/// `lsm agent run-many`: several runs of one agent at once through the runtime manager.
#[path = "e2e/run_many.rs"]
mod run_many;
/// `lsm runs show` on the file store.
#[path = "e2e/runs_show.rs"]
mod runs_show;
/// `--max-wall-seconds`: a run out of time pauses with exit code 9 and resumes.
#[path = "e2e/wall_time.rs"]
mod wall_time;
/// Runs on PostgreSQL: workers, a killed worker's runs, cancel, follow, a database restart.
#[path = "e2e/workers_pg.rs"]
mod workers_pg;

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
    let provider = format!("scripted:{}", script.display());
    run(lsm_e2e::general_run(cwd, "work on the notes", &provider)
        .args(["--agents-folder", "Agents", "--json"])
        .args(extra))
}

// ---------- help, version, tools ----------

#[test]
fn help_and_version() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(lsm(dir.path()).arg("--help"));
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("agent") && help.contains("tools"), "{help}");
    // It opens with what lsm is for, then three examples, before the usage line.
    assert!(help.starts_with("lsm runs LLM agents"), "{help}");
    let (head, _) = help.split_once("Usage:").unwrap();
    let examples = head.split_once("Examples:").unwrap().1;
    assert_eq!(
        examples
            .lines()
            .filter(|l| l.trim_start().starts_with("lsm "))
            .count(),
        3,
        "{head}"
    );
    assert!(
        !help.contains("composition root") && !help.contains("wiring"),
        "{help}"
    );
    let out = run(lsm(dir.path()).arg("--version"));
    assert!(out.status.success());
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(version.starts_with("lsm "), "{version}");
    // The commit it was built from (this checkout is a git repository).
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(workspace_root())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    assert!(version.contains("(commit "), "{version}");
    if !commit.is_empty() {
        // A binary from an older commit of this branch still has a 12-hex-digit hash.
        let shown = version
            .split("(commit ")
            .nth(1)
            .unwrap()
            .trim_end()
            .trim_end_matches(')');
        assert!(
            shown.len() == 12 && shown.chars().all(|c| c.is_ascii_hexdigit()),
            "{version}"
        );
    }
}

#[test]
fn completions_for_each_shell_and_man_pages() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef lsm"),
        ("fish", "complete -c lsm"),
        ("elvish", "lsm"),
        ("powershell", "lsm"),
    ] {
        let out = run(lsm(dir.path()).args(["completions", shell]));
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("agent"), "{shell}");
    }
    let out = run(lsm(dir.path()).args(["completions", "tcsh"]));
    assert_eq!(out.status.code(), Some(2));
    // The man pages `cargo xtask man` writes: lsm.1 and one per subcommand.
    let out = run(lsm(dir.path()).args(["man", "--out", "pages"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let page = std::fs::read_to_string(dir.path().join("pages/lsm.1")).unwrap();
    assert!(
        page.contains(".TH") && page.contains("lsm runs LLM agents"),
        "{page}"
    );
    assert!(dir.path().join("pages/lsm-agent-run.1").is_file());
    assert!(
        !dir.path().join("pages/lsm-man.1").exists(),
        "the hidden command has no page"
    );
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
    // The description column lines up, however long a risk label is.
    let column = table.lines().next().unwrap().find("DESCRIPTION").unwrap();
    for (name, start) in [
        ("bash", "Run one program"),
        ("read_file", "Read a text file"),
    ] {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap();
        assert_eq!(line.find(start), Some(column), "{line}");
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
fn lsm_log_sets_the_log_filter_and_a_pipe_gets_no_colour_codes() {
    let dir = example_copy();
    let config = dir.path().join("lsm.toml");
    let mut cmd = lsm(dir.path());
    cmd.env("LSM_LOG", "debug")
        .args(["agent", "run", "general", "--json", "--config"])
        .arg(&config)
        .args(["--task", "Summarize notes.md into summary.md"]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("DEBUG"),
        "LSM_LOG=debug shows debug lines:\n{err}"
    );
    assert!(!err.contains('\u{1b}'), "no ANSI codes on a pipe:\n{err}");
}

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
    assert_eq!(events.first().map(String::as_str), Some("run_started"));
    // The run's standing context (the environment block; the project has no AGENTS.md), then
    // the first phase.
    assert_eq!(
        events.get(1).map(String::as_str),
        Some("environment_context")
    );
    assert_eq!(events.get(2).map(String::as_str), Some("phase_started"));
    assert_eq!(events.last().map(String::as_str), Some("run_finished"));
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
    let mut cases: Vec<(Vec<&str>, &str)> = vec![
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
    // A limit of zero, by flag or setting, would start a run that can do nothing.
    let zero_limits = [
        (["--max-iterations", "0"], "'0' for '--max-iterations <N>'"),
        (
            ["--max-tokens-budget", "0"],
            "'0' for '--max-tokens-budget <N>'",
        ),
        (
            ["-c", "agents.max_iterations=0"],
            "[agents] max_iterations must be at least 1",
        ),
    ];
    for (extra, needle) in zero_limits {
        let mut args = vec!["agent", "run", "general", "--task", "x", "--provider"];
        args.push(&provider);
        args.extend(extra);
        cases.push((args, needle));
    }
    cases.push((
        vec![
            "agent",
            "run-many",
            "general",
            "--task",
            "x",
            "--max-tokens-budget",
            "0",
        ],
        "'0' for '--max-tokens-budget <N>'",
    ));
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
fn bash_is_offered_only_when_allowed_and_the_kernel_confines_it() {
    let script_lines = [
        call("bash", json!({"command": "cat notes.md"})),
        call("bash", json!({"command": "cat /etc/passwd"})),
        text("done"),
    ];
    // Not on general's allowlist: refused before the sandbox.
    let (dir, script) = workspace_with_script(&script_lines);
    let out = agent_run(dir.path(), &script, &["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let transcript = transcript_text(dir.path(), &stdout_json(&out));
    assert!(
        transcript.contains("is not allowed for this harness run"),
        "{transcript}"
    );
    assert!(!transcript.contains("hello notes"), "{transcript}");

    // Offered with --allow-tool: runs inside the roots, refused outside them.
    let (dir, script) = workspace_with_script(&script_lines);
    let out = agent_run(dir.path(), &script, &["--yes", "--allow-tool", "bash"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let transcript = transcript_text(dir.path(), &stdout_json(&out));
    assert!(transcript.contains("hello notes"), "{transcript}");
    assert!(!transcript.contains("root:x:0:0"), "{transcript}");

    // The same through [agents.extra_tools]; `lsm tools list` says so.
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents.extra_tools]\ngeneral = [\"bash\"]\n",
    )
    .unwrap();
    let out = run(lsm(dir.path()).args(["tools", "list", "--json"]));
    assert_eq!(
        tool_row(&stdout_json(&out), "bash")["agents"],
        json!(["general"])
    );

    let out = agent_run(dir.path(), &script, &["--allow-tool", "no_such_tool"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--allow-tool no_such_tool"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_named_pipe_never_hangs_a_run() {
    // Before: opening a FIFO blocked a thread of tokio's blocking pool for good; the tool
    // timed out, but the process never exited.
    let (dir, script) = workspace_with_script(&[
        call("read_file", json!({"path": "pipe"})),
        call("hash_file", json!({"path": "pipe"})),
        call("write_file", json!({"path": "pipe", "content": "x"})),
        call("append_file", json!({"path": "pipe", "content": "x"})),
        call(
            "edit_file",
            json!({"path": "pipe", "start_line": 1, "end_line": 1, "new_text": "b"}),
        ),
        text("done"),
    ]);
    let status = std::process::Command::new("mkfifo")
        .arg(dir.path().join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let out = agent_run(dir.path(), &script, &["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "done");
    let refusals = transcript_of(dir.path(), &summary)
        .into_iter()
        .filter(|e| e["event"] == "tool_result" || e["event"] == "tool_denied")
        .filter(|e| e.to_string().contains("named pipe"))
        .count();
    assert_eq!(refusals, 5, "every tool refuses the pipe");
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

/// With the default layout the working directory is the sandbox root, so `lsm.toml` and the
/// agents folder lie inside it: even with `--yes` a run must not change them (it could widen
/// the next run's sandbox or rewrite earlier runs' records).
#[test]
fn a_run_cannot_change_lsm_toml_or_the_agents_folder_even_with_yes() {
    let (dir, script) = workspace_with_script(&[
        call(
            "edit_file",
            json!({"path": "lsm.toml", "start_line": 1, "end_line": 1,
                   "new_text": "[sandbox]\nallowed_read_paths = [\"/\"]"}),
        ),
        call(
            "write_file",
            json!({"path": "Agents/general/planted.md", "content": "x"}),
        ),
        text("tried"),
    ]);
    let config = "[sandbox]\ntimeout_seconds = 30\n";
    std::fs::write(dir.path().join("lsm.toml"), config).unwrap();
    let out = agent_run(dir.path(), &script, &["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("lsm.toml")).unwrap(),
        config
    );
    assert!(!dir.path().join("Agents/general/planted.md").exists());
    let s = stdout_json(&out);
    let run_dir = dir
        .path()
        .join("Agents/general/logs")
        .join(s["run_id"].as_str().unwrap());
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    let refusals = transcript
        .lines()
        .filter(|l| {
            l.contains(
                "is protected: lsm's own configuration and run records cannot be changed by tools",
            )
        })
        .count();
    assert!(
        refusals >= 2,
        "both writes refused as protected:\n{transcript}"
    );
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
    let logs = dir.path().join(".lsm/agents/general/logs");
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
    // The signals are caught from the start: no pause is needed before this one.
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
    lsm_test_support::script::write(dir, name, lines).unwrap()
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

/// The transcript of the run whose `--json` summary is `summary`, as text.
fn transcript_text(dir: &Path, summary: &Value) -> String {
    transcript_of(dir, summary)
        .iter()
        .map(|line| format!("{line}\n"))
        .collect()
}

fn transcript_of(dir: &Path, summary: &Value) -> Vec<Value> {
    let path = dir
        .join("Agents")
        .join(summary["agent_name"].as_str().unwrap())
        .join("logs")
        .join(summary["run_id"].as_str().unwrap())
        .join("transcript.jsonl");
    lsm_test_support::script::read_jsonl(&path)
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

/// The row of `lsm tools list --json` output `rows` for the tool `name`.
fn tool_row(rows: &Value, name: &str) -> Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{name} missing: {rows}"))
        .clone()
}

#[test]
fn tools_list_shows_which_agents_are_offered_each_tool() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[sandbox.require_user_permission]\nread_file = true\n",
    )
    .unwrap();
    let out = run(lsm(dir.path()).args(["tools", "list", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let rows = stdout_json(&out);
    // No built-in agent's allowlist names bash: no run offers it.
    assert_eq!(tool_row(&rows, "bash")["agents"], json!([]));
    let read = tool_row(&rows, "read_file");
    assert!(
        read["agents"]
            .as_array()
            .unwrap()
            .contains(&json!("general")),
        "{read}"
    );
    assert!(
        !read["agents"]
            .as_array()
            .unwrap()
            .contains(&json!("research")),
        "{read}"
    );
    // The permission column follows the configuration, not only the tool's default.
    assert_eq!(read["needs_permission"], true);
    // Every built-in agent.
    assert_eq!(
        tool_row(&rows, "ask_user")["agents"]
            .as_array()
            .unwrap()
            .len(),
        11
    );

    let out = run(lsm(dir.path()).args(["tools", "list", "--agent", "research", "--json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    let mut names: Vec<String> = stdout_json(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    // query_remote_chain is in research's allowlist but exists only with [kb.remote].
    assert_eq!(names, ["ask_user", "query_and_synthesize"]);

    let out = run(lsm(dir.path()).args(["tools", "list"]));
    let table = String::from_utf8_lossy(&out.stdout);
    let bash = table.lines().find(|l| l.starts_with("bash ")).unwrap();
    assert!(bash.ends_with("[no agent]"), "{bash}");

    let out = run(lsm(dir.path()).args(["tools", "list", "--agent", "nobody"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown agent 'nobody'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn tools_list_includes_the_memory_tools_and_their_permission_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(lsm(dir.path()).args(["tools", "list", "--json"]));
    assert!(out.status.success());
    let rows = stdout_json(&out);
    let find = |name: &str| tool_row(&rows, name);
    assert_eq!(find("memory_put")["needs_permission"], true);
    assert_eq!(find("memory_remove")["needs_permission"], true);
    assert_eq!(find("memory_search")["risk"], "read_only");
    assert!(
        !dir.path().join("Agents").exists(),
        "listing opens no database"
    );
}

#[test]
fn a_reader_that_goes_away_ends_lsm_quietly() {
    // `lsm tools list --json | true`: the pipe is closed before lsm writes to it.
    let dir = tempfile::tempdir().unwrap();
    let mut child = lsm(dir.path())
        .args(["tools", "list", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    // 141 = 128 + SIGPIPE, as a shell reports for `cat`; 0 if lsm won the race.
    assert!(
        matches!(out.status.code(), Some(141 | 0)),
        "{:?}: {stderr}",
        out.status
    );
}

#[test]
fn tools_list_includes_the_knowledge_base_tools_and_configured_remote_sources() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[kb.remote]\nproviders = [{ name = \"arxiv\", kind = \"arxiv\" }]\n",
    )
    .unwrap();
    let out = run(lsm(dir.path()).args(["tools", "list", "--json"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = stdout_json(&out);
    let find = |name: &str| tool_row(&rows, name);
    for name in [
        "query_context",
        "execute_context",
        "query_and_synthesize",
        "query_llm",
        "extract_snippets",
        "source_map",
        "similarity_search",
        "find_section",
    ] {
        let row = find(name);
        assert_eq!(row["risk"], "read_only", "{name}");
        assert_eq!(row["offered"], "knowledge_base", "{name}");
    }
    assert_eq!(find("read_file")["offered"], "always");
    assert_eq!(find("memory_put")["offered"], "memory");
    assert_eq!(find("query_arxiv")["risk"], "network");
    assert_eq!(find("query_remote_chain")["risk"], "network");
    assert_eq!(find("load_url")["needs_permission"], true);
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .all(|r| r["name"] != "query_knowledge_base")
    );
    assert!(
        !dir.path().join(".lsm").exists(),
        "listing creates no index"
    );
    // A broken configuration is a usage error that names the problem.
    std::fs::write(dir.path().join("lsm.toml"), "[kb.remote]\nproviders = 3\n").unwrap();
    let out = run(lsm(dir.path()).args(["tools", "list"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("error"));
}

// ---------- real provider flavours against a loopback server ----------

mod loopback {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

    /// One API flavour: its endpoint and how it writes a tool call and a final text.
    #[derive(Clone, Copy, Debug)]
    pub(super) enum Api {
        Chat,
        Compatible,
        Responses,
        Anthropic,
    }

    impl Api {
        pub(super) fn provider(self) -> &'static str {
            match self {
                Api::Chat => "openai",
                Api::Compatible => "compatible",
                Api::Responses => "openai-responses",
                Api::Anthropic => "anthropic",
            }
        }
        pub(super) fn path(self) -> &'static str {
            match self {
                Api::Chat | Api::Compatible => "/v1/chat/completions",
                Api::Responses => "/v1/responses",
                Api::Anthropic => "/v1/messages",
            }
        }
        pub(super) fn key_env(self) -> &'static str {
            match self {
                Api::Anthropic => "ANTHROPIC_API_KEY",
                _ => "OPENAI_API_KEY",
            }
        }
        /// A JSON answer: one tool call, or a final text. Usage 100 in (40 cached), 20 out.
        pub(super) fn answer(self, n: usize, call: Option<(&str, Value)>, text: &str) -> Value {
            let id = format!("resp_{n}");
            match self {
                Api::Chat | Api::Compatible => {
                    let mut message = json!({"role": "assistant", "content": text});
                    if let Some((name, args)) = &call {
                        message["content"] = Value::Null;
                        message["tool_calls"] = json!([{"id": format!("call_{n}"), "type": "function",
                            "function": {"name": name, "arguments": args.to_string()}}]);
                    }
                    json!({"id": id, "object": "chat.completion", "choices": [{"index": 0, "message": message}],
                           "usage": {"prompt_tokens": 100, "completion_tokens": 20,
                                     "prompt_tokens_details": {"cached_tokens": 40}}})
                }
                Api::Responses => {
                    let output = match &call {
                        Some((name, args)) => {
                            json!([{"type": "function_call", "call_id": format!("call_{n}"),
                                                      "name": name, "arguments": args.to_string()}])
                        }
                        None => json!([{"type": "message", "role": "assistant",
                                        "content": [{"type": "output_text", "text": text}]}]),
                    };
                    json!({"id": id, "object": "response", "status": "completed", "output": output,
                           "usage": {"input_tokens": 100, "output_tokens": 20,
                                     "input_tokens_details": {"cached_tokens": 40}}})
                }
                Api::Anthropic => {
                    let content = match &call {
                        Some((name, args)) => {
                            json!([{"type": "tool_use", "id": format!("call_{n}"),
                                                      "name": name, "input": args}])
                        }
                        None => json!([{"type": "text", "text": text}]),
                    };
                    json!({"id": id, "type": "message", "role": "assistant", "content": content,
                           "usage": {"input_tokens": 60, "output_tokens": 20,
                                     "cache_read_input_tokens": 40, "cache_creation_input_tokens": 0}})
                }
            }
        }
    }

    /// Call 1 reads notes.md; call 2 answers with a text.
    pub(super) struct ReadThenAnswer {
        pub api: Api,
        pub calls: AtomicUsize,
    }

    impl Respond for ReadThenAnswer {
        fn respond(&self, request: &Request) -> ResponseTemplate {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            let body = if n == 1 {
                self.api
                    .answer(n, Some(("read_file", json!({"path": "notes.md"}))), "")
            } else {
                self.api.answer(n, None, "The notes say hello.")
            };
            let streaming = request
                .body_json::<Value>()
                .is_ok_and(|b| b["stream"] == true);
            if streaming && matches!(self.api, Api::Chat | Api::Compatible) {
                return ResponseTemplate::new(200)
                    .set_body_raw(chat_sse(&body), "text/event-stream");
            }
            ResponseTemplate::new(200).set_body_json(body)
        }
    }

    /// A Chat Completions answer as an SSE stream: the message as one delta, then usage.
    fn chat_sse(answer: &Value) -> String {
        let message = &answer["choices"][0]["message"];
        let mut delta = json!({"role": "assistant", "content": message["content"]});
        if let Some(calls) = message["tool_calls"].as_array() {
            let indexed: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let mut c = c.clone();
                    c["index"] = json!(i);
                    c
                })
                .collect();
            delta["tool_calls"] = Value::Array(indexed);
        }
        let chunk = json!({"id": answer["id"], "choices": [{"index": 0, "delta": delta}]});
        let usage = json!({"id": answer["id"], "choices": [], "usage": answer["usage"]});
        format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n")
    }

    pub(super) async fn server(api: Api) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(api.path()))
            .respond_with(ReadThenAnswer {
                api,
                calls: AtomicUsize::new(0),
            })
            .mount(&server)
            .await;
        server
    }
}

use loopback::Api;

fn real_provider_run(
    api: Api,
    server_uri: &str,
    extra_env: &[(&str, &str)],
) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "hello notes\n").unwrap();
    let mut cmd = lsm(dir.path());
    cmd.env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env(api.key_env(), "sk-test-key")
        .args([
            "agent",
            "run",
            "general",
            "--task",
            "What do the notes say?",
        ])
        .args(["--provider", api.provider(), "--model", "test-model"])
        .args(["--base-url", &format!("{server_uri}/v1")])
        .args(["--agents-folder", "Agents", "--json"]);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    drop(dir);
    out
}

async fn check_real_provider_run(api: Api, extra_env: &[(&str, &str)]) {
    let server = loopback::server(api).await;
    let out = real_provider_run(api, &server.uri(), extra_env);
    assert_eq!(out.status.code(), Some(0), "{api:?}: {}", stderr(&out));
    let s = stdout_json(&out);
    assert_eq!(s["status"], "completed", "{api:?}");
    assert_eq!(s["run_outcome"], "done");
    assert_eq!(s["provider"], api.provider());
    assert_eq!(s["model"], "test-model");
    assert_eq!(s["tool_sequence"], json!(["read_file"]));
    assert_eq!(s["token_usage"]["iterations"], 2);
    assert_eq!(s["token_usage"]["tokens_used"], 240);
    assert_eq!(s["token_usage"]["cached_tokens"], 80);
    assert_eq!(
        s["context_tracking"]["per_label"]["__default__"]["response_id"],
        "resp_2"
    );
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let auth = match api {
        Api::Anthropic => requests[0]
            .headers
            .get("x-api-key")
            .unwrap()
            .to_str()
            .unwrap()
            .to_string(),
        _ => requests[0]
            .headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default(),
    };
    match api {
        Api::Compatible => assert_eq!(
            auth, "",
            "a compatible server gets no key unless configured"
        ),
        Api::Anthropic => assert_eq!(auth, "sk-test-key"),
        _ => assert_eq!(auth, "Bearer sk-test-key"),
    }
    let streamed = extra_env
        .iter()
        .any(|(k, v)| *k == "LSM_LLM_STREAM" && *v == "true");
    let first: Value = requests[0].body_json().unwrap();
    assert_eq!(first["stream"] == true, streamed, "{api:?}: {first}");
    // The tool result went back to the model.
    let second = String::from_utf8_lossy(&requests[1].body).into_owned();
    assert!(second.contains("hello notes"), "{api:?}: {second}");
    if let Api::Responses = api {
        let body: Value = requests[1].body_json().unwrap();
        assert_eq!(body["previous_response_id"], "resp_1");
        assert_eq!(body["prompt_cache_key"], "general:__default__");
    }
}

#[tokio::test]
async fn agent_run_general_over_openai_chat_completions() {
    check_real_provider_run(Api::Chat, &[]).await;
}

#[tokio::test]
async fn agent_run_general_over_a_compatible_server() {
    check_real_provider_run(Api::Compatible, &[]).await;
}

#[tokio::test]
async fn agent_run_general_streaming_over_a_compatible_server() {
    check_real_provider_run(Api::Compatible, &[("LSM_LLM_STREAM", "true")]).await;
}

#[tokio::test]
async fn agent_run_general_over_openai_responses() {
    check_real_provider_run(Api::Responses, &[]).await;
}

#[tokio::test]
async fn agent_run_general_over_anthropic_messages() {
    check_real_provider_run(Api::Anthropic, &[]).await;
}

#[tokio::test]
async fn a_failing_provider_exits_1_and_still_writes_the_records() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(
            wiremock::ResponseTemplate::new(401)
                .set_body_json(json!({"error": {"message": "Incorrect API key provided"}})),
        )
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = lsm(dir.path());
    cmd.env("OPENAI_API_KEY", "sk-wrong")
        .args(["agent", "run", "general", "--task", "t", "--json"])
        .args(["--provider", "openai", "--model", "gpt-4o-mini"])
        .args(["--base-url", &format!("{}/v1", server.uri())]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let s = stdout_json(&out);
    let err = s["error"].as_str().unwrap();
    assert!(
        err.contains("OPENAI_API_KEY") && err.contains("Incorrect API key"),
        "{err}"
    );
    let run_dir = dir
        .path()
        .join(".lsm/agents/general/logs")
        .join(s["run_id"].as_str().unwrap());
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    assert!(transcript.contains("\"llm_error\"") && transcript.contains("401"));
}

// ---------- secrets ----------

/// The provider key of the secret tests: distinctive, so that finding it anywhere is a leak.
const LEAKY_KEY: &str = "sk-test-SECRETSECRET1234567890";
/// Another configured key (`[llm.complex] api_key_env`), of no known key shape: only the
/// configuration says it is a secret.
const OTHER_KEY: &str = "plain-OTHER-Zq81x0Lm";

/// A server refusing every call with `status`, echoing both keys the way OpenAI's 401 echoes
/// the one it got.
async fn key_echoing_server(status: u16) -> wiremock::MockServer {
    let server = wiremock::MockServer::start().await;
    let message = format!(
        "Incorrect API key provided: {LEAKY_KEY}. You can find your API key at https://platform.openai.com/account/api-keys. (also tried {OTHER_KEY})"
    );
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(status).set_body_json(
            json!({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}}),
        ))
        .mount(&server)
        .await;
    server
}

/// A workspace whose `lsm.toml` names [`OTHER_KEY`]'s variable, and a command with both keys
/// in its environment and fast retries (500 is retried).
fn secret_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[llm]\nmax_retries = 1\nretry_base_delay_ms = 1\n\n[llm.complex]\napi_key_env = \"OTHER_GATEWAY_KEY\"\n",
    )
    .unwrap();
    dir
}

fn with_keys(cmd: &mut std::process::Command) -> &mut std::process::Command {
    cmd.env("OPENAI_API_KEY", LEAKY_KEY)
        .env("OTHER_GATEWAY_KEY", OTHER_KEY)
}

fn assert_no_key(what: &str, text: &str) {
    for key in [LEAKY_KEY, OTHER_KEY] {
        assert!(!text.contains(key), "{what} shows the key {key}:\n{text}");
    }
    // Nor a tell-tale piece of one.
    assert!(!text.contains("SECRETSECRET"), "{what}:\n{text}");
}

#[tokio::test]
async fn a_key_the_server_echoes_reaches_neither_the_terminal_nor_the_records() {
    for (status, json_output) in [(401u16, true), (500, true), (401, false), (500, false)] {
        let server = key_echoing_server(status).await;
        let dir = secret_workspace();
        let mut cmd = lsm(dir.path());
        with_keys(&mut cmd)
            // -v: the provider's retry and the harness's phase error are logged too.
            .args(["-v", "agent", "run", "general", "--task", "t"])
            .args(["--provider", "openai", "--model", "gpt-4o-mini"])
            .args(["--agents-folder", "Agents"])
            .args(["--base-url", &format!("{}/v1", server.uri())]);
        if json_output {
            cmd.arg("--json");
        }
        let out = run(&mut cmd);
        let case = format!("{status} json={json_output}");
        assert_eq!(out.status.code(), Some(1), "{case}: {}", stderr(&out));
        let err = stderr(&out);
        assert_no_key(&format!("{case} stderr"), &err);
        assert!(
            err.contains("[REDACTED]"),
            "{case}: the error is still shown: {err}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_no_key(&format!("{case} stdout"), &stdout);
        if status == 500 {
            assert_eq!(
                server.received_requests().await.unwrap().len(),
                2,
                "{case}: retried once"
            );
        }
        let logs = dir.path().join("Agents/general/logs");
        let run_dir = std::fs::read_dir(&logs)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.is_dir())
            .unwrap_or_else(|| panic!("{case}: no run folder in {}", logs.display()));
        let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
        assert_no_key(&format!("{case} transcript"), &transcript);
        assert!(transcript.contains("\"llm_error\""), "{case}: {transcript}");
        let summary = std::fs::read_to_string(run_dir.join("run_summary.json")).unwrap();
        assert_no_key(&format!("{case} run_summary.json"), &summary);
        if json_output {
            let s = stdout_json(&out);
            let error = s["error"].as_str().unwrap();
            assert!(
                error.contains(&status.to_string()) && error.contains("[REDACTED]"),
                "{case}: {error}"
            );
        }
        // Every other file the run left (the agent's log) too.
        for entry in std::fs::read_dir(dir.path().join("Agents/general/logs")).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                let text = std::fs::read_to_string(&path).unwrap();
                assert_no_key(&format!("{case} {}", path.display()), &text);
            }
        }
    }
}

#[tokio::test]
async fn llm_ping_never_prints_a_key() {
    for status in [401u16, 500] {
        let server = key_echoing_server(status).await;
        let dir = secret_workspace();
        for json_output in [false, true] {
            let mut cmd = lsm(dir.path());
            with_keys(&mut cmd)
                .args(["-v", "llm", "ping", "--provider", "openai", "--model", "m"])
                .args(["--base-url", &format!("{}/v1", server.uri())]);
            if json_output {
                cmd.arg("--json");
            }
            let out = run(&mut cmd);
            let case = format!("{status} json={json_output}");
            assert_eq!(out.status.code(), Some(1), "{case}: {}", stderr(&out));
            let err = stderr(&out);
            assert_no_key(&format!("{case} stderr"), &err);
            assert!(err.contains("[REDACTED]"), "{case}: {err}");
            assert_no_key(
                &format!("{case} stdout"),
                &String::from_utf8_lossy(&out.stdout),
            );
            if json_output {
                let v = stdout_json(&out);
                assert!(
                    v["error"].as_str().unwrap().contains("[REDACTED]"),
                    "{case}: {v}"
                );
            }
        }
    }
}

#[test]
fn a_missing_key_or_model_is_a_usage_error_naming_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(lsm(dir.path())
        .env_remove("ANTHROPIC_API_KEY")
        .args(["agent", "run", "general", "--task", "t"])
        .args(["--provider", "anthropic", "--model", "claude-sonnet-4-5"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("ANTHROPIC_API_KEY"),
        "{}",
        stderr(&out)
    );

    let out = run(lsm_e2e::general_run(dir.path(), "t", "openai").env("OPENAI_API_KEY", "k"));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--model"), "{}", stderr(&out));

    std::fs::write(
        dir.path().join("lsm.toml"),
        "[llm]\nprovider = \"compatible\"\nmodel = \"llama3.2\"\n",
    )
    .unwrap();
    let out = run(lsm(dir.path()).args(["agent", "run", "general", "--task", "t"]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("base_url") && err.contains("lsm.toml"),
        "{err}"
    );
}

#[tokio::test]
async fn config_tiers_and_env_overrides_choose_the_provider() {
    // [llm.normal] names the provider; LSM_LLM_BASE_URL points it at the loopback server;
    // LSM_LLM_STREAM is irrelevant to a non-streaming mock, so streaming stays off here.
    let server = loopback::server(Api::Anthropic).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "hello notes\n").unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\n\n\
         [llm.pricing]\n\"claude-test\" = { input = 3.0, output = 15.0, cached_input = 0.3 }\n\n\
         [llm.normal]\nprovider = \"anthropic\"\nmodel = \"claude-test\"\n",
    )
    .unwrap();
    let mut cmd = lsm(dir.path());
    cmd.env("ANTHROPIC_API_KEY", "k")
        .env("LSM_LLM_BASE_URL", format!("{}/v1", server.uri()))
        .args(["agent", "run", "general", "--task", "read", "--json"]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = stdout_json(&out);
    assert_eq!(s["provider"], "anthropic");
    assert_eq!(s["model"], "claude-test");
    // Per call: 60 plain × 3 + 40 cached × 0.3 + 20 out × 15 = 492 per million; two calls.
    let cost = s["token_usage"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 2.0 * 492.0 / 1e6).abs() < 1e-12, "{cost}");
}

#[tokio::test]
async fn the_cost_ceiling_stops_a_run_with_exit_code_3() {
    let server = loopback::server(Api::Chat).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "hello notes\n").unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[llm.pricing]\n\"gpt-4o-mini\" = { input = 100.0, output = 100.0 }\n",
    )
    .unwrap();
    // One call costs 120 tokens × $100 per million = $0.012 > the $0.01 ceiling.
    let mut cmd = lsm(dir.path());
    cmd.env("OPENAI_API_KEY", "k")
        .args(["agent", "run", "general", "--task", "read", "--json"])
        .args([
            "--provider",
            "openai",
            "--model",
            "gpt-4o-mini",
            "--max-cost-usd",
            "0.01",
        ])
        .args(["--base-url", &format!("{}/v1", server.uri())]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let s = stdout_json(&out);
    assert_eq!(s["run_outcome"], "budget_exhausted");
    assert_eq!(s["token_usage"]["iterations"], 1);
    assert_eq!(s["token_usage"]["max_cost_usd"], 0.01);

    // Without prices for the model, a cost ceiling cannot be enforced: a usage error.
    let mut cmd = lsm(dir.path());
    cmd.env("OPENAI_API_KEY", "k")
        .args(["agent", "run", "general", "--task", "read"])
        .args([
            "--provider",
            "openai",
            "--model",
            "other",
            "--max-cost-usd",
            "0.01",
        ])
        .args(["--base-url", &format!("{}/v1", server.uri())]);
    let out = run(&mut cmd);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no prices"), "{}", stderr(&out));
}

// ---------- lsm llm ping ----------

#[tokio::test]
async fn llm_ping_prints_the_real_figures() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/v1/chat/completions"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-1", "choices": [{"index": 0, "message": {"role": "assistant", "content": "pong"}}],
            "usage": {"prompt_tokens": 21, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 0}}
        })))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.uri());
    let out = run(lsm(dir.path()).env("OPENAI_API_KEY", "k").args([
        "llm",
        "ping",
        "--provider",
        "openai",
        "--model",
        "gpt-4o-mini",
        "--base-url",
        &base,
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "provider: openai",
        "model: gpt-4o-mini",
        &format!("base_url: {base}"),
        "latency: ",
        "usage: 21 input tokens (0 cached), 2 output tokens",
        "reply: pong",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    let out = run(lsm(dir.path()).env("OPENAI_API_KEY", "k").args([
        "llm",
        "ping",
        "--json",
        "--provider",
        "openai",
        "--model",
        "gpt-4o-mini",
        "--base-url",
        &base,
    ]));
    let v = stdout_json(&out);
    assert_eq!(v["ok"], true);
    assert_eq!(v["usage"]["input_tokens"], 21);
    assert!(v["latency_ms"].is_u64());
    let body: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(body["max_completion_tokens"], 16, "a tiny call");
}

#[tokio::test]
async fn llm_ping_names_the_precise_failure() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(
            wiremock::ResponseTemplate::new(404)
                .set_body_json(json!({"error": {"message": "model 'nosuch' not found"}})),
        )
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let out = run(lsm(dir.path()).args([
        "llm",
        "ping",
        "--provider",
        "compatible",
        "--model",
        "nosuch",
        "--base-url",
        &format!("{}/v1", server.uri()),
    ]));
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("404") && err.contains("nosuch") && err.contains("base_url"),
        "{err}"
    );

    // Nothing listening: a connection error after the retries.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = run(lsm(dir.path())
        .env("LSM_LLM_MAX_RETRIES", "0")
        .args(["llm", "ping", "--provider", "compatible", "--model", "m"])
        .args(["--base-url", &format!("http://127.0.0.1:{port}/v1")]));
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot reach"), "{}", stderr(&out));
}

/// Answers with the strict-JSON protocol: read notes.md, then DONE.
struct JsonProtocol(std::sync::atomic::AtomicUsize);

impl wiremock::Respond for JsonProtocol {
    fn respond(&self, _request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let text = if n == 1 {
            json!({"response": "", "action": "read_file", "action_arguments": {"path": "notes.md"}})
                .to_string()
        } else {
            json!({"response": "The notes say hello.", "action": "DONE"}).to_string()
        };
        wiremock::ResponseTemplate::new(200).set_body_json(Api::Compatible.answer(n, None, &text))
    }
}

#[tokio::test]
async fn a_model_without_function_calling_runs_on_the_strict_json_protocol() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(JsonProtocol(std::sync::atomic::AtomicUsize::new(0)))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "hello notes\n").unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        format!(
            "[llm]\nprovider = \"compatible\"\nmodel = \"small\"\nbase_url = \"{}/v1\"\nfunction_calling = false\n",
            server.uri()
        ),
    )
    .unwrap();
    let out = run(lsm(dir.path()).args(["agent", "run", "general", "--task", "read", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = stdout_json(&out);
    assert_eq!(s["tool_sequence"], json!(["read_file"]));
    assert_eq!(s["run_outcome"], "done");
    let requests = server.received_requests().await.unwrap();
    let second: Value = requests[1].body_json().unwrap();
    assert!(second.get("tools").is_none(), "no native tools: {second}");
    let messages = second["messages"].to_string();
    assert!(
        messages.contains("Result of read_file:\\nhello notes"),
        "{messages}"
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
fn a_query_answer_that_cites_nothing_still_shows_its_sources() {
    let dir = kb_fixture();
    assert_eq!(
        run(lsm(dir.path()).args(["ingest", "notes"])).status.code(),
        Some(0)
    );
    std::fs::write(
        dir.path().join("uncited.jsonl"),
        "{\"text\": \"Flutter is a vibration.\"}\n",
    )
    .unwrap();
    let out = run(lsm(dir.path()).args([
        "query",
        "What is flutter?",
        "--provider",
        "scripted:uncited.jsonl",
        "--filter",
        "path_contains=aero",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Flutter is a vibration."), "{text}");
    assert!(
        text.contains("Sources given to the model (none cited):") && text.contains("[S1] "),
        "{text}"
    );
    assert!(text.contains("aero"), "{text}");
}

/// A workspace with a lexical knowledge base over `notes/`, which holds `files` (name, text).
pub(crate) fn lexical_kb(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("notes")).unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[kb]\nindex_dir = \".lsm/kb\"\n\n[kb.embedder]\nkind = \"none\"\n",
    )
    .unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join("notes").join(name), text).unwrap();
    }
    dir
}

/// SIGTERM during `lsm ingest` commits the files done so far and exits 4 (the exit-code table);
/// the same command again finishes the rest, redoing none of them.
#[test]
fn sigterm_stops_an_ingest_with_the_files_done_so_far_committed() {
    use std::io::{BufRead, BufReader};
    let dir = lexical_kb(&[]);
    let notes = dir.path().join("notes");
    // Enough files that the signal, sent on the first one's line, arrives long before the
    // last is done.
    let total = 1000;
    for i in 0..total {
        std::fs::write(
            notes.join(format!("n{i}.md")),
            format!("# Note {i}\n\nWhat note {i} says about flutter.\n"),
        )
        .unwrap();
    }
    let mut child = lsm(dir.path())
        .args(["ingest", "notes", "--output-format", "stream-json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("\"event\":\"file\""), "{first}");
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("SIGTERM: stop requested"),
        "{}",
        stderr(&out)
    );
    let stopped: Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(stopped["event"], "result", "{stopped}");
    assert_eq!(stopped["interrupted"], true, "{stopped}");
    let done = stopped["indexed"].as_u64().unwrap();
    assert!(done >= 1 && done < total, "{stopped}");

    let again = run(lsm(dir.path()).args(["ingest", "notes", "--json"]));
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    let finished = stdout_json(&again);
    assert_eq!(finished["interrupted"], false, "{finished}");
    assert_eq!(
        finished["skipped"], done,
        "what was committed is not redone: {finished}"
    );
    assert_eq!(finished["indexed"], total - done, "{finished}");
    assert_eq!(finished["total_files"], total, "{finished}");
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
    // The run's folder (the agent's own log file sits beside it).
    let run_dir = dir
        .path()
        .join("Agents/general/logs")
        .join(summary["run_id"].as_str().unwrap());
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    let first_result = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "tool_result")
        .unwrap();
    let resp: Value = serde_json::from_str(first_result["content"].as_str().unwrap()).unwrap();
    assert_eq!(resp["answer"], "An aeroelastic instability [S1].");
    assert!(
        resp["citations"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("wings.md")
    );
}

#[test]
fn knowledge_base_synthesis_stops_at_the_runs_token_budget() {
    // The reported defect: with --max-tokens-budget 300, one answer asking for four
    // query_and_synthesize calls spent 1215 tokens — the tools' own LLM calls went on past
    // the ceiling, uncapped.
    let dir = kb_fixture();
    assert_eq!(
        run(lsm(dir.path()).args(["ingest", "notes"])).status.code(),
        Some(0)
    );
    let ask = json!({"name": "query_and_synthesize",
                     "arguments": {"query": "What is flutter?", "mode": "grounded"}});
    let mut script = vec![json!({"tool_calls": [ask, ask, ask, ask],
                                 "usage": {"input_tokens": 10, "output_tokens": 5}})];
    // What the synthesis calls would answer: a short prompt, a long answer.
    for i in 0..4 {
        script.push(json!({"text": format!("Flutter, answer {i} [S1]."),
                           "usage": {"input_tokens": 100, "output_tokens": 400}}));
    }
    script.push(text("never reached"));
    let lines: String = script.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("agent.jsonl"), lines).unwrap();
    let out = agent_run(
        dir.path(),
        &dir.path().join("agent.jsonl"),
        &["--max-tokens-budget", "300"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "budget_exhausted", "{summary}");
    // The agent's call (15), then one synthesis call whose answer was capped to the 285
    // tokens left: the overshoot is that call's prompt, no more.
    assert_eq!(
        summary["token_usage"]["tokens_used"],
        15 + 100 + 285,
        "{summary}"
    );
    assert_eq!(summary["token_usage"]["iterations"], 1, "{summary}");
    let run_dir = dir
        .path()
        .join("Agents/general/logs")
        .join(summary["run_id"].as_str().unwrap());
    let transcript: Vec<Value> = std::fs::read_to_string(run_dir.join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let results: Vec<&Value> = transcript
        .iter()
        .filter(|e| e["event"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 4);
    // The four read-only calls run at once: whichever reached the model first got its
    // answer; the other three were refused by the budget.
    let (answered, refused): (Vec<&str>, Vec<&str>) = results
        .iter()
        .map(|r| r["content"].as_str().unwrap())
        .partition(|c| c.contains("answer 0"));
    assert_eq!(answered.len(), 1, "{results:?}");
    for error in refused {
        assert!(
            error.contains(
                "budget exhausted: the run's token budget (300) is spent; no further model calls are possible in this run"
            ),
            "{error}"
        );
    }
}
