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
        json!({"path": "notes.md", "content": "# Notes\n"}),
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
                json!({"path": "notes.md", "content": format!("# Notes, draft {k}\n")}),
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
        json!({"path": "notes.md", "content": "# Notes\n"}),
    );
    let mut lines = vec![same; 5];
    lines.push(text("finally done"));
    let (dir, script) = workspace(&lines, "[stall]\nenabled = false\n");
    let out = agent_run(dir.path(), &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert!(events(&transcript(dir.path(), &summary), "stall_nudge").is_empty());
}

// ---------- hooks ----------

/// Write an executable `/bin/sh` script `name` under the test's `hooks/` folder; returns its
/// absolute path (a hook command's program; its own folder is readable inside the sandbox).
fn hook_script(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let hooks = dir.join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let path = hooks.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn toml_hook(point: &str, program: &str, extra: &str) -> String {
    format!("[[hooks.{point}]]\ncommand = [{program:?}]\n{extra}\n")
}

#[test]
fn a_pre_tool_hook_denies_write_file_outside_docs_and_the_model_sees_why() {
    let lines = [
        call(
            "write_file",
            json!({"path": "docs/a.md", "content": "# A\n"}),
        ),
        call("write_file", json!({"path": "notes.md", "content": "x\n"})),
        text("Wrote docs/a.md."),
    ];
    let (dir, script) = workspace(&lines, "");
    // The event arrives as JSON on stdin; exit 2 denies with stderr as the reason.
    let hook = hook_script(
        dir.path(),
        "docs_only.sh",
        "input=$(cat)\ncase \"$input\" in\n  *'\"path\":\"docs/'*) exit 0 ;;\n           *) echo 'write_file may only write under docs/' >&2; exit 2 ;;\nesac\n",
    );
    let config = std::fs::read_to_string(dir.path().join("lsm.toml")).unwrap()
        + &toml_hook(
            "pre_tool",
            &hook,
            "tools = [\"write_file\"]\ntimeout_seconds = 20",
        );
    std::fs::write(dir.path().join("lsm.toml"), config).unwrap();
    let out = agent_run(dir.path(), &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert!(
        dir.path().join("ws/docs/a.md").is_file(),
        "allowed under docs/"
    );
    assert!(
        !dir.path().join("ws/notes.md").exists(),
        "denied outside docs/"
    );
    let lines = transcript(dir.path(), &summary);
    let decisions: Vec<&str> = events(&lines, "hook_decision")
        .iter()
        .map(|e| e["decision"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, ["allow", "deny"]);
    let denied = events(&lines, "tool_denied");
    assert_eq!(denied.len(), 1);
    let reason = denied[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("pre_tool hook") && reason.contains("may only write under docs/"),
        "{reason}"
    );
    assert_eq!(summary["approvals_denials"]["denials"], 1, "{summary}");
}

#[test]
fn a_pre_tool_hook_that_times_out_fails_closed_and_is_recorded() {
    let lines = [
        call(
            "write_file",
            json!({"path": "docs/a.md", "content": "# A\n"}),
        ),
        text("Could not write."),
    ];
    let (dir, script) = workspace(&lines, "");
    let hook = hook_script(dir.path(), "slow.sh", "exec sleep 30\n");
    let config = std::fs::read_to_string(dir.path().join("lsm.toml")).unwrap()
        + &toml_hook("pre_tool", &hook, "timeout_seconds = 1");
    std::fs::write(dir.path().join("lsm.toml"), config).unwrap();
    let out = agent_run(dir.path(), &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert!(!dir.path().join("ws/docs/a.md").exists(), "failed closed");
    let lines = transcript(dir.path(), &summary);
    let decision = events(&lines, "hook_decision")[0];
    assert_eq!(decision["decision"], "deny");
    assert_eq!(decision["runs"][0]["outcome"], "failed");
    assert!(
        decision["runs"][0]["message"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{decision}"
    );
}

#[test]
fn an_agent_stop_hook_blocks_twice_then_the_stop_is_forced() {
    let lines = [
        text("Done, first try."),
        text("Done, second try."),
        text("Done, third try."),
        text("never reached"),
    ];
    let (dir, script) = workspace(&lines, "");
    let block = hook_script(
        dir.path(),
        "block.sh",
        "cat >/dev/null\necho '{\"reason\": \"run the checks first\"}'\nexit 2\n",
    );
    let observe = hook_script(dir.path(), "observe.sh", "cat >/dev/null\nexit 0\n");
    let config = std::fs::read_to_string(dir.path().join("lsm.toml")).unwrap()
        + &toml_hook("agent_stop", &block, "")
        + &toml_hook("run_start", &observe, "")
        + &toml_hook("run_end", &observe, "");
    std::fs::write(dir.path().join("lsm.toml"), config).unwrap();
    let out = agent_run(dir.path(), &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "done");
    assert_eq!(summary["final_text"], "Done, third try.");
    let lines = transcript(dir.path(), &summary);
    let blocked = events(&lines, "stop_blocked");
    assert_eq!(blocked.len(), 2);
    assert_eq!(blocked[0]["reason"], "run the checks first");
    let forced = events(&lines, "stop_forced");
    assert_eq!(forced.len(), 1, "the transcript says the stop was forced");
    assert_eq!(forced[0]["blocks"], 2);
    let points: Vec<&str> = events(&lines, "hook_decision")
        .iter()
        .map(|e| e["hook"].as_str().unwrap())
        .collect();
    assert_eq!(
        points,
        [
            "run_start",
            "agent_stop",
            "agent_stop",
            "agent_stop",
            "run_end"
        ]
    );
}
