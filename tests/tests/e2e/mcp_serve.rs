//! `lsm mcp serve` driven by independent MCP clients: the Python `mcp` package from PyPI
//! (`tests/python/mcp_client.py`, in the virtual environment `.ci/run` installs at
//! `target/py-mcp`) over stdio and streamable HTTP; the loopback rule of `--http`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use lsm_e2e::{lsm, lsm_bin, run, workspace_root};
use serde_json::Value;

use super::stderr;

/// The Python with the `mcp` package: `$MCP_PYTHON`, else `target/py-mcp/bin/python`.
/// `None` (the test says why and passes) when it is absent, unless `MCP_PYTHON_REQUIRED=1`
/// (CI, after `.ci/run` installed it): then its absence fails the test.
fn mcp_python() -> Option<PathBuf> {
    let python = std::env::var_os("MCP_PYTHON").map_or_else(
        || workspace_root().join("target/py-mcp/bin/python"),
        PathBuf::from,
    );
    let works = Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        return Some(python);
    }
    assert!(
        std::env::var("MCP_PYTHON_REQUIRED").as_deref() != Ok("1"),
        "MCP_PYTHON_REQUIRED=1 but {} cannot import mcp: run `bash .ci/run` (it installs it)",
        python.display()
    );
    eprintln!(
        "skipped: no Python with the `mcp` package at {} (`bash .ci/run` installs it)",
        python.display()
    );
    None
}

/// A workspace with the knowledge-base fixture ingested and a one-line script for agents.
fn served_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    super::copy_dir(&workspace_root().join("tests/fixtures/kb"), dir.path());
    std::fs::write(
        dir.path().join("hello.jsonl"),
        "{\"text\": \"hello from the agent\", \"usage\": {\"input_tokens\": 10, \"output_tokens\": 5}}\n",
    )
    .unwrap();
    let out = run(lsm(dir.path()).args(["ingest", "notes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    dir
}

fn python_client(python: &Path, args: &[&str]) -> Value {
    let out = Command::new(python)
        .arg(workspace_root().join("tests/python/mcp_client.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What both transports must answer.
fn check_answers(answers: &Value, dir: &Path) {
    let tools: Vec<&str> = answers["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for name in ["query_context", "source_map", "find_section", "run_agent"] {
        assert!(tools.contains(&name), "{name} missing from {tools:?}");
    }
    assert!(!tools.contains(&"write_file"), "{tools:?}");
    assert_eq!(answers["query_context"]["is_error"], false, "{answers}");
    assert!(
        answers["query_context"]["text"]
            .as_str()
            .unwrap()
            .contains("wings.md"),
        "{answers}"
    );
    // `run_agent` answers with the run summary, as `lsm agent run --output-format json`.
    assert_eq!(answers["run_agent"]["is_error"], false, "{answers}");
    let summary: Value =
        serde_json::from_str(answers["run_agent"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(summary["status"], "completed", "{summary}");
    assert_eq!(summary["final_text"], "hello from the agent");
    assert_eq!(summary["token_usage"]["max_tokens_budget"], 5000);
    assert!(summary["schema_version"].as_u64().is_some(), "{summary}");
    let run_dir = dir
        .join(".lsm/agents/general/logs")
        .join(summary["run_id"].as_str().unwrap());
    assert!(
        run_dir.join("run_summary.json").is_file(),
        "{}",
        run_dir.display()
    );
    // A research run needs a topic: an error result naming it, not a crash.
    assert_eq!(answers["bad_agent"]["is_error"], true, "{answers}");
    assert!(
        answers["bad_agent"]["text"]
            .as_str()
            .unwrap()
            .contains("topic"),
        "{answers}"
    );
}

#[test]
fn the_python_mcp_client_uses_lsm_mcp_serve_over_stdio() {
    let Some(python) = mcp_python() else { return };
    let dir = served_workspace();
    let answers = python_client(
        &python,
        &[
            "stdio",
            lsm_bin().to_str().unwrap(),
            dir.path().to_str().unwrap(),
            "--provider",
            "scripted:hello.jsonl",
        ],
    );
    check_answers(&answers, dir.path());
}

/// `lsm mcp serve --http 127.0.0.1:0`, and the URL it prints.
fn serve_http(dir: &Path) -> (std::process::Child, String) {
    let mut child = lsm(dir)
        .args([
            "mcp",
            "serve",
            "--provider",
            "scripted:hello.jsonl",
            "--http",
            "127.0.0.1:0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_string();
    (child, url)
}

#[test]
fn the_python_mcp_client_uses_lsm_mcp_serve_over_streamable_http() {
    let Some(python) = mcp_python() else { return };
    let dir = served_workspace();
    let (mut child, url) = serve_http(dir.path());
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let answers = python_client(&python, &["http", &url]);
    child.kill().unwrap();
    child.wait().unwrap();
    check_answers(&answers, dir.path());
}

#[test]
fn mcp_serve_http_refuses_a_non_loopback_address_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(lsm(dir.path()).args(["mcp", "serve", "--http", "0.0.0.0:0"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("not a loopback address") && err.contains("--allow-non-loopback"),
        "{err}"
    );
    let out = run(lsm(dir.path()).args(["mcp", "serve", "--http", "nowhere"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
