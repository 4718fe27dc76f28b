//! `lsm runs show` on the default store, the run folders' files.

use super::*;

fn show(dir: &Path, args: &[&str]) -> std::process::Output {
    run(lsm(dir)
        .args(["runs", "show"])
        .args(args)
        .args(["--agents-folder", "Agents"]))
}

/// A run recorded in its folder is shown like a run of the PostgreSQL store: status, agent,
/// task, usage, tools, artifacts and its last events, as text and as JSON with the store's
/// field names; an unknown id is a usage error that names it and says how to list the runs.
#[test]
fn runs_show_reads_a_run_from_its_folder() {
    let (dir, script) = workspace_with_script(&[
        call("read_file", json!({"path": "notes.md"})),
        call(
            "write_file",
            json!({"path": "out.md", "content": "short notes"}),
        ),
        text("Wrote out.md."),
    ]);
    let out = agent_run(dir.path(), &script, &["--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    let run_id = summary["run_id"].as_str().unwrap();

    let out = show(dir.path(), &[run_id, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = stdout_json(&out);
    assert_eq!(shown["run_id"], run_id);
    assert_eq!(shown["status"], "completed");
    assert_eq!(shown["agent"], "general");
    assert_eq!(shown["topic"], "work on the notes");
    assert!(shown["started_at"].is_string(), "{shown}");
    assert_eq!(shown["summary"], summary);
    assert_eq!(shown["summary"]["token_usage"]["iterations"], 3);
    assert_eq!(
        shown["summary"]["tool_sequence"],
        json!(["read_file", "write_file"])
    );
    let artifacts = shown["summary"]["artifacts_created"].as_array().unwrap();
    assert!(
        artifacts[0].as_str().unwrap().ends_with("out.md"),
        "{artifacts:?}"
    );
    // The PostgreSQL row's fields, each of them.
    for field in [
        "request",
        "created_at",
        "finished_at",
        "lease_owner",
        "lease_until",
        "lease_expired",
        "attempts",
        "cancel_requested",
        "last_seq",
    ] {
        assert!(shown.get(field).is_some(), "no {field}: {shown}");
    }
    let events = shown["last_events"].as_array().unwrap();
    let last = events.last().unwrap();
    assert_eq!(last["event"], "run_finished", "{events:?}");
    assert_eq!(last["seq"], shown["last_seq"]);
    assert!(
        events.iter().any(|e| e["event"] == "tool_result"),
        "{events:?}"
    );

    let out = show(dir.path(), &[run_id]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        format!("run {run_id}"),
        "status: completed".to_string(),
        "agent: general".to_string(),
        "task: work on the notes".to_string(),
        "usage: 3 LLM call(s), 45 of ".to_string(),
        "tools: read_file, write_file".to_string(),
        format!("artifact: {}", artifacts[0].as_str().unwrap()),
        "last events:".to_string(),
    ] {
        assert!(text.contains(&line), "no `{line}` in:\n{text}");
    }
    assert!(text.contains("run_finished"), "{text}");

    let out = show(dir.path(), &["20990101_000000_deadbeef"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("20990101_000000_deadbeef") && err.contains("lsm runs list"),
        "{err}"
    );
}
