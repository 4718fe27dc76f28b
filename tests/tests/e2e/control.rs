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
fn transcript(dir: &std::path::Path, summary: &Value) -> Vec<Value> {
    super::transcript_of(dir, summary)
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

// ---------- task contracts, stop modes, work items ----------

/// `lsm agent run general` with `extra` flags.
fn agent_run_with(cwd: &Path, script: &Path, extra: &[&str]) -> std::process::Output {
    let mut cmd = lsm(cwd);
    cmd.args(["agent", "run", "general", "--task", "write the notes"])
        .arg("--provider")
        .arg(format!("scripted:{}", script.display()))
        .args(["--config", "lsm.toml", "--json"])
        .args(extra);
    run(&mut cmd)
}

const NOTES_CONTRACT: &str = r##"
description = "the notes exist and say what they are"
required_outputs = ["notes.md"]

[[require]]
kind = "tool_succeeded"
tool = "write_file"
args_match = { path = "notes.md" }

[[require]]
kind = "file_contains"
path = "notes.md"
text = "# Notes"
"##;

/// A `strict_automation` run of `lines` held to [`NOTES_CONTRACT`].
fn strict_run_with_notes_contract(lines: &[Value]) -> (tempfile::TempDir, std::process::Output) {
    let (dir, script) = workspace(lines, "");
    std::fs::write(dir.path().join("contract.toml"), NOTES_CONTRACT).unwrap();
    let out = agent_run_with(
        dir.path(),
        &script,
        &[
            "--stop-mode",
            "strict_automation",
            "--contract",
            "contract.toml",
        ],
    );
    (dir, out)
}

fn declare(summary: &str) -> Value {
    call("work_complete", json!({"summary": summary}))
}

#[test]
fn a_strict_run_whose_contract_is_unmet_exits_8_and_lists_the_unmet_predicates() {
    // The model writes the wrong file and keeps declaring the task complete.
    let lines = [
        call("write_file", json!({"path": "other.md", "content": "x\n"})),
        declare("Wrote the notes."),
        declare("Wrote the notes, really."),
        declare("Done."),
        text("never reached"),
    ];
    let (dir, out) = strict_run_with_notes_contract(&lines);
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "contract_unmet", "{summary:#}");
    assert_eq!(summary["status"], "stopped");
    assert_eq!(summary["stop_mode"], "strict_automation");
    assert_eq!(summary["contract"]["satisfied"], false);
    let unmet: Vec<&str> = summary["contract"]["unmet"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(unmet.len(), 3, "{unmet:#?}");
    assert!(
        unmet[0].starts_with("tool_succeeded write_file"),
        "{unmet:?}"
    );
    assert!(unmet[1].starts_with("file_contains notes.md"), "{unmet:?}");
    assert_eq!(unmet[2], "required_output notes.md: no such file");
    let lines = transcript(dir.path(), &summary);
    assert_eq!(events(&lines, "completion_objected").len(), 2);
    let ended = events(&lines, "contract_unmet");
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0]["unmet"].as_array().unwrap().len(), 3);
    // The model was told what is unmet.
    let told = events(&lines, "completion_objected")[0]["message"]
        .as_str()
        .unwrap();
    assert!(told.contains("required_output notes.md"), "{told}");
}

#[test]
fn the_same_strict_run_with_its_contract_satisfied_exits_0() {
    let lines = [
        call(
            "write_file",
            json!({"path": "notes.md", "content": "# Notes\nSoil holds carbon.\n"}),
        ),
        declare("Wrote notes.md."),
        text("never reached"),
    ];
    let (_dir, out) = strict_run_with_notes_contract(&lines);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "done");
    assert_eq!(summary["contract"]["satisfied"], true, "{summary:#}");
    assert!(summary["contract"]["unmet"].as_array().unwrap().is_empty());
    assert!(
        summary["final_text"]
            .as_str()
            .unwrap()
            .contains("Wrote notes.md.")
    );
}

#[test]
fn strict_mode_from_lsm_toml_requires_work_complete_and_a_plain_answer_is_sent_back() {
    let lines = [
        text("All done."),
        text("All done."),
        text("All done, truly."),
        text("never reached"),
    ];
    let (dir, script) = workspace(&lines, "");
    let config = std::fs::read_to_string(dir.path().join("lsm.toml"))
        .unwrap()
        .replace(
            "[agents]\n",
            "[agents]\nstop_mode = \"strict_automation\"\n",
        );
    std::fs::write(dir.path().join("lsm.toml"), config).unwrap();
    let out = agent_run_with(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "contract_unmet");
    assert!(summary.get("contract").is_none(), "no contract configured");
    let lines = transcript(dir.path(), &summary);
    let objected = events(&lines, "completion_objected");
    assert_eq!(objected.len(), 2);
    assert_eq!(objected[0]["check"], "work_complete");
    // The same run in the default (interactive) mode ends done at once.
    let (dir, script) = workspace(&lines_of(&["All done."]), "");
    let out = agent_run_with(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

fn lines_of(texts: &[&str]) -> Vec<Value> {
    texts.iter().map(|t| text(t)).collect()
}

#[test]
fn an_interactive_run_accepts_its_stop_after_the_retries_and_the_summary_says_what_was_unmet() {
    let lines = [
        text("Finished."),
        text("Finished."),
        text("Finished, I promise."),
    ];
    let (dir, script) = workspace(&lines, "");
    std::fs::write(dir.path().join("contract.toml"), NOTES_CONTRACT).unwrap();
    let out = agent_run_with(dir.path(), &script, &["--contract", "contract.toml"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["run_outcome"], "done");
    assert_eq!(summary["stop_mode"], "interactive");
    assert_eq!(summary["contract"]["satisfied"], false);
    assert_eq!(summary["unmet_checks"].as_array().unwrap().len(), 3);
    let lines = transcript(dir.path(), &summary);
    assert_eq!(events(&lines, "stop_accepted").len(), 1);
}

#[test]
fn bad_contracts_and_stop_modes_are_usage_errors_naming_what_is_wrong() {
    let (dir, script) = workspace(&[text("x")], "");
    let out = agent_run_with(dir.path(), &script, &["--contract", "missing.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--contract missing.toml: cannot read the file"),
        "{}",
        stderr(&out)
    );
    std::fs::write(
        dir.path().join("bad.toml"),
        "[[require]]\nkind = \"file_exist\"\npath = \"a\"\n",
    )
    .unwrap();
    let out = agent_run_with(dir.path(), &script, &["--contract", "bad.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("bad.toml") && err.contains("file_exist"),
        "{err}"
    );
    let out = agent_run_with(dir.path(), &script, &["--stop-mode", "strict"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("strict_automation"),
        "{}",
        stderr(&out)
    );
    let config = std::fs::read_to_string(dir.path().join("lsm.toml")).unwrap()
        + "[agents.contracts.general]\n";
    std::fs::write(dir.path().join("lsm.toml"), config).unwrap();
    let out = agent_run_with(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no condition"), "{}", stderr(&out));
}

#[test]
fn work_items_are_kept_through_a_run_and_survive_a_kill_and_resume() {
    let lines = [
        call(
            "work_item_add",
            json!({"title": "Write notes.md", "priority": "high"}),
        ),
        call("work_item_add", json!({"title": "Check the notes"})),
        call(
            "write_file",
            json!({"path": "notes.md", "content": "# Notes\n"}),
        ),
        call("work_item_update", json!({"id": "w1", "status": "done"})),
        call(
            "work_item_set_artifact",
            json!({"id": "w1", "path": "notes.md"}),
        ),
        call("work_item_update", json!({"id": "w2", "status": "done"})),
        text("Both items are done."),
    ];
    // The reference: the whole run in one process.
    let (dir, script) = workspace(&lines, "");
    let config = std::fs::read_to_string(dir.path().join("lsm.toml"))
        .unwrap()
        .replace("[agents]\n", "[agents]\nwork_items = true\n");
    std::fs::write(dir.path().join("lsm.toml"), &config).unwrap();
    let out = agent_run_with(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let reference = stdout_json(&out);
    let items = reference["work_items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{reference:#}");
    assert_eq!(items[0]["artifact"], "notes.md");
    assert!(items.iter().all(|i| i["status"] == "done"));
    let ref_lines = transcript(dir.path(), &reference);
    let reminded = events(&ref_lines, "llm_request")
        .iter()
        .filter(|r| r["work_items"] == true)
        .count();
    assert_eq!(
        reminded, 5,
        "a reminder with every call while an item was open"
    );

    // Killed just after the first item's update, then resumed: the same ledger.
    let update_seq = ref_lines
        .iter()
        .find(|l| l["event"] == "work_item_changed" && l["action"] == "updated")
        .unwrap()["seq"]
        .as_u64()
        .unwrap();
    let (dir, script) = workspace(&lines, "");
    std::fs::write(dir.path().join("lsm.toml"), &config).unwrap();
    let mut cmd = lsm(dir.path());
    cmd.args(["agent", "run", "general", "--task", "write the notes"])
        .arg("--provider")
        .arg(format!("scripted:{}", script.display()))
        .args(["--config", "lsm.toml", "--json"])
        .env("LSM_TEST_CRASH_AFTER_SEQ", update_seq.to_string());
    let crashed = run(&mut cmd);
    assert!(crashed.status.code().is_none(), "{}", stderr(&crashed));
    let logs = dir.path().join("Agents/general/logs");
    let run_id = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .unwrap()
        .file_name()
        .into_string()
        .unwrap();
    let mut cmd = lsm(dir.path());
    cmd.args(["runs", "resume", &run_id, "--config", "lsm.toml", "--json"]);
    let resumed = run(&mut cmd);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let summary = stdout_json(&resumed);
    assert_eq!(summary["work_items"], reference["work_items"]);
    let lines = transcript(dir.path(), &summary);
    assert_eq!(
        events(&lines, "work_item_changed").len(),
        events(&ref_lines, "work_item_changed").len(),
        "no change recorded twice"
    );
}

/// The lines the human summary prints from what the model chose — a work item's title, a
/// written file's name — are shown without obeying an escape sequence in them.
#[test]
fn the_human_summary_shows_a_work_item_and_an_artifact_without_obeying_them() {
    let lines = [
        call(
            "work_item_add",
            json!({"title": "Tidy \u{1b}]0;owned\u{7} notes"}),
        ),
        call(
            "write_file",
            json!({"path": "docs/a\u{1b}[2J.md", "content": "# A\n"}),
        ),
        text("Stopping here."),
        text("Stopping here."),
        text("Stopping here."),
        text("Stopping here."),
    ];
    let (dir, script) = workspace(&lines, "");
    let config = std::fs::read_to_string(dir.path().join("lsm.toml"))
        .unwrap()
        .replace("[agents]\n", "[agents]\nwork_items = true\n");
    std::fs::write(dir.path().join("lsm.toml"), &config).unwrap();
    let mut cmd = lsm(dir.path());
    cmd.args(["agent", "run", "general", "--task", "tidy the notes"])
        .arg("--provider")
        .arg(format!("scripted:{}", script.display()))
        .args(["--config", "lsm.toml"]);
    let out = run(&mut cmd);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("Tidy �]0;owned� notes") && shown.contains("a�[2J.md"),
        "{shown:?}\n{}",
        stderr(&out)
    );
    assert!(!shown.contains(['\u{1b}', '\u{7}']), "{shown:?}");
}
