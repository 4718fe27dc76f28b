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
