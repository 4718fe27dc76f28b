//! The MCP client against the in-repo stdio test server, through the sandbox.

// clippy.toml allows these inside #[test] functions only; the helpers below fail tests the
// same way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use lsm_mcp::{McpClients, McpConfig, ServerState};
use lsm_sandbox::{ExecError, Execution, Sandbox, SandboxConfig, ToolRegistry};
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_lsm-mcp-test-server");

/// `[mcp]` with one server `t` running the test server, plus `extra` lines of its table.
fn config(extra: &str) -> McpConfig {
    let text = format!("[servers.t]\ncommand = {SERVER:?}\n{extra}\n");
    toml::from_str(&text).unwrap()
}

/// The servers of `config`, their tools in a sandbox that has nobody to ask (headless).
async fn sandbox(config: &McpConfig) -> (McpClients, Sandbox) {
    let clients = McpClients::new(config).unwrap();
    let (tools, statuses) = clients.tools().await;
    for s in &statuses {
        assert!(!matches!(s.state, ServerState::Failed { .. }), "{s:#?}");
    }
    let registry = tools
        .into_iter()
        .fold(ToolRegistry::new(), |r, t| r.with(t));
    let dir = std::env::temp_dir();
    let sandbox = Sandbox::new(SandboxConfig::confined_to(dir), registry, None).unwrap();
    (clients, sandbox)
}

fn ok(e: &Execution) -> &str {
    match &e.outcome {
        Ok(text) => text,
        Err(err) => panic!("expected output, got {err}"),
    }
}

fn err(e: &Execution) -> &ExecError {
    match &e.outcome {
        Ok(text) => panic!("expected an error, got output {text:?}"),
        Err(err) => err,
    }
}

const NO_PERMISSION: &str = "needs_permission = false";

#[tokio::test]
async fn tools_are_listed_under_mapped_names_with_the_servers_schema() {
    let (clients, sandbox) = sandbox(&config(NO_PERMISSION)).await;
    let names: Vec<&str> = sandbox.registry().names().collect();
    for name in [
        "mcp__t__echo",
        "mcp__t__fail",
        "mcp__t__crash",
        "mcp__t__sleep",
        "mcp__t__env",
        "mcp__t__bad_schema",
        "mcp__t__tool_with_spaces",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let echo = sandbox.registry().get("mcp__t__echo").unwrap();
    assert_eq!(echo.description(), "Returns its `text` argument.");
    assert_eq!(echo.parameters()["required"], json!(["text"]));
    // A string schema is not an object schema: it is offered under `input`.
    let bad = sandbox.registry().get("mcp__t__bad_schema").unwrap();
    assert_eq!(
        bad.parameters()["properties"]["input"],
        json!({"type": "string"})
    );
    // The mapped name still calls the server's own tool.
    let e = sandbox
        .execute("mcp__t__tool_with_spaces", &json!({}))
        .await;
    assert_eq!(ok(&e), "{}");
    clients.shutdown().await;
}

#[tokio::test]
async fn a_call_returns_the_servers_text() {
    let (clients, sandbox) = sandbox(&config(NO_PERMISSION)).await;
    let e = sandbox
        .execute("mcp__t__echo", &json!({"text": "hello"}))
        .await;
    assert_eq!(ok(&e), "hello");
    let e = sandbox
        .execute("mcp__t__bad_schema", &json!({"input": "x"}))
        .await;
    assert_eq!(ok(&e), r#"{"input":"x"}"#);
    clients.shutdown().await;
}

#[tokio::test]
async fn an_mcp_error_is_an_error_result() {
    let (clients, sandbox) = sandbox(&config(NO_PERMISSION)).await;
    let e = sandbox.execute("mcp__t__fail", &json!({})).await;
    let msg = err(&e).to_string();
    assert!(msg.contains("MCP server 't' returned an error"), "{msg}");
    assert!(msg.contains("the fail tool always fails"), "{msg}");
    // The session is still usable.
    let e = sandbox
        .execute("mcp__t__echo", &json!({"text": "still"}))
        .await;
    assert_eq!(ok(&e), "still");
    clients.shutdown().await;
}

#[tokio::test]
async fn a_crashed_server_gives_an_error_result_and_restarts_on_the_next_call() {
    let (clients, sandbox) = sandbox(&config(NO_PERMISSION)).await;
    let e = sandbox.execute("mcp__t__crash", &json!({})).await;
    let msg = err(&e).to_string();
    assert!(msg.contains("MCP server 't'"), "{msg}");
    let e = sandbox
        .execute("mcp__t__echo", &json!({"text": "back"}))
        .await;
    assert_eq!(ok(&e), "back");
    clients.shutdown().await;
}

#[tokio::test]
async fn a_hung_server_times_out_and_the_next_call_works() {
    let (clients, sandbox) =
        sandbox(&config(&format!("{NO_PERMISSION}\ntimeout_seconds = 1"))).await;
    let started = Instant::now();
    let e = sandbox
        .execute("mcp__t__sleep", &json!({"seconds": 60}))
        .await;
    let msg = err(&e).to_string();
    assert!(msg.contains("did not answer within 1 s"), "{msg}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let e = sandbox
        .execute("mcp__t__echo", &json!({"text": "on"}))
        .await;
    assert_eq!(ok(&e), "on");
    clients.shutdown().await;
}

#[tokio::test]
async fn the_server_sees_only_path_home_lang_and_its_configured_env() {
    // Cargo sets this for the test process; the server must not inherit it.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let (clients, sandbox) = sandbox(&config(&format!(
        "{NO_PERMISSION}\nenv = {{ GIVEN = \"yes\", FROM_OURS = \"${{CARGO_MANIFEST_DIR}}\" }}"
    )))
    .await;
    let visible = |name: &'static str| {
        let sandbox = &sandbox;
        async move {
            let e = sandbox.execute("mcp__t__env", &json!({"name": name})).await;
            ok(&e).to_string()
        }
    };
    assert_eq!(
        visible("CARGO_MANIFEST_DIR").await,
        "CARGO_MANIFEST_DIR is not set"
    );
    assert_eq!(visible("GIVEN").await, "GIVEN is set");
    assert_eq!(visible("FROM_OURS").await, "FROM_OURS is set");
    assert_eq!(visible("PATH").await, "PATH is set");
    clients.shutdown().await;
}

#[tokio::test]
async fn bad_arguments_are_refused_by_the_sandbox_before_the_server() {
    let (clients, sandbox) = sandbox(&config(NO_PERMISSION)).await;
    let e = sandbox.execute("mcp__t__echo", &json!({"text": 5})).await;
    assert!(
        matches!(err(&e), ExecError::InvalidArguments { .. }),
        "{:?}",
        e.outcome
    );
    let e = sandbox
        .execute("mcp__t__echo", &json!({"text": "a", "other": 1}))
        .await;
    assert!(matches!(err(&e), ExecError::InvalidArguments { .. }));
    let e = sandbox.execute("mcp__t__echo", &json!({})).await;
    assert!(matches!(err(&e), ExecError::InvalidArguments { .. }));
    clients.shutdown().await;
}

#[tokio::test]
async fn by_default_a_call_needs_permission_and_headless_denies_it() {
    let (clients, sandbox) =
        sandbox(&config("[servers.t.tools.env]\nneeds_permission = false")).await;
    let echo = sandbox.registry().get("mcp__t__echo").unwrap();
    assert!(echo.needs_permission());
    assert_eq!(echo.risk(), lsm_sandbox::RiskLevel::Exec);
    let e = sandbox.execute("mcp__t__echo", &json!({"text": "x"})).await;
    assert!(
        matches!(err(&e), ExecError::PermissionDenied { .. }),
        "{:?}",
        e.outcome
    );
    // The per-tool override lets this one through.
    let e = sandbox
        .execute("mcp__t__env", &json!({"name": "PATH"}))
        .await;
    assert_eq!(ok(&e), "PATH is set");
    clients.shutdown().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_and_the_others_still_work() {
    let text = format!(
        "[servers.t]\ncommand = {SERVER:?}\n\
         [servers.missing]\ncommand = \"/nonexistent/mcp-server\"\n\
         [servers.off]\ncommand = \"/nonexistent/other\"\nenabled = false\n"
    );
    let config: McpConfig = toml::from_str(&text).unwrap();
    let clients = McpClients::new(&config).unwrap();
    let (tools, statuses) = clients.tools().await;
    assert!(tools.iter().any(|t| t.name() == "mcp__t__echo"));
    let by_name = |n: &str| statuses.iter().find(|s| s.name == n).unwrap();
    match &by_name("missing").state {
        ServerState::Failed { reason } => {
            assert!(
                reason.contains("cannot run `/nonexistent/mcp-server`"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(by_name("off").state, ServerState::Disabled));
    assert!(matches!(by_name("t").state, ServerState::Ok { .. }));
    let json = serde_json::to_value(&statuses).unwrap();
    assert_eq!(json[0]["name"], "missing");
    assert_eq!(json[0]["status"], "failed");
    clients.shutdown().await;
}

#[tokio::test]
async fn a_server_is_not_started_before_its_first_use() {
    // Building the clients starts nothing: a missing program only fails at the first call.
    let config: McpConfig =
        toml::from_str("[servers.missing]\ncommand = \"/nonexistent/mcp-server\"\n").unwrap();
    let clients = McpClients::new(&config).unwrap();
    let conn = clients.connection("missing").unwrap();
    let e = conn.call("echo", serde_json::Map::new()).await.unwrap_err();
    assert!(e.to_string().contains("could not be started"), "{e}");
    // A working server answers a call made before any listing.
    let clients = McpClients::new(&config_of_test_server()).unwrap();
    let result = clients
        .connection("t")
        .unwrap()
        .call("echo", json!({"text": "lazy"}).as_object().unwrap().clone())
        .await
        .unwrap();
    assert_eq!(lsm_mcp::result_text(&result), "lazy");
    clients.shutdown().await;
}

fn config_of_test_server() -> McpConfig {
    config(NO_PERMISSION)
}
