//! Agents as data, through the `lsm` binary: definition files in the project's `lsm-agents/`
//! folder, written as docs/AGENTS.md documents them, listed, shown, checked, run against a
//! scripted model and an HTTP model, and overriding a built-in.

use std::path::Path;

use lsm_e2e::{lsm, run};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{call, stderr, stdout_json, text};

/// The reviewer of docs/AGENTS.md's first example, shortened: a survey, then one review per
/// file the survey lists, saved as `review`.
const REVIEWER: &str = r#"+++
name = "reviewer"
description = "Reviews the files of src/ and writes what it found."
tools = ["read_folder", "read_file"]
max_iterations = 6

[[phases]]
name = "survey"
tools = ["read_folder"]
max_iterations = 2
prompt = "List the files under src/ to review for: {{task}}. Reply with one path per line."

[[phases]]
name = "review"
for_each = "survey"
context = "file:{{item}}"
tools = ["read_file"]
max_iterations = 3
prompt = "Review {{item}} for: {{task}}. Reply with your findings."
save_as = "review"
+++
You review code following the house rules.
"#;

/// A project with `src/a.rs`, `src/b.rs`, the definition `file` = `text` and a script.
fn project(file: &str, definition: &str, script: &[Value]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), "fn a() {}\n").unwrap();
    std::fs::write(dir.path().join("src/b.rs"), "fn b() {}\n").unwrap();
    std::fs::create_dir_all(dir.path().join("lsm-agents")).unwrap();
    std::fs::write(dir.path().join("lsm-agents").join(file), definition).unwrap();
    lsm_test_support::script::write(dir.path(), "script.jsonl", script).unwrap();
    dir
}

fn lsm_in(dir: &Path, args: &[&str]) -> std::process::Output {
    run(lsm(dir).args(args))
}

/// The row of agent `name` in `lsm agent list --json`'s output.
fn agent_row(rows: &Value, name: &str) -> Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no agent {name} in {rows}"))
        .clone()
}

/// Every event of the run that `summary` (`--json`) describes, in order.
fn events(dir: &Path, summary: &Value) -> Vec<Value> {
    let run_dir = dir
        .join(".lsm/agents")
        .join(summary["agent_name"].as_str().unwrap())
        .join("logs")
        .join(summary["run_id"].as_str().unwrap());
    std::fs::read_to_string(run_dir.join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_two_phase_definition_with_for_each_runs_and_the_transcript_shows_its_phases() {
    let dir = project(
        "reviewer.md",
        REVIEWER,
        &[
            call("read_folder", json!({"path": "src"})),
            text("src/a.rs\nsrc/b.rs"),
            text("a.rs: fine."),
            text("b.rs: needs a doc comment."),
        ],
    );
    let out = lsm_in(
        dir.path(),
        &[
            "agent",
            "run",
            "reviewer",
            "--task",
            "style",
            "--provider",
            "scripted:script.jsonl",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(summary["status"], "completed");
    let phases: Vec<Value> = events(dir.path(), &summary)
        .into_iter()
        .filter(|e| e["event"] == "phase_started")
        .collect();
    let labels: Vec<&str> = phases
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["__default__", "file:src/a.rs", "file:src/b.rs"]);
    let first = &phases[0]["request"];
    assert_eq!(first["tool_names"], json!(["read_folder"]));
    assert_eq!(first["max_iterations"], 2);
    assert_eq!(
        first["user_message"],
        "List the files under src/ to review for: style. Reply with one path per line."
    );
    let second = &phases[1]["request"];
    assert_eq!(second["tool_names"], json!(["read_file"]));
    assert_eq!(
        second["user_message"],
        "Review src/a.rs for: style. Reply with your findings."
    );
    assert_eq!(
        second["completes_task"], true,
        "the last phase completes the task"
    );
    let artifacts = dir.path().join(".lsm/agents/reviewer/artifacts");
    let saved: Vec<_> = std::fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    let name = saved[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("review_") && name.ends_with(".md"),
        "{name}"
    );
    let review = std::fs::read_to_string(&saved[0]).unwrap();
    assert_eq!(
        review,
        "### src/a.rs\n\na.rs: fine.\n\n### src/b.rs\n\nb.rs: needs a doc comment.\n"
    );
}

#[test]
fn list_show_and_check_name_the_definition_and_where_it_comes_from() {
    let dir = project("reviewer.md", REVIEWER, &[]);
    let out = lsm_in(dir.path(), &["agent", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows = stdout_json(&out);
    let reviewer = agent_row(&rows, "reviewer");
    assert_eq!(reviewer["source"], "project");
    assert!(
        reviewer["path"]
            .as_str()
            .unwrap()
            .ends_with("lsm-agents/reviewer.md")
    );
    assert_eq!(reviewer["tools"], json!(["read_folder", "read_file"]));
    assert_eq!(reviewer["phases"], json!(["survey", "review"]));
    assert_eq!(agent_row(&rows, "general")["source"], "builtin");

    let out = lsm_in(dir.path(), &["agent", "show", "reviewer", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = stdout_json(&out);
    assert_eq!(
        shown["system_prompt"],
        "You review code following the house rules."
    );
    assert_eq!(shown["limits"]["max_iterations"]["value"], 6);
    assert!(
        shown["limits"]["max_iterations"]["source"]
            .as_str()
            .unwrap()
            .starts_with("definition")
    );
    assert_eq!(shown["phases"][1]["for_each"]["phase"], "survey");
    assert_eq!(shown["tools"][0]["name"], "read_folder");

    let out = lsm_in(dir.path(), &["agent", "show", "reviewer"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("source: project "), "{text}");
    assert!(
        text.contains("You review code following the house rules."),
        "{text}"
    );

    let out = lsm_in(dir.path(), &["agent", "check", "lsm-agents/reviewer.md"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("defines agent 'reviewer'"));
}

#[test]
fn a_bad_definition_stops_every_agent_command_with_its_file_and_line() {
    let bad = REVIEWER.replace(
        "tools = [\"read_file\"]",
        "tools = [\"read_file\", \"write_file\"]",
    );
    let dir = project("reviewer.md", &bad, &[text("never")]);
    for args in [
        vec!["agent", "check", "lsm-agents/reviewer.md"],
        vec!["agent", "list"],
        vec![
            "agent",
            "run",
            "general",
            "--task",
            "t",
            "--provider",
            "scripted:script.jsonl",
        ],
    ] {
        let out = lsm_in(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("lsm-agents/reviewer.md:17:")
                && err.contains("tool 'write_file' is not among the agent's tools"),
            "{args:?}: {err}"
        );
    }
    assert!(!dir.path().join(".lsm/agents").exists(), "no run started");

    // A tool no configuration registers, and a key that would lift a limit.
    let unknown = REVIEWER.replace(
        "\"read_folder\", \"read_file\"]",
        "\"read_folder\", \"read_file\", \"teleport\"]",
    );
    std::fs::write(dir.path().join("lsm-agents/reviewer.md"), unknown).unwrap();
    let out = lsm_in(
        dir.path(),
        &["agent", "check", "lsm-agents/reviewer.md", "--json"],
    );
    assert_eq!(out.status.code(), Some(2));
    let verdict = stdout_json(&out);
    assert_eq!(verdict["ok"], false);
    assert_eq!(verdict["line"], 4);
    let error = verdict["error"].as_str().unwrap();
    assert!(
        error.contains("unknown tool 'teleport'") && error.contains("read_file"),
        "{error}"
    );

    let greedy = REVIEWER.replace(
        "max_iterations = 6\n",
        "max_iterations = 6\nmax_tokens_budget = 100000000\n",
    );
    std::fs::write(dir.path().join("lsm-agents/reviewer.md"), greedy).unwrap();
    let out = lsm_in(dir.path(), &["agent", "check", "lsm-agents/reviewer.md"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("lsm-agents/reviewer.md:6: unknown field `max_tokens_budget`"),
        "{}",
        stderr(&out)
    );
}

/// A project's `general.md` replaces the built-in: the model gets its system prompt and only
/// its tools, on the wire.
#[tokio::test(flavor = "multi_thread")]
async fn a_project_definition_overrides_a_builtin_on_the_wire() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "All read."},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 3}
        })))
        .mount(&server)
        .await;
    let general = "+++\nname = \"general\"\ndescription = \"Our own general agent.\"\ntools = [\"read_file\"]\n+++\nYou are the house assistant. Read before you answer.\n";
    let dir = project("general.md", general, &[]);
    let url = format!("{}/v1", server.uri());
    let cwd = dir.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        run(lsm(&cwd)
            .args(["agent", "run", "general", "--task", "What is in src/a.rs?"])
            .args([
                "--provider",
                "compatible",
                "--model",
                "m",
                "--base-url",
                &url,
            ]))
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    let body: Value = serde_json::from_slice(&requests[0].body).unwrap();
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(
        system.starts_with("You are the house assistant. Read before you answer."),
        "{system}"
    );
    assert!(
        !system.contains("general-purpose"),
        "the built-in prompt is gone"
    );
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"read_file"), "{tools:?}");
    assert!(
        !tools.contains(&"write_file") && !tools.contains(&"edit_file"),
        "only the definition's tools (and control tools): {tools:?}"
    );

    let listed = stdout_json(&lsm_in(dir.path(), &["agent", "list", "--json"]));
    let row = agent_row(&listed, "general");
    assert_eq!(row["source"], "project");
    assert_eq!(row["overrides"], json!([{"kind": "builtin", "path": null}]));
}

/// `[agents.extra_tools]` shows in `agent list` as it does in `tools list --agent`, and a
/// broken `lsm.toml` is an error naming the file and line, not a silent built-in list.
#[test]
fn agent_list_reads_the_configuration() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents.extra_tools]\ngeneral = [\"bash\"]\n",
    )
    .unwrap();
    let table = lsm_in(dir.path(), &["agent", "list"]);
    assert_eq!(table.status.code(), Some(0), "{}", stderr(&table));
    insta::assert_snapshot!(
        "agent_list_with_extra_tools",
        String::from_utf8_lossy(&table.stdout)
    );
    let rows = stdout_json(&lsm_in(dir.path(), &["agent", "list", "--json"]));
    let general = agent_row(&rows, "general");
    assert!(
        general["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("bash")),
        "{general}"
    );
    let out = lsm_in(dir.path(), &["agent", "show", "general"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("bash — [agents.extra_tools]") && text.contains("lsm.toml:2"),
        "{text}"
    );

    std::fs::write(dir.path().join("lsm.toml"), "[agents\nmax_iterations = 3\n").unwrap();
    let out = lsm_in(dir.path(), &["agent", "list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("lsm.toml"), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "no list printed");
}
