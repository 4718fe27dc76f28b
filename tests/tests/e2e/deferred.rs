//! Deferred tools from the command line: a call of a tool handled outside `lsm` pauses the
//! run (status `deferred`, exit code 10, the call in the summary and in `lsm runs show`),
//! also when the process is killed right after; `lsm runs resume --tool-result ID=FILE`
//! supplies the result and the run goes on.

use serde_json::{Value, json};

use super::resume::Ws;
use super::{call, stderr, stdout_json, text};

const CONFIG: &str = "[agents.extra_tools]\ngeneral = [\"deploy\"]\n\n\
[agents.deferred_tools.deploy]\n\
description = \"Deploy a version to production (a person does it).\"\n\
parameters = { type = \"object\", properties = { version = { type = \"string\" } }, required = [\"version\"] }\n";

fn deferring_ws() -> Ws {
    let ws = Ws::new(&[
        call("deploy", json!({"version": "1.2"})),
        text("Deployed, as the operator said."),
    ]);
    std::fs::write(ws.path().join("lsm.toml"), CONFIG).unwrap();
    std::fs::write(ws.path().join("result.txt"), "version 1.2 is live\n").unwrap();
    ws
}

fn start(ws: &Ws, env: &[(&str, String)]) -> std::process::Output {
    let mut c = ws.cmd();
    c.args(["agent", "run", "general", "--task", "deploy 1.2"])
        .arg("--provider")
        .arg(format!("scripted:{}", ws.script.display()))
        .args(["--agents-folder", "Agents", "--yes", "--json"]);
    for (k, v) in env {
        c.env(k, v);
    }
    lsm_e2e::run(&mut c)
}

fn journal(ws: &Ws) -> Vec<Value> {
    lsm_test_support::script::read_jsonl(&ws.run_dir("general").join("transcript.jsonl"))
}

#[test]
fn a_deferred_call_pauses_the_run_and_its_supplied_result_lets_it_finish() {
    let ws = deferring_ws();
    let out = start(&ws, &[]);
    assert_eq!(out.status.code(), Some(10), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["status"], "deferred", "{summary:#}");
    assert_eq!(summary["deferred_call"]["tool"], "deploy");
    assert_eq!(
        summary["deferred_call"]["arguments"],
        json!({"version": "1.2"})
    );
    let id = summary["deferred_call"]["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    let run_id = summary["run_id"].as_str().unwrap().to_string();
    assert!(journal(&ws).iter().any(|e| e["event"] == "tool_deferred"));
    assert!(!journal(&ws).iter().any(|e| e["event"] == "run_finished"));

    // Listed and shown as waiting.
    let mut list = ws.cmd();
    list.args(["runs", "list", "--agents-folder", "Agents", "--json"]);
    let listed = lsm_e2e::run(&mut list);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("\"status\":\"deferred\"")
            || String::from_utf8_lossy(&listed.stdout).contains("\"status\": \"deferred\""),
        "{}",
        String::from_utf8_lossy(&listed.stdout)
    );
    let mut show = ws.cmd();
    show.args(["runs", "show", &run_id, "--agents-folder", "Agents"]);
    let shown = String::from_utf8_lossy(&lsm_e2e::run(&mut show).stdout).into_owned();
    assert!(
        shown.contains(&format!("waiting for: call {id} of deploy")),
        "{shown}"
    );

    // Resumed without the result: refused, saying which call waits.
    let refused = ws.resume(&run_id, &[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains(&format!("--tool-result {id}=FILE")),
        "{}",
        stderr(&refused)
    );
    // Not finished: it can be resumed, not continued.
    let mut c = ws.cmd();
    c.args([
        "agent",
        "run",
        "general",
        "--task",
        "again",
        "--continue",
        &run_id,
    ])
    .arg("--provider")
    .arg(format!("scripted:{}", ws.script.display()))
    .args(["--agents-folder", "Agents"]);
    let refused = lsm_e2e::run(&mut c);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("has not finished"),
        "{}",
        stderr(&refused)
    );
    // A result for another call: refused.
    let refused = ws.resume(&run_id, &["--tool-result", "nope=result.txt"]);
    assert_eq!(refused.status.code(), Some(2));

    let done = ws.resume(
        &run_id,
        &["--tool-result", &format!("{id}=result.txt"), "--json"],
    );
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    let summary = stdout_json(&done);
    assert_eq!(summary["status"], "completed");
    assert!(summary.get("deferred_call").is_none());
    let result = journal(&ws)
        .into_iter()
        .find(|e| e["event"] == "tool_result" && e["call_id"] == id.as_str())
        .unwrap();
    assert_eq!(result["content"], "version 1.2 is live\n");
}

#[test]
fn a_run_killed_right_after_deferring_resumes_with_the_result() {
    // Where the deferral is recorded: learnt from a run of the same script.
    let probe = deferring_ws();
    assert_eq!(start(&probe, &[]).status.code(), Some(10));
    let seq = journal(&probe)
        .iter()
        .find(|e| e["event"] == "tool_deferred")
        .unwrap()["seq"]
        .as_u64()
        .unwrap();

    let ws = deferring_ws();
    let killed = start(&ws, &[("LSM_TEST_CRASH_AFTER_SEQ", seq.to_string())]);
    assert_ne!(
        killed.status.code(),
        Some(10),
        "killed before it could exit 10"
    );
    let lines = journal(&ws);
    assert_eq!(lines.last().unwrap()["event"], "tool_deferred");
    let id = lines.last().unwrap()["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    let run_id = lines[0]["run_id"].as_str().unwrap().to_string();
    let done = ws.resume(
        &run_id,
        &["--tool-result", &format!("{id}=result.txt"), "--json"],
    );
    assert_eq!(done.status.code(), Some(0), "{}", stderr(&done));
    assert_eq!(
        stdout_json(&done)["final_text"],
        "Deployed, as the operator said."
    );
}
