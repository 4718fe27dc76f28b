//! `--output-format text|json|stream-json` on every command that runs something: the final
//! JSON carries `schema_version` and the final answer; `stream-json` ends with a `result`
//! line; `--json` stays an alias of `json`.

use lsm_e2e::{lsm, run, workspace_root};
use serde_json::Value;

use super::{stderr, stdout_json, text, workspace_with_script};

fn lines(out: &std::process::Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn agent_runs_end_their_stream_with_the_result_and_json_is_an_alias() {
    let (dir, script) = workspace_with_script(&[text("the answer")]);
    let provider = format!("scripted:{}", script.display());
    let base = || lsm_e2e::general_run(dir.path(), "t", &provider);
    let json = run(base().args(["--output-format", "json"]));
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let summary = stdout_json(&json);
    assert_eq!(summary["final_text"], "the answer");
    assert!(summary["schema_version"].as_u64().is_some());
    let alias = stdout_json(&run(base().arg("--json")));
    assert_eq!(alias["final_text"], summary["final_text"]);
    let stream = run(base().args(["--output-format", "stream-json"]));
    assert_eq!(stream.status.code(), Some(0), "{}", stderr(&stream));
    let events = lines(&stream);
    let last = events.last().unwrap();
    assert_eq!(last["event"], "result");
    assert_eq!(last["seq"], 0);
    assert_eq!(last["final_text"], "the answer");
    assert_eq!(last["exit_code"], 0);
    assert_eq!(last["summary"]["run_id"], last["run_id"]);
    assert!(last["schema_version"].as_u64().is_some());
    assert!(events.iter().any(|e| e["event"] == "run_finished"));
    // Text: the answer on stdout.
    let plain = run(base().args(["--output-format", "text"]));
    assert!(String::from_utf8_lossy(&plain.stdout).contains("the answer"));
}

#[test]
fn ingest_query_and_ping_speak_the_same_formats() {
    let dir = tempfile::tempdir().unwrap();
    super::copy_dir(&workspace_root().join("tests/fixtures/kb"), dir.path());
    let out = run(lsm(dir.path()).args(["ingest", "notes", "--output-format", "stream-json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events = lines(&out);
    let files: Vec<&Value> = events.iter().filter(|e| e["event"] == "file").collect();
    assert_eq!(files.len(), 3, "{events:?}");
    assert_eq!(files[0]["status"], "indexed");
    let last = events.last().unwrap();
    assert_eq!(
        (last["event"].as_str(), last["schema_version"].as_u64()),
        (Some("result"), Some(1))
    );
    assert_eq!(last["total_files"], 3);

    let query = ["query", "flutter", "--provider", "scripted:answer.jsonl"];
    let out = run(lsm(dir.path())
        .args(query)
        .args(["--output-format", "json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let response = stdout_json(&out);
    assert_eq!(response["schema_version"], 1);
    assert!(response["answer"].as_str().unwrap().contains("aeroelastic"));
    let out = run(lsm(dir.path())
        .args(query)
        .args(["--output-format", "stream-json"]));
    let events = lines(&out);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event"], "result");
    assert_eq!(events[0]["answer"], response["answer"]);

    let out = run(lsm(dir.path())
        .args(["llm", "ping", "--provider", "scripted:answer.jsonl"])
        .args(["--output-format", "json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ping = stdout_json(&out);
    assert_eq!(
        (ping["schema_version"].as_u64(), ping["ok"].as_bool()),
        (Some(1), Some(true))
    );
    assert!(ping["reply"].as_str().unwrap().contains("Flutter"));
    // --json and --output-format together: a usage error.
    let out = run(lsm(dir.path())
        .args(query)
        .args(["--json", "--output-format", "json"]));
    assert_eq!(out.status.code(), Some(2));
}
