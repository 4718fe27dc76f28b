//! `lsm agent run-many`: one agent on one task several times at once through the runtime
//! manager, each run with its own records; the exit code of the first run that did not
//! complete; nobody answers permission requests.

use lsm_e2e::{lsm, run};
use serde_json::{Value, json};

use super::{call, stderr, stdout_json, text, workspace_with_script};

fn run_many(
    dir: &std::path::Path,
    script: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let mut cmd = lsm(dir);
    cmd.args([
        "agent",
        "run-many",
        "general",
        "--task",
        "work on the notes",
    ])
    .arg("--provider")
    .arg(format!("scripted:{}", script.display()))
    .args(["--agents-folder", "Agents"])
    .args(extra);
    run(&mut cmd)
}

#[test]
fn every_run_completes_with_its_own_records() {
    let (dir, script) = workspace_with_script(&[
        call("read_file", json!({"path": "notes.md"})),
        text("The notes say hello."),
    ]);
    let out = run_many(
        dir.path(),
        &script,
        &["--count", "3", "--max-concurrent", "2", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let runs = stdout_json(&out);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    let mut records: Vec<&str> = Vec::new();
    for r in runs {
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(r["outcome"], "done", "{r}");
        assert_eq!(r["final_text"], "The notes say hello.", "{r}");
        records.push(r["record_id"].as_str().unwrap());
    }
    records.sort_unstable();
    records.dedup();
    assert_eq!(records.len(), 3, "each run has its own records: {runs:?}");
    for id in records {
        let transcript = dir
            .path()
            .join("Agents/general/logs")
            .join(id)
            .join("transcript.jsonl");
        let lines = std::fs::read_to_string(&transcript).unwrap();
        let tool_results = lines
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["event"] == "tool_result")
            .count();
        assert_eq!(tool_results, 1, "{}", transcript.display());
    }
}

#[test]
fn the_exit_code_is_that_of_the_first_run_that_did_not_complete() {
    let (dir, script) =
        workspace_with_script(&[call("read_file", json!({"path": "notes.md"})), text("done")]);
    let out = run_many(
        dir.path(),
        &script,
        &["--count", "2", "--max-iterations", "1"],
    );
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    assert!(
        stdout
            .lines()
            .all(|l| l.contains("stopped (max_iterations)")),
        "{stdout}"
    );
    assert!(
        stderr(&out).contains("0 of 2 runs completed"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn permission_requests_are_denied_without_yes_and_approved_with_it() {
    let script_lines = [
        call("write_file", json!({"path": "out.md", "content": "x"})),
        text("written"),
    ];
    let (dir, script) = workspace_with_script(&script_lines);
    let out = run_many(dir.path(), &script, &["--count", "2", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        !dir.path().join("out.md").exists(),
        "nobody approved the write"
    );
    let out = run_many(dir.path(), &script, &["--count", "1", "--yes", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.md")).unwrap(),
        "x"
    );
}

#[test]
fn a_count_of_zero_is_a_usage_error() {
    let (dir, script) = workspace_with_script(&[text("done")]);
    let out = run_many(dir.path(), &script, &["--count", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--count must be at least 1"),
        "{}",
        stderr(&out)
    );
}
