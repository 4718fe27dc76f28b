//! The tools a run of `lsm` can be offered under a configuration, each with its risk, its
//! description, when it is offered and which agents of a catalog are offered it: what
//! `lsm tools list` prints and what agent definitions are checked against.

use lsm_agents::Catalog;
use lsm_sandbox::RiskLevel;
use serde::Serialize;

use crate::config;
use crate::notice::Notice;

/// When a run is offered a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Offered {
    /// Every run.
    Always,
    /// When `[agents.memory]` is on.
    Memory,
    /// When an index exists (`lsm ingest`).
    KnowledgeBase,
    /// A configured MCP server's tool (`[mcp.servers.<name>]`), when an allowlist names it.
    Mcp,
    /// A tool handled outside `lsm` (`[agents.deferred_tools]`), when an allowlist names it.
    Deferred,
}

impl Offered {
    /// The table's marker after the description.
    pub fn marker(self) -> &'static str {
        match self {
            Offered::Always => "",
            Offered::Memory => " [memory]",
            Offered::KnowledgeBase => " [kb]",
            Offered::Mcp => " [mcp]",
            Offered::Deferred => " [deferred]",
        }
    }
}

/// One row of the listing.
#[derive(Debug, Serialize)]
pub struct Row {
    /// The tool's name.
    pub name: String,
    /// Its risk level.
    pub risk: RiskLevel,
    /// Whether a call asks a person first, with this configuration's permission settings.
    pub needs_permission: bool,
    /// What it does.
    pub description: String,
    /// When a run is offered it.
    pub offered: Offered,
    /// The agents whose allowlist names the tool: only they are ever offered it.
    pub agents: Vec<String>,
}

/// The agents of `catalog` offered `tool`: those whose allowlist names it (`ask_user` is
/// added to every allowlist when it is registered, which every run of `lsm` does), with the
/// tools `[agents.extra_tools]` adds.
fn agents_offered(config: &config::Config, catalog: &Catalog, tool: &str) -> Vec<String> {
    catalog
        .iter()
        .filter(|a| {
            tool == "ask_user"
                || a.spec.tools.iter().any(|t| t == tool)
                || config
                    .agents
                    .extra_tools_of(a.name())
                    .iter()
                    .any(|t| t == tool)
        })
        .map(|a| a.name().to_string())
        .collect()
}

/// Every tool a run of `lsm` can register, with the agents each is offered to under
/// `config` (its `[agents.extra_tools]` included).
pub fn rows(config: &config::Config, catalog: &Catalog) -> Vec<Row> {
    // The store is only named, never opened: listing touches no file.
    let store: std::sync::Arc<dyn lsm_memory::MemoryBackend> = std::sync::Arc::new(
        lsm_memory::MemoryStore::new(lsm_memory::StoreLayout::new("Agents")),
    );
    let builtin = lsm_sandbox::builtin::registry();
    let memory = crate::wiring::memory::with_memory_tools(lsm_sandbox::ToolRegistry::new(), &store);
    let interaction = crate::wiring::interaction::run_channel(&config.agents.interaction)
        .map(|channel| {
            lsm_sandbox::ToolRegistry::new().with(std::sync::Arc::new(
                lsm_interaction::AskUserTool::new(channel),
            ))
        })
        .unwrap_or_default();
    let sandbox = &config.sandbox;
    let row = |t: &std::sync::Arc<dyn lsm_sandbox::Tool>, offered| Row {
        name: t.name().to_string(),
        risk: t.risk(),
        needs_permission: sandbox.asks_permission(t.name(), t.risk(), t.needs_permission()),
        description: t.description().to_string(),
        offered,
        agents: agents_offered(config, catalog, t.name()),
    };
    let mut rows: Vec<Row> = builtin.iter().map(|t| row(t, Offered::Always)).collect();
    rows.extend(interaction.iter().map(|t| row(t, Offered::Always)));
    rows.extend(memory.iter().map(|t| row(t, Offered::Memory)));
    let deferred = crate::deferred_tools::listed(&config.agents.deferred_tools);
    rows.extend(deferred.iter().map(|t| row(t, Offered::Deferred)));
    rows.extend(
        lsm_tools_kb::tools::catalog(&config.kb.remote)
            .into_iter()
            .map(|t| Row {
                needs_permission: sandbox.asks_permission(&t.name, t.risk, t.needs_permission),
                agents: agents_offered(config, catalog, &t.name),
                name: t.name,
                risk: t.risk,
                description: t.description,
                offered: Offered::KnowledgeBase,
            }),
    );
    rows
}

/// The tools of the configured MCP servers: each enabled server is started, listed and
/// stopped. A server that fails is told to `notify` and contributes no row.
pub fn mcp_rows(config: &config::Config, catalog: &Catalog, notify: &dyn Fn(Notice)) -> Vec<Row> {
    if config.mcp.servers.is_empty() {
        return Vec::new();
    }
    let clients = match lsm_mcp::McpClients::new(&config.mcp) {
        Ok(c) => c,
        Err(e) => {
            notify(Notice::McpNotListed(e.to_string()));
            return Vec::new();
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build();
    let statuses = match runtime {
        Ok(rt) => rt.block_on(async {
            let (_tools, statuses) = clients.tools().await;
            clients.shutdown().await;
            statuses
        }),
        Err(e) => {
            notify(Notice::McpNotListed(format!(
                "cannot start the async runtime: {e}"
            )));
            return Vec::new();
        }
    };
    let mut rows = Vec::new();
    for status in statuses {
        match status.state {
            lsm_mcp::ServerState::Ok { tools, .. } => {
                let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
                rows.extend(tools.into_iter().map(|t| Row {
                    needs_permission: config.sandbox.asks_permission(
                        &t.name,
                        t.risk,
                        t.needs_permission,
                    ),
                    agents: mcp_agents(config, catalog, &t.name, &names),
                    name: t.name,
                    risk: t.risk,
                    description: t.description.lines().next().unwrap_or("").to_string(),
                    offered: Offered::Mcp,
                }));
            }
            lsm_mcp::ServerState::Failed { reason } => {
                notify(Notice::McpServerFailed {
                    name: status.name.clone(),
                    reason: reason.clone(),
                });
            }
            lsm_mcp::ServerState::Disabled => {}
        }
    }
    rows
}

/// The built-in agents whose allowlist (`[agents.extra_tools]`, with `mcp__<server>__*`
/// expanded against the server's `tools`) names the MCP tool `name`.
fn mcp_agents(
    config: &config::Config,
    catalog: &Catalog,
    name: &str,
    tools: &[String],
) -> Vec<String> {
    catalog
        .iter()
        .filter(|a| {
            lsm_mcp::naming::expand(
                config
                    .agents
                    .extra_tools_of(a.name())
                    .into_iter()
                    .chain(a.spec.tools.iter().cloned())
                    .collect::<Vec<String>>(),
                tools.iter().map(String::as_str),
            )
            .iter()
            .any(|t| t == name)
        })
        .map(|a| a.name().to_string())
        .collect()
}

/// The tools of the configured MCP servers (each enabled server is started, listed and
/// stopped; one that fails is told to `notify`).
pub fn mcp_tool_names(config: &config::Config, notify: &dyn Fn(Notice)) -> Vec<String> {
    mcp_rows(config, &Catalog::builtin(), notify)
        .into_iter()
        .map(|r| r.name)
        .collect()
}

/// The names of every tool a run of `lsm` can register under `config`.
pub fn known_tool_names(config: &config::Config) -> Vec<String> {
    // Which agents are offered each tool does not matter here: the built-ins will do.
    rows(config, &Catalog::builtin())
        .into_iter()
        .map(|r| r.name)
        .collect()
}
