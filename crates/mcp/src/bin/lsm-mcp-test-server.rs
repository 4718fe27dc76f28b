//! A tiny stdio MCP server for tests: `echo`, `fail` (an MCP error), `crash` (the process
//! exits), `sleep{seconds}` (to exceed a timeout) and `env{name}` (whether a variable is
//! visible). `bad_schema` has an input schema that is not an object schema, so clients must
//! wrap it. `LSM_TEST_SERVER_ECHO_DESCRIPTION`, when set, replaces `echo`'s description (to
//! show a client a hostile one). Not meant for anything but tests.

#![allow(clippy::print_stderr)]

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};

struct TestServer;

fn object(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

fn tools() -> Vec<Tool> {
    let echo_description = std::env::var("LSM_TEST_SERVER_ECHO_DESCRIPTION")
        .unwrap_or_else(|_| "Returns its `text` argument.".to_string());
    vec![
        Tool::new(
            "echo",
            echo_description,
            object(json!({
                "type": "object",
                "properties": { "text": { "type": "string" } },
                "required": ["text"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "fail",
            "Always answers with an MCP error.",
            object(json!({ "type": "object" })),
        ),
        Tool::new(
            "crash",
            "Exits the server process.",
            object(json!({ "type": "object" })),
        ),
        Tool::new(
            "sleep",
            "Sleeps `seconds` seconds, then answers.",
            object(json!({
                "type": "object",
                "properties": { "seconds": { "type": "number" } },
                "required": ["seconds"]
            })),
        ),
        Tool::new(
            "env",
            "Says whether the environment variable `name` is visible to the server.",
            object(json!({
                "type": "object",
                "properties": { "name": { "type": "string" } },
                "required": ["name"]
            })),
        ),
        Tool::new(
            "bad_schema",
            "Has a string schema (not an object schema); returns what it got.",
            object(json!({ "type": "string" })),
        ),
        Tool::new(
            "tool.with spaces",
            "A name clients must map to a valid function name.",
            object(json!({ "type": "object" })),
        ),
    ]
}

fn text(s: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(s)]).into())
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        match request.name.as_ref() {
            "echo" => text(args["text"].as_str().unwrap_or_default()),
            "fail" => Err(ErrorData::internal_error(
                "the fail tool always fails",
                None,
            )),
            "crash" => std::process::exit(3),
            "sleep" => {
                let secs = args["seconds"].as_f64().unwrap_or(0.0).max(0.0);
                tokio::time::sleep(std::time::Duration::from_secs_f64(secs)).await;
                text(format!("slept {secs} s"))
            }
            "env" => {
                let name = args["name"].as_str().unwrap_or_default();
                text(if std::env::var_os(name).is_some() {
                    format!("{name} is set")
                } else {
                    format!("{name} is not set")
                })
            }
            "bad_schema" | "tool.with spaces" => text(args.to_string()),
            other => Err(ErrorData::invalid_params(
                format!("no tool named {other}"),
                None,
            )),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let service = match TestServer.serve(rmcp::transport::stdio()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lsm-mcp-test-server: cannot start: {e}");
            std::process::exit(1);
        }
    };
    let _ = service.waiting().await;
}
