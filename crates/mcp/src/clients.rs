//! [`McpClients`]: the configured servers of one run (or one listing), their tools as lsm
//! tools, and what became of each server.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use lsm_sandbox::{RiskLevel, Tool};
use serde::Serialize;

use crate::client::Connection;
use crate::config::{McpConfig, Transport};
use crate::tool::McpTool;
use crate::{McpError, naming};

/// One tool as listed.
#[derive(Debug, Clone, Serialize)]
pub struct ToolRow {
    /// The run's name, `mcp__<server>__<tool>`.
    pub name: String,
    /// The server's own name.
    pub remote: String,
    /// Its risk level.
    pub risk: RiskLevel,
    /// Whether a call asks a person first by default (before `[sandbox]` overrides).
    pub needs_permission: bool,
    /// The server's description (cut to [`crate::tool::MAX_DESCRIPTION_CHARS`]).
    pub description: String,
}

/// What became of one server.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ServerState {
    /// Not started: `enabled = false`.
    Disabled,
    /// Started and listed its tools.
    Ok {
        /// Its usable tools.
        tools: Vec<ToolRow>,
        /// Tools left out, with why (a schema that does not compile, a name taken twice).
        skipped: Vec<String>,
    },
    /// Could not be started or listed.
    Failed {
        /// Why.
        reason: String,
    },
}

/// One server of the listing.
#[derive(Debug, Clone, Serialize)]
pub struct ServerStatus {
    /// The configured name.
    pub name: String,
    /// `stdio: <command> <args>` or `http: <url>`.
    pub transport: String,
    /// What became of it.
    #[serde(flatten)]
    pub state: ServerState,
}

/// The enabled servers of a configuration, each started on first use.
#[derive(Debug, Default)]
pub struct McpClients {
    connections: BTreeMap<String, Arc<Connection>>,
    disabled: Vec<(String, String)>,
}

fn describe(transport: &Transport) -> String {
    match transport {
        Transport::Stdio { command, args } if args.is_empty() => format!("stdio: {command}"),
        Transport::Stdio { command, args } => format!("stdio: {command} {}", args.join(" ")),
        Transport::Http { url } => format!("http: {url}"),
    }
}

impl McpClients {
    /// The servers of `config`; none is started yet.
    ///
    /// # Errors
    /// When a server's settings cannot be used.
    pub fn new(config: &McpConfig) -> Result<Self, McpError> {
        config.validate()?;
        let mut clients = McpClients::default();
        for (name, server) in &config.servers {
            if server.enabled {
                clients.connections.insert(
                    name.clone(),
                    Arc::new(Connection::new(name.clone(), server.clone())),
                );
            } else {
                clients
                    .disabled
                    .push((name.clone(), describe(&server.transport(name)?)));
            }
        }
        Ok(clients)
    }

    /// Only the servers `keep` says yes to (the rest are never started).
    #[must_use]
    pub fn retain(mut self, keep: impl Fn(&str) -> bool) -> Self {
        self.connections.retain(|name, _| keep(name));
        self.disabled.retain(|(name, _)| keep(name));
        self
    }

    /// Whether there is no enabled server.
    pub fn is_empty(&self) -> bool {
        self.connections.is_empty()
    }

    /// The enabled servers' names.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.connections.keys().map(String::as_str)
    }

    /// The connection to `server`, if it is enabled.
    pub fn connection(&self, server: &str) -> Option<&Arc<Connection>> {
        self.connections.get(server)
    }

    /// Start every server, list its tools, and return them as lsm tools with each server's
    /// status. A server that fails contributes no tools; the others are unaffected.
    pub async fn tools(&self) -> (Vec<Arc<dyn Tool>>, Vec<ServerStatus>) {
        let listed = futures::future::join_all(
            self.connections
                .values()
                .map(|c| async move { (Arc::clone(c), c.list_tools().await) }),
        )
        .await;
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        let mut statuses = Vec::new();
        for (connection, result) in listed {
            let name = connection.server().to_string();
            let transport = connection
                .config()
                .transport(&name)
                .map(|t| describe(&t))
                .unwrap_or_default();
            let state = match result {
                Err(e) => ServerState::Failed {
                    reason: e.to_string(),
                },
                Ok(infos) => {
                    let mut rows = Vec::new();
                    let mut skipped = Vec::new();
                    let mut seen = BTreeSet::new();
                    for info in &infos {
                        match McpTool::new(info, Arc::clone(&connection)) {
                            Err(why) => skipped.push(format!("{}: {why}", info.name)),
                            Ok(tool) if !seen.insert(tool.name().to_string()) => {
                                skipped.push(format!(
                                    "{}: its name maps to {}, which another of the server's \
                                     tools already has",
                                    info.name,
                                    tool.name()
                                ));
                            }
                            Ok(tool) => {
                                rows.push(ToolRow {
                                    name: tool.name().to_string(),
                                    remote: tool.remote_name().to_string(),
                                    risk: tool.risk(),
                                    needs_permission: tool.needs_permission(),
                                    description: tool.description().to_string(),
                                });
                                tools.push(Arc::new(tool));
                            }
                        }
                    }
                    for s in &skipped {
                        tracing::warn!(server = %name, "MCP tool left out: {s}");
                    }
                    ServerState::Ok {
                        tools: rows,
                        skipped,
                    }
                }
            };
            if let ServerState::Failed { reason } = &state {
                tracing::warn!(server = %name, "{reason}");
            }
            statuses.push(ServerStatus {
                name,
                transport,
                state,
            });
        }
        for (name, transport) in &self.disabled {
            statuses.push(ServerStatus {
                name: name.clone(),
                transport: transport.clone(),
                state: ServerState::Disabled,
            });
        }
        statuses.sort_by(|a, b| a.name.cmp(&b.name));
        (tools, statuses)
    }

    /// Stop every started server.
    pub async fn shutdown(&self) {
        futures::future::join_all(self.connections.values().map(|c| c.shutdown())).await;
    }
}

/// The servers an allowlist names (`mcp__<server>__<tool>` or `mcp__<server>__*`): only
/// those need starting for a run.
pub fn servers_named<'a>(allowlist: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    allowlist
        .into_iter()
        .filter_map(naming::server_of)
        .map(str::to_string)
        .collect()
}
