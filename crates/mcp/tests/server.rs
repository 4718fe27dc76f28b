//! `SandboxServer` answered by rmcp's client: tools listed from the registry, calls run
//! through the sandbox.

// clippy.toml allows these inside #[test] functions only.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use lsm_mcp::{SandboxServer, result_text};
use lsm_sandbox::{Sandbox, SandboxConfig};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

#[tokio::test]
async fn a_client_lists_and_calls_the_sandboxs_tools_and_every_check_applies() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "served text\n").unwrap();
    let mut config = SandboxConfig::confined_to(dir.path());
    config
        .require_user_permission
        .insert("edit_file".to_string(), true);
    let sandbox = Sandbox::new(config, lsm_sandbox::builtin::registry(), None).unwrap();
    let (server_io, client_io) = tokio::io::duplex(64 * 1024);
    let server = SandboxServer::new(Arc::new(sandbox), "test");
    let served = tokio::spawn(async move {
        let running = server.serve(server_io).await.unwrap();
        let _ = running.waiting().await;
    });
    let client = ().serve(client_io).await.unwrap();

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"read_file"), "{names:?}");
    let read = tools.iter().find(|t| t.name == "read_file").unwrap();
    assert_eq!(read.input_schema.get("type"), Some(&json!("object")));

    let call = |name: &'static str, args: serde_json::Value| {
        CallToolRequestParams::new(name).with_arguments(args.as_object().unwrap().clone())
    };
    let r = client
        .call_tool(call("read_file", json!({"path": "a.txt"})))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true));
    assert!(
        result_text(&r).contains("served text"),
        "{}",
        result_text(&r)
    );

    // Outside the roots: refused by the sandbox, an error result.
    let r = client
        .call_tool(call("read_file", json!({"path": "/etc/passwd"})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    // Bad arguments: refused by the schema check.
    let r = client
        .call_tool(call("read_file", json!({"path": 5})))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(result_text(&r).contains("path"), "{}", result_text(&r));
    // A tool that asks a person (here edit_file): nobody to ask, so denied.
    let r = client
        .call_tool(call(
            "edit_file",
            json!({"path": "a.txt", "start_line": 1, "end_line": 1, "new_text": "changed"}),
        ))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(
        result_text(&r).contains("denied permission"),
        "{}",
        result_text(&r)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "served text\n"
    );
    client.cancel().await.unwrap();
    served.await.unwrap();
}

/// A `SandboxServer` on 127.0.0.1 over streamable HTTP, serving `a.txt` in a temporary folder.
async fn http_server() -> (
    tempfile::TempDir,
    std::net::SocketAddr,
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "served over http\n").unwrap();
    let sandbox = Sandbox::new(
        SandboxConfig::confined_to(dir.path()),
        lsm_sandbox::builtin::registry(),
        None,
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let server = SandboxServer::new(Arc::new(sandbox), "test");
    let served = tokio::spawn({
        let stop = stop.clone();
        async move { server.serve_http(listener, stop).await.unwrap() }
    });
    (dir, addr, stop, served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_s_streamable_http_client_lists_and_calls_over_http() {
    // rmcp's own client builds its reqwest client with rustls and no crypto provider of its
    // own: install one, as lsm's client does, rather than rely on another test having done
    // so first in this process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (_dir, addr, stop, served) = http_server().await;
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    let client = ().serve(transport).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "read_file"));
    let r = client
        .call_tool(
            CallToolRequestParams::new("read_file")
                .with_arguments(json!({"path": "a.txt"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert!(
        result_text(&r).contains("served over http"),
        "{}",
        result_text(&r)
    );
    client.cancel().await.unwrap();
    stop.cancel();
    served.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lsm_s_own_client_uses_a_server_configured_by_url_through_the_sandbox() {
    let (dir, addr, stop, served) = http_server().await;
    let config: lsm_mcp::McpConfig = toml::from_str(&format!(
        "[servers.web]\nurl = \"http://{addr}/mcp\"\nneeds_permission = false\n"
    ))
    .unwrap();
    let clients = lsm_mcp::McpClients::new(&config).unwrap();
    let (tools, statuses) = clients.tools().await;
    assert!(
        matches!(statuses[0].state, lsm_mcp::ServerState::Ok { .. }),
        "{statuses:#?}"
    );
    let registry = tools
        .into_iter()
        .fold(lsm_sandbox::ToolRegistry::new(), |r, t| r.with(t));
    let sandbox = Sandbox::new(SandboxConfig::confined_to(dir.path()), registry, None).unwrap();
    let e = sandbox
        .execute("mcp__web__read_file", &json!({"path": "a.txt"}))
        .await;
    assert!(
        e.outcome
            .as_ref()
            .is_ok_and(|t| t.contains("served over http")),
        "{:?}",
        e.outcome
    );
    // The remote sandbox refuses what its roots do not hold; the client reports the error.
    let e = sandbox
        .execute("mcp__web__read_file", &json!({"path": "/etc/passwd"}))
        .await;
    assert!(e.outcome.is_err(), "{:?}", e.outcome);
    clients.shutdown().await;
    // The server stops when asked; a client that comes later gets a failed status, not a hang.
    stop.cancel();
    served.await.unwrap();
    let later = lsm_mcp::McpClients::new(&config).unwrap();
    let (tools, statuses) = later.tools().await;
    assert!(tools.is_empty());
    assert!(
        matches!(statuses[0].state, lsm_mcp::ServerState::Failed { .. }),
        "{statuses:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_naming_a_foreign_host_is_refused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_dir, addr, stop, served) = http_server().await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let ask = |host: &'static str| {
        let body = body.clone();
        async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let request = format!(
                "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            s.write_all(request.as_bytes()).await.unwrap();
            let mut answer = String::new();
            s.read_to_string(&mut answer).await.unwrap();
            answer
        }
    };
    let good = ask("127.0.0.1").await;
    assert!(good.starts_with("HTTP/1.1 200"), "{good}");
    let evil = ask("attacker.example").await;
    assert!(evil.starts_with("HTTP/1.1 403"), "{evil}");
    stop.cancel();
    served.await.unwrap();
}
