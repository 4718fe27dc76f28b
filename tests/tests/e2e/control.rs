//! The control plane through `lsm agent run`: stall detection (`[stall]`, stop reason
//! `stalled`, exit code 7) and hooks (`[[hooks.*]]`).

use std::path::{Path, PathBuf};

use lsm_e2e::{lsm, run};
use serde_json::{Value, json};

use super::{call, stderr, stdout_json, text};

/// A workspace whose `lsm.toml` lets `write_file` write under `ws/` without a person, plus
/// `extra` appended to that file, and a script of `lines`.
fn workspace(lines: &[Value], extra: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("ws/docs")).unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        format!(
            "[agents]\nagents_folder = \"Agents\"\n\n[sandbox]\nallowed_read_paths = [\"ws\"]\n\
             allowed_write_paths = [\"ws\"]\nrequire_user_permission = {{ write_file = false }}\n\n{extra}"
        ),
    )
    .unwrap();
    let script = dir.path().join("script.jsonl");
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&script, body).unwrap();
    (dir, script)
}

fn agent_run(cwd: &Path, script: &Path) -> std::process::Output {
    let mut cmd = lsm(cwd);
    cmd.args(["agent", "run", "general", "--task", "write the notes"])
        .arg("--provider")
        .arg(format!("scripted:{}", script.display()))
        .args(["--config", "lsm.toml", "--json"]);
    run(&mut cmd)
}

/// The run's transcript, one JSON object per line.
fn transcript(dir: &Path, summary: &Value) -> Vec<Value> {
    let path = dir
        .join("Agents/general/logs")
        .join(summary["run_id"].as_str().unwrap())
        .join("transcript.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn events<'a>(lines: &'a [Value], name: &str) -> Vec<&'a Value> {
    lines.iter().filter(|e| e["event"] == name).collect()
}

// ---------- stall detection ----------

#[test]
fn a_doom_loop_of_identical_write_file_calls_is_nudged_then_ends_stalled_with_exit_7() {
    // What a small local model does: the same write_file, again and again.
    let same = call(
        "write_file",
        json!({"path": "ws/notes.md", "content": "# Notes\n"}),
    );
    let mut lines = vec![same.clone(); 8];
    lines.push(text("never reached"));
    let (dir, script) = workspace(&lines, "");
    let out = agent_run(dir.path(), &script);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "stalled", "{summary}");
    assert_eq!(summary["status"], "stopped");
    // Three identical iterations, the nudge, a fourth: stalled.
    assert_eq!(summary["tools_used"]["write_file"], 4, "{summary}");
    let lines = transcript(dir.path(), &summary);
    let nudges = events(&lines, "stall_nudge");
    assert_eq!(nudges.len(), 1);
    assert_eq!(nudges[0]["repeats"], 3);
    assert_eq!(events(&lines, "stalled")[0]["repeats"], 4);
    // The model was told: the nudge is in the request after it.
    let nudge_seq = nudges[0]["seq"].as_u64().unwrap();
    assert!(
        lines
            .iter()
            .any(|e| e["event"] == "llm_request" && e["seq"].as_u64() > Some(nudge_seq)),
        "the model gets one more call after the nudge"
    );
}

#[test]
fn near_identical_write_file_calls_are_not_a_loop() {
    let mut lines: Vec<Value> = (0..5)
        .map(|k| {
            call(
                "write_file",
                json!({"path": "ws/notes.md", "content": format!("# Notes, draft {k}\n")}),
            )
        })
        .collect();
    lines.push(text("Done: five drafts."));
    let (dir, script) = workspace(&lines, "");
    let out = agent_run(dir.path(), &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "done");
    assert!(events(&transcript(dir.path(), &summary), "stall_nudge").is_empty());
}

#[test]
fn stall_detection_can_be_switched_off_in_lsm_toml() {
    let same = call(
        "write_file",
        json!({"path": "ws/notes.md", "content": "# Notes\n"}),
    );
    let mut lines = vec![same; 5];
    lines.push(text("finally done"));
    let (dir, script) = workspace(&lines, "[stall]\nenabled = false\n");
    let out = agent_run(dir.path(), &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert!(events(&transcript(dir.path(), &summary), "stall_nudge").is_empty());
}
