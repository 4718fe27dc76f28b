//! One connection to one MCP server: started on first use, every request bounded by the
//! server's `timeout_seconds`, stopped when it hangs or breaks and started again on the next
//! request.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool as McpToolInfo};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use tokio::io::AsyncBufReadExt;
use tokio::sync::Mutex;

use crate::McpError;
use crate::config::{ServerConfig, Transport};

/// The only variables of ours a stdio server sees, besides its configured `env`.
pub const PASSED_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// A running session with a server. `broken` is set when a request failed in a way that
/// leaves the session unusable (timeout, transport error), so the next request starts anew.
struct Live {
    service: RunningService<RoleClient, ()>,
    broken: AtomicBool,
}

impl Live {
    fn usable(&self) -> bool {
        !self.broken.load(Ordering::SeqCst)
            && !self.service.is_closed()
            && !self.service.peer().is_transport_closed()
    }
}

/// One configured server and its current session, if any.
pub struct Connection {
    server: String,
    config: ServerConfig,
    live: Mutex<Option<Arc<Live>>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// Marks the session broken if the request it guards is dropped before it finished (the
/// sandbox's own timeout cancelled it): a server that hangs is replaced on the next call.
struct Unfinished(Option<Arc<Live>>);

impl Unfinished {
    fn done(mut self) {
        self.0 = None;
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(live) = self.0.take() {
            live.broken.store(true, Ordering::SeqCst);
        }
    }
}

impl Connection {
    /// A connection to `server`, not started yet.
    pub fn new(server: impl Into<String>, config: ServerConfig) -> Self {
        Connection {
            server: server.into(),
            config,
            live: Mutex::new(None),
        }
    }

    /// The configured name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The server's settings.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.config.timeout_seconds)
    }

    fn timed_out(&self) -> McpError {
        McpError::Timeout {
            server: self.server.clone(),
            seconds: self.config.timeout_seconds,
        }
    }

    /// The current session, or a new one when there is none or it broke.
    async fn session(&self) -> Result<Arc<Live>, McpError> {
        let mut slot = self.live.lock().await;
        if let Some(live) = slot.as_ref().filter(|l| l.usable()) {
            return Ok(Arc::clone(live));
        }
        // Dropping the old session cancels it, which kills its process.
        if slot.take().is_some() {
            tracing::info!(server = %self.server, "restarting MCP server");
        }
        let started = tokio::time::timeout(self.timeout(), start(&self.server, &self.config))
            .await
            .map_err(|_| self.timed_out())??;
        let live = Arc::new(Live {
            service: started,
            broken: AtomicBool::new(false),
        });
        *slot = Some(Arc::clone(&live));
        Ok(live)
    }

    /// Stop the session `live` now (it hung or broke) if it is still the current one.
    async fn discard(&self, live: &Arc<Live>) {
        live.broken.store(true, Ordering::SeqCst);
        let mut slot = self.live.lock().await;
        if slot.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, live)) {
            *slot = None;
        }
    }

    fn failed(&self, e: ServiceError) -> (McpError, bool) {
        match e {
            ServiceError::McpError(data) => (
                McpError::Remote {
                    server: self.server.clone(),
                    message: data.message.to_string(),
                },
                false,
            ),
            ServiceError::Timeout { .. } => (self.timed_out(), true),
            other => (
                McpError::Disconnected {
                    server: self.server.clone(),
                    reason: other.to_string(),
                },
                true,
            ),
        }
    }

    /// Await `request` on `live` within the timeout. A broken or silent session is dropped
    /// (its process killed), so the next request starts a new one; a request abandoned
    /// midway (its caller dropped) drops the session too.
    async fn answer<T>(
        &self,
        live: &Arc<Live>,
        request: impl std::future::Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, McpError> {
        let guard = Unfinished(Some(Arc::clone(live)));
        let result = tokio::time::timeout(self.timeout(), request).await;
        guard.done();
        match result {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                let (err, broken) = self.failed(e);
                if broken {
                    self.discard(live).await;
                }
                Err(err)
            }
            Err(_) => {
                self.discard(live).await;
                Err(self.timed_out())
            }
        }
    }

    /// The server's tools (`tools/list`), starting it if needed.
    ///
    /// # Errors
    /// When the server cannot be started, breaks or does not answer in time.
    pub async fn list_tools(&self) -> Result<Vec<McpToolInfo>, McpError> {
        let live = self.session().await?;
        self.answer(&live, live.service.list_all_tools()).await
    }

    /// Call `tool` (the server's own name) with `arguments`, starting the server if needed.
    ///
    /// # Errors
    /// When the server cannot be started, answers with an MCP error, breaks or does not
    /// answer in time. A tool's own failure (`isError`) is a successful result here.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, McpError> {
        let live = self.session().await?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        self.answer(&live, live.service.call_tool(params)).await
    }

    /// Stop the session, if any (the process is killed when it does not exit at once).
    pub async fn shutdown(&self) {
        let live = self.live.lock().await.take();
        if let Some(live) = live {
            match Arc::try_unwrap(live) {
                Ok(mut live) => {
                    let _ = live
                        .service
                        .close_with_timeout(Duration::from_secs(2))
                        .await;
                }
                // A call still holds it: it is cancelled when that call ends.
                Err(live) => live.broken.store(true, Ordering::SeqCst),
            }
        }
    }
}

/// The value of `name` in our environment when `value` is `${name}`, else `value` itself.
fn expand(value: &str) -> Option<String> {
    match value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
        Some(name) => std::env::var(name).ok(),
        None => Some(value.to_string()),
    }
}

/// The whole environment of a stdio server: [`PASSED_ENV`] from ours, then its configured
/// `env` (a `${NAME}` absent from ours is left out).
pub fn child_env(configured: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = PASSED_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_string(), v)))
        .collect();
    for (k, v) in configured {
        match expand(v) {
            Some(v) => {
                env.insert(k.clone(), v);
            }
            None => tracing::warn!(variable = %k, "{v} is not set; not passed to the MCP server"),
        }
    }
    env
}

async fn start(
    server: &str,
    config: &ServerConfig,
) -> Result<RunningService<RoleClient, ()>, McpError> {
    let fail = |reason: String| McpError::Start {
        server: server.to_string(),
        reason,
    };
    match config.transport(server)? {
        Transport::Stdio { command, args } => {
            let mut cmd = tokio::process::Command::new(&command);
            cmd.args(&args)
                .env_clear()
                .envs(child_env(&config.env))
                .kill_on_drop(true);
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| fail(format!("cannot run `{command}`: {e}")))?;
            if let Some(stderr) = stderr {
                // Its log lines go to ours (and the pipe never fills up and blocks it).
                let name = server.to_string();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(server = %name, "{line}");
                    }
                });
            }
            ().serve(transport)
                .await
                .map_err(|e| fail(format!("the MCP handshake failed: {e}")))
        }
        Transport::Http { url } => {
            // reqwest uses rustls with whichever crypto provider is installed: ring.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let transport = StreamableHttpClientTransport::from_uri(url.clone());
            ().serve(transport)
                .await
                .map_err(|e| fail(format!("cannot connect to {url}: {e}")))
        }
    }
}
