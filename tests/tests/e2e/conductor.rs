//! `lsm agent run conductor`: an agenda run by worker agents at once, dependencies,
//! failures as escalations, one budget for the tree, a final report citing the workers'
//! findings, and a run killed while its workers ran, resumed to the same report. The
//! conductor plays `run.jsonl`; the worker of item ID plays `run.ID.jsonl`.

use std::path::{Path, PathBuf};

use lsm_e2e::{lsm, run};
use serde_json::{Value, json};

use super::{call, stderr, stdout_json, text};

/// A workspace with `notes.md`, the conductor's script and each worker's.
fn workspace(conductor: &[Value], workers: &[(&str, Vec<Value>)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("notes.md"),
        "# Notes\nSoil holds carbon. Tillage releases it.\n",
    )
    .unwrap();
    let write = |name: &str, lines: &[Value]| {
        std::fs::write(
            dir.path().join(name),
            lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
    };
    write("run.jsonl", conductor);
    for (item, lines) in workers {
        write(&format!("run.{item}.jsonl"), lines);
    }
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents]\nagents_folder = \"Agents\"\n\n[sandbox]\nallowed_read_paths = [\".\"]\n\
         allowed_write_paths = [\".\"]\n",
    )
    .unwrap();
    dir
}

fn conductor_cmd(dir: &Path, extra: &[&str]) -> std::process::Command {
    let mut cmd = lsm(dir);
    cmd.args([
        "agent",
        "run",
        "conductor",
        "--task",
        "what do the notes say about soil carbon?",
        "--provider",
        "scripted:run.jsonl",
        "--config",
        "lsm.toml",
    ])
    .args(extra);
    cmd
}

fn agenda(items: Value) -> Value {
    text(&items.to_string())
}

/// A researcher that reads `notes.md` (slowly, so that workers overlap) and reports `claim`.
fn reader(claim: &str) -> Vec<Value> {
    let mut first = call("read_file", json!({"path": "notes.md"}));
    first["delay_ms"] = json!(300);
    vec![
        first,
        call(
            "complete",
            json!({"summary": format!("checked: {claim}"),
                   "findings": [{"claim": claim, "confidence": 0.9,
                                 "evidence_refs": ["call_1_0", "notes.md", "nowhere.md"]}],
                   "learnings": ["the notes are short"]}),
        ),
    ]
}

fn conductor_run(dir: &Path) -> PathBuf {
    let logs = dir.join("Agents/conductor/logs");
    std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("transcript.jsonl").exists())
        .unwrap()
}

fn journal(run_dir: &Path) -> Vec<Value> {
    lsm_test_support::script::read_jsonl(&run_dir.join("transcript.jsonl"))
}

fn report_of(dir: &Path) -> String {
    let artifacts = dir.join("Agents/conductor/artifacts");
    let file = std::fs::read_dir(&artifacts)
        .unwrap()
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("conductor_report_")
        })
        .unwrap();
    std::fs::read_to_string(file.path()).unwrap()
}

fn three_items() -> Value {
    json!([
        {"id": "a1", "objective": "what the notes say on storage", "capability": "researcher"},
        {"id": "a2", "objective": "what the notes say on loss", "capability": "researcher"},
        {"id": "a3", "objective": "list the workspace", "capability": "terminal"}
    ])
}

fn lister() -> Vec<Value> {
    let mut first = call("read_folder", json!({"path": "."}));
    first["delay_ms"] = json!(300);
    vec![
        first,
        call(
            "complete",
            json!({"summary": "listed", "findings": [{"claim": "notes.md is there",
                   "confidence": 1.0, "evidence_refs": ["call_1_0"]}]}),
        ),
    ]
}

fn conductor_script() -> Vec<Value> {
    vec![
        agenda(three_items()),
        text(r#"{"complete": true}"#),
        text(
            "# Soil carbon\nSoil stores carbon [F1]; tillage loses it [F2]. The notes exist [F3]. Also [F9].",
        ),
    ]
}

#[test]
fn three_workers_run_at_once_and_the_report_cites_their_findings() {
    let dir = workspace(
        &conductor_script(),
        &[
            ("a1", reader("Soil stores carbon")),
            ("a2", reader("Tillage releases carbon")),
            ("a3", lister()),
        ],
    );
    let out = run(&mut conductor_cmd(dir.path(), &["--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "done", "{summary:#}");
    assert!(
        summary["token_usage"]["workers_tokens_used"]
            .as_u64()
            .unwrap()
            > 0
    );
    let lines = journal(&conductor_run(dir.path()));
    // All three started before any ended: they ran at the same time.
    let first_end = lines
        .iter()
        .position(|l| l["event"] == "worker_completed" || l["event"] == "worker_failed")
        .unwrap();
    let started = lines[..first_end]
        .iter()
        .filter(|l| l["event"] == "worker_started")
        .count();
    assert_eq!(started, 3, "{lines:#?}");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["event"] == "worker_completed")
            .count(),
        3
    );
    let finding = lines
        .iter()
        .find(|l| l["event"] == "worker_finding")
        .unwrap();
    assert!(finding["worker_run_id"].is_string() && finding["parent_run_id"].is_string());
    // The report: cited findings with their evidence; an unknown citation removed.
    let report = report_of(dir.path());
    assert!(report.contains("Soil stores carbon [F1]"), "{report}");
    assert!(
        report.contains(
            "[F1] Soil stores carbon — from a1, confidence 0.90; evidence: call_1_0, notes.md"
        ),
        "{report}"
    );
    assert!(!report.contains("[F9]"), "{report}");
    assert!(report.contains("do not exist were removed: F9"), "{report}");
    // Each worker left its own run records.
    for agent in ["researcher", "terminal"] {
        assert!(
            dir.path().join("Agents").join(agent).join("logs").is_dir(),
            "{agent}"
        );
    }
}

#[test]
fn a_dependency_waits_and_failed_workers_become_escalations() {
    let plan = json!([
        {"id": "a1", "objective": "check the lab", "capability": "researcher"},
        {"id": "a2", "objective": "summarize the lab's data", "capability": "researcher",
         "depends_on": ["a1"]},
        {"id": "a3", "objective": "paint it", "capability": "painter"},
        {"id": "a4", "objective": "read the notes", "capability": "researcher"},
        {"id": "a5", "objective": "after the notes", "capability": "researcher",
         "depends_on": ["a4"]}
    ]);
    let dir = workspace(
        &[
            agenda(plan),
            text(r#"{"complete": true}"#),
            text("# Soil\nThe notes say it [F1][F2]."),
        ],
        &[
            (
                "a1",
                vec![call("block", json!({"reason": "no access to the lab"}))],
            ),
            ("a4", reader("Soil stores carbon")),
            ("a5", reader("Tillage releases carbon")),
        ],
    );
    let out = run(&mut conductor_cmd(dir.path(), &["--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = journal(&conductor_run(dir.path()));
    let waves: Vec<Vec<String>> = lines
        .iter()
        .filter(|l| l["event"] == "workers_requested")
        .map(|l| {
            l["requests"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["item_id"].as_str().unwrap().to_string())
                .collect()
        })
        .collect();
    assert_eq!(
        waves,
        [vec!["a1", "a3", "a4"], vec!["a5"]],
        "a5 waited for a4"
    );
    let report = report_of(dir.path());
    assert!(report.contains("## Escalations"), "{report}");
    assert!(
        report.contains("a1 (blocked): blocked: no access to the lab"),
        "{report}"
    );
    assert!(
        report.contains("a2: not run: its dependency a1 did not succeed"),
        "{report}"
    );
    assert!(
        report.contains("no worker has the capability 'painter'"),
        "{report}"
    );
    assert!(
        report.contains("[F2] Tillage releases carbon — from a5"),
        "{report}"
    );
}

#[test]
fn the_shared_budget_ends_every_worker_and_the_run() {
    let endless = |k: &str| -> Vec<Value> {
        (0..40)
            .map(|i| {
                let mut l = call(
                    "read_file",
                    json!({"path": "notes.md", "note": format!("{k}{i}")}),
                );
                l["usage"] = json!({"input_tokens": 100, "output_tokens": 10});
                l["delay_ms"] = json!(5);
                l
            })
            .collect()
    };
    let mut plan = agenda(three_items());
    plan["usage"] = json!({"input_tokens": 100, "output_tokens": 20});
    let dir = workspace(
        &[plan],
        &[
            ("a1", endless("a")),
            ("a2", endless("b")),
            ("a3", endless("c")),
        ],
    );
    let out = run(&mut conductor_cmd(
        dir.path(),
        &["--json", "--max-tokens-budget", "2000", "--yes"],
    ));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "budget_exhausted", "{summary:#}");
    let used = summary["token_usage"]["tokens_used"].as_u64().unwrap();
    assert!((2000..=2000 + 3 * 110).contains(&used), "{used}");
    let lines = journal(&conductor_run(dir.path()));
    let failed: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "worker_failed")
        .collect();
    assert_eq!(failed.len(), 3);
    assert!(
        failed
            .iter()
            .all(|l| l["outcome"]["stop_reason"] == "budget_exhausted")
    );
    let report = report_of(dir.path());
    assert!(
        report.contains("stopped early (budget_exhausted)"),
        "{report}"
    );
}

#[test]
fn the_worker_events_reach_the_event_stream_and_the_progress_output() {
    let dir = workspace(
        &conductor_script(),
        &[
            ("a1", reader("Soil stores carbon")),
            ("a2", reader("Tillage releases carbon")),
            ("a3", lister()),
        ],
    );
    let out = run(&mut conductor_cmd(
        dir.path(),
        &["--output-format", "stream-json"],
    ));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for name in [
        "worker_started",
        "worker_progress",
        "worker_finding",
        "worker_learning",
        "worker_completed",
    ] {
        let e = events.iter().find(|e| e["event"] == name);
        assert!(e.is_some(), "{name} missing");
        let e = e.unwrap();
        assert!(e["parent_run_id"].is_string(), "{name}: {e}");
    }
    // Text progress names each worker.
    let dir = workspace(
        &conductor_script(),
        &[
            ("a1", reader("Soil stores carbon")),
            ("a2", reader("Tillage releases carbon")),
            ("a3", lister()),
        ],
    );
    let out = run(&mut conductor_cmd(dir.path(), &[]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("[a1:researcher]") && err.contains("[a3:terminal]"),
        "{err}"
    );
}

#[test]
fn a_conductor_killed_while_its_workers_ran_resumes_to_the_same_report() {
    let scripts = [
        ("a1", reader("Soil stores carbon")),
        ("a2", reader("Tillage releases carbon")),
        ("a3", lister()),
    ];
    let reference = workspace(&conductor_script(), &scripts);
    let out = run(&mut conductor_cmd(reference.path(), &["--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let expected = report_of(reference.path());
    let ref_lines = journal(&conductor_run(reference.path()));
    // Kill the process right after the last worker_started line.
    let last_start = ref_lines
        .iter()
        .rfind(|l| l["event"] == "worker_started")
        .unwrap()["seq"]
        .as_u64()
        .unwrap();
    let dir = workspace(&conductor_script(), &scripts);
    let mut cmd = conductor_cmd(dir.path(), &["--json"]);
    cmd.env("LSM_TEST_CRASH_AFTER_SEQ", last_start.to_string());
    let crashed = run(&mut cmd);
    assert!(crashed.status.code().is_none(), "{}", stderr(&crashed));
    let run_dir = conductor_run(dir.path());
    let run_id = run_dir.file_name().unwrap().to_string_lossy().to_string();
    let mut resume = lsm(dir.path());
    resume.args(["runs", "resume", &run_id, "--config", "lsm.toml", "--json"]);
    let resumed = run(&mut resume);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(report_of(dir.path()), expected, "the same final report");
    let lines = journal(&run_dir);
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["event"] == "worker_completed")
            .count(),
        3
    );
    assert_eq!(lines.last().unwrap()["event"], "run_finished");
}

#[test]
fn a_capabilitys_own_time_and_iteration_limits_bound_its_workers() {
    // a1's model takes 5 s to answer: its capability allows 1 s. a2's model keeps calling
    // tools: its capability allows 1 iteration.
    let mut slow = text("too late");
    slow["delay_ms"] = json!(5_000);
    let items = json!([
        {"id": "a1", "objective": "list the workspace", "capability": "terminal"},
        {"id": "a2", "objective": "what the notes say", "capability": "reader"}
    ]);
    let dir = workspace(
        &[
            agenda(items),
            text(r#"{"complete": true}"#),
            text("# Report\nNothing came back."),
        ],
        &[("a1", vec![slow]), ("a2", reader("Soil stores carbon"))],
    );
    let mut toml = std::fs::read_to_string(dir.path().join("lsm.toml")).unwrap();
    toml.push_str(
        "\n[conductor.capabilities.terminal]\ntimeout_seconds = 1\n\
         [conductor.capabilities.reader]\nagent = \"researcher\"\nmax_iterations = 1\n",
    );
    std::fs::write(dir.path().join("lsm.toml"), toml).unwrap();
    let out = run(&mut conductor_cmd(dir.path(), &["--json"]));
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    let lines = journal(&conductor_run(dir.path()));
    let ended = |item: &str| {
        lines
            .iter()
            .find(|l| {
                (l["event"] == "worker_failed" || l["event"] == "worker_completed")
                    && l["item_id"] == item
            })
            .unwrap_or_else(|| panic!("{item} ended: {lines:#?}"))
            .clone()
    };
    assert_eq!(
        ended("a1")["outcome"]["stop_reason"],
        "wall_time_exceeded",
        "{lines:#?}"
    );
    assert_eq!(
        ended("a2")["outcome"]["stop_reason"],
        "max_iterations",
        "{lines:#?}"
    );

    // A zero limit is refused with the capability's name.
    let mut toml = std::fs::read_to_string(dir.path().join("lsm.toml")).unwrap();
    toml = toml.replace("timeout_seconds = 1", "timeout_seconds = 0");
    std::fs::write(dir.path().join("lsm.toml"), toml).unwrap();
    let out = run(&mut conductor_cmd(dir.path(), &["--json"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("[conductor.capabilities.terminal] timeout_seconds must be at least 1"),
        "{}",
        stderr(&out)
    );
}
