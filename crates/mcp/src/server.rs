//! Serving a [`Sandbox`]'s tools over MCP: `tools/list` lists its registry, `tools/call` runs
//! the call through the sandbox (every check applies; the sandbox the caller builds decides
//! who is asked for permission — with nobody, such calls are denied). Over stdio
//! ([`SandboxServer::serve_stdio`]) or streamable HTTP ([`SandboxServer::serve_http`]).

use std::sync::Arc;

use lsm_sandbox::Sandbox;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool as McpToolInfo,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::McpError;

/// An MCP server over a sandbox's tools.
#[derive(Clone)]
pub struct SandboxServer {
    sandbox: Arc<Sandbox>,
    instructions: String,
}

impl std::fmt::Debug for SandboxServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxServer").finish_non_exhaustive()
    }
}

impl SandboxServer {
    /// Serve `sandbox`'s tools, with `instructions` for the client's model.
    pub fn new(sandbox: Arc<Sandbox>, instructions: impl Into<String>) -> Self {
        SandboxServer {
            sandbox,
            instructions: instructions.into(),
        }
    }

    /// Serve on stdin/stdout until the client disconnects.
    ///
    /// # Errors
    /// When the handshake fails.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| McpError::Serve(format!("the MCP handshake failed: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| McpError::Serve(e.to_string()))?;
        Ok(())
    }

    /// Serve streamable HTTP (MCP's `/mcp` endpoint) on `listener` until `stop` is
    /// cancelled. Each client session gets its own handler over the same sandbox. Requests
    /// whose `Host` header is not a loopback name or the listener's own address are refused
    /// (DNS rebinding: a web page must not reach a server on 127.0.0.1 through a name it
    /// controls).
    ///
    /// # Errors
    /// When the listener's address cannot be read.
    pub async fn serve_http(
        self,
        listener: TcpListener,
        stop: CancellationToken,
    ) -> Result<(), McpError> {
        let local = listener
            .local_addr()
            .map_err(|e| McpError::Serve(format!("cannot read the listening address: {e}")))?;
        let mut hosts = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        hosts.push(local.ip().to_string());
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_cancellation_token(stop.child_token());
        let service = StreamableHttpService::new(
            move || Ok(self.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        loop {
            let (stream, peer) = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // A failed accept (too many open files, a reset) ends one
                        // connection, not the server.
                        tracing::warn!("MCP HTTP server: accept failed: {e}");
                        continue;
                    }
                },
            };
            let service = hyper_util::service::TowerToHyperService::new(service.clone());
            let stop = stop.clone();
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                tokio::pin!(connection);
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!("MCP HTTP connection from {peer}: {e}");
                        }
                    }
                    () = stop.cancelled() => connection.as_mut().graceful_shutdown(),
                }
            });
        }
    }

    fn tool_infos(&self) -> Vec<McpToolInfo> {
        self.sandbox
            .registry()
            .iter()
            .map(|t| {
                let schema = match t.parameters() {
                    Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                McpToolInfo::new(
                    t.name().to_string(),
                    t.description().to_string(),
                    Arc::new(schema),
                )
            })
            .collect()
    }
}

impl ServerHandler for SandboxServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("lsm", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tool_infos()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let execution = self.sandbox.execute(&request.name, &args).await;
        // A refusal or a tool failure is the tool's error result, as MCP asks: the client's
        // model reads it and can correct the call.
        let result = match execution.outcome {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
        };
        Ok(result.into())
    }
}
