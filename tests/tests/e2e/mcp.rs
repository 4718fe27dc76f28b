//! `lsm mcp list` and agent runs using an MCP server's tools (the in-repo stdio test server).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use lsm_e2e::{lsm, run, workspace_root};
use serde_json::{Value, json};

use super::{agent_run, call, stderr, stdout_json, text, workspace_with_script};

/// The test server's binary: `$LSM_TEST_MCP_SERVER` if set (`cargo xtask ci` names the one
/// `cargo test --workspace` built for lsm-mcp's own tests: a test fixture, so its feature set
/// does not matter), else built once like `lsm` itself.
fn test_server() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("LSM_TEST_MCP_SERVER") {
            let p = PathBuf::from(p);
            assert!(
                p.is_file(),
                "LSM_TEST_MCP_SERVER names {}, which is not a file",
                p.display()
            );
            return p;
        }
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args([
                "build",
                "-p",
                "lsm-mcp",
                "--bin",
                "lsm-mcp-test-server",
                "--message-format=json-render-diagnostics",
            ])
            .current_dir(workspace_root())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|m| {
                m["reason"] == "compiler-artifact" && m["target"]["name"] == "lsm-mcp-test-server"
            })
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .unwrap()
    })
}

/// `lsm.toml` with the test server as `t` (echo needs no permission) plus `extra`.
fn write_config(dir: &Path, extra: &str) {
    let config = format!(
        "[mcp.servers.t]\ncommand = {:?}\n[mcp.servers.t.tools.echo]\nneeds_permission = false\n{extra}",
        test_server().display().to_string()
    );
    std::fs::write(dir.join("lsm.toml"), config).unwrap();
}

fn transcript(dir: &Path, summary: &Value) -> String {
    let run_dir = dir
        .join("Agents/general/logs")
        .join(summary["run_id"].as_str().unwrap());
    std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap()
}

#[test]
fn mcp_list_shows_each_server_its_status_and_tools() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "[mcp.servers.gone]\ncommand = \"/nonexistent/server\"\n",
    );
    let out = run(lsm(dir.path()).args(["mcp", "list", "--json"]));
    assert_eq!(
        out.status.code(),
        Some(1),
        "a server failed: {}",
        stderr(&out)
    );
    let servers = stdout_json(&out);
    assert_eq!(servers[0]["name"], "gone");
    assert_eq!(servers[0]["status"], "failed");
    assert!(
        servers[0]["reason"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/server")
    );
    assert_eq!(servers[1]["name"], "t");
    assert_eq!(servers[1]["status"], "ok");
    let tools = servers[1]["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "mcp__t__echo").unwrap();
    assert_eq!(echo["needs_permission"], false);
    let fail = tools.iter().find(|t| t["name"] == "mcp__t__fail").unwrap();
    assert_eq!(
        (fail["risk"].clone(), fail["needs_permission"].clone()),
        (json!("exec"), json!(true))
    );

    let out = run(lsm(dir.path()).args(["mcp", "list"]));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("mcp__t__echo"), "{table}");
    assert!(
        table.contains("gone") && table.contains("FAILED"),
        "{table}"
    );
}

#[test]
fn an_agent_uses_mcp_tools_its_allowlist_names_and_a_crash_does_not_end_the_run() {
    let (dir, script) = workspace_with_script(&[
        call("mcp__t__echo", json!({"text": "hi from mcp"})),
        call("mcp__t__crash", json!({})),
        call("mcp__t__env", json!({"name": "PATH"})),
        call("mcp__t__echo", json!({"text": "after the crash"})),
        text("done"),
    ]);
    write_config(
        dir.path(),
        "[mcp.servers.t.tools.crash]\nneeds_permission = false\n\
         [agents.extra_tools]\ngeneral = [\"mcp__t__*\"]\n",
    );
    let out = agent_run(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(
        summary["tool_sequence"],
        json!([
            "mcp__t__echo",
            "mcp__t__crash",
            "mcp__t__env",
            "mcp__t__echo"
        ])
    );
    let transcript = transcript(dir.path(), &summary);
    assert!(transcript.contains("hi from mcp"), "{transcript}");
    assert!(transcript.contains("after the crash"), "{transcript}");
    // `env` keeps the default: a person must approve, and nobody can (stdin is no terminal).
    assert!(transcript.contains("denied permission"), "{transcript}");
    assert!(!transcript.contains("PATH is set"), "{transcript}");
}

#[test]
fn an_mcp_tool_outside_the_allowlist_is_not_offered_and_allow_tool_offers_it() {
    let (dir, script) = workspace_with_script(&[
        call("mcp__t__echo", json!({"text": "should not run"})),
        text("done"),
    ]);
    write_config(dir.path(), "");
    let out = agent_run(dir.path(), &script, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    let first = transcript(dir.path(), &summary);
    assert!(
        first.contains("Tool 'mcp__t__echo' is not allowed for this harness run"),
        "{first}"
    );
    assert!(!first.contains("\"tool_result\""), "{first}");
    // `--allow-tool` names it for one run: offered, called, answered.
    let out = agent_run(dir.path(), &script, &["--allow-tool", "mcp__t__echo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    let second = transcript(dir.path(), &summary);
    assert!(!second.contains("is not allowed"), "{second}");
    assert!(second.contains("\"tool_result\""), "{second}");
}

#[test]
fn mcp_serve_answers_a_client_on_stdio_with_the_knowledge_base_tools() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    super::copy_dir(&workspace_root().join("tests/fixtures/kb"), dir.path());
    let out = run(lsm(dir.path()).args(["ingest", "notes"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut child = lsm(dir.path())
        .args(["mcp", "serve", "--provider", "scripted:answer.jsonl"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "e2e", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "read_file", "arguments": {"path": "lsm.toml"}}}),
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    let mut answers = std::collections::BTreeMap::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(id) = v["id"].as_u64() {
            answers.insert(id, v);
        }
        if answers.len() == 3 {
            break;
        }
    }
    drop(stdin);
    assert_eq!(answers[&1]["result"]["serverInfo"]["name"], "lsm");
    let names: Vec<&str> = answers[&2]["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for kb in [
        "query_context",
        "execute_context",
        "source_map",
        "find_section",
    ] {
        assert!(names.contains(&kb), "{kb} missing from {names:?}");
    }
    // Only the knowledge-base tools are served, not the file tools.
    assert!(!names.contains(&"read_file"), "{names:?}");
    assert_eq!(answers[&3]["result"]["isError"], true, "{}", answers[&3]);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn tools_list_shows_the_mcp_servers_tools_and_the_agents_offered_them() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "[agents.extra_tools]\ngeneral = [\"mcp__t__*\"]\nlibrarian = [\"mcp__t__echo\"]\n",
    );
    let out = run(lsm(dir.path()).args(["tools", "list", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows = stdout_json(&out);
    let row = |name: &str| super::tool_row(&rows, name);
    let echo = row("mcp__t__echo");
    assert_eq!(echo["offered"], "mcp");
    assert_eq!(echo["needs_permission"], false);
    assert_eq!(echo["agents"], json!(["general", "librarian"]));
    let fail = row("mcp__t__fail");
    assert_eq!(fail["agents"], json!(["general"]));
    assert_eq!(fail["needs_permission"], true);
    // The built-ins are still there.
    assert_eq!(row("read_file")["offered"], "always");
    let out = run(lsm(dir.path()).args(["tools", "list", "--agent", "librarian"]));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("mcp__t__echo") && !table.contains("mcp__t__fail"),
        "{table}"
    );
    assert!(table.contains("[mcp]"), "{table}");
}

#[test]
fn an_mcp_servers_descriptions_and_errors_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    // A server that describes a tool with escape sequences (clear the screen, retitle the
    // window), and one whose start fails with an error that quotes a hostile command.
    write_config(
        dir.path(),
        "[mcp.servers.t.env]\n\
         LSM_TEST_SERVER_ECHO_DESCRIPTION = \"Echoes\\u001b[2J\\u001b]0;pwned\\u0007 its text\"\n\
         [mcp.servers.gone]\ncommand = \"/nonexistent/\\u001b[31mserver\"\n\
         [agents.extra_tools]\ngeneral = [\"mcp__t__*\"]\n",
    );
    for args in [["mcp", "list"], ["tools", "list"]] {
        let out = run(lsm(dir.path()).args(args));
        let shown = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "lsm {args:?} passed a control character through: {shown:?}"
        );
        assert!(
            shown.contains("Echoes\u{fffd}[2J\u{fffd}]0;pwned\u{fffd} its text"),
            "lsm {args:?} shows the description, each control character as \u{fffd}: {shown}"
        );
        assert!(
            shown.contains("/nonexistent/\u{fffd}[31mserver"),
            "lsm {args:?} shows the failed server's command, cleaned: {shown}"
        );
    }
}
