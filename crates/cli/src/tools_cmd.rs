//! `lsm tools list`.

use lsm_sandbox::RiskLevel;
use serde::Serialize;

use crate::text::one_line;
use crate::{config, exit};

/// When a run is offered a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Offered {
    /// Every run.
    Always,
    /// When `[agents.memory]` is on.
    Memory,
    /// When an index exists (`lsm ingest`).
    KnowledgeBase,
    /// A configured MCP server's tool (`[mcp.servers.<name>]`), when an allowlist names it.
    Mcp,
}

impl Offered {
    /// The table's marker after the description.
    fn marker(self) -> &'static str {
        match self {
            Offered::Always => "",
            Offered::Memory => " [memory]",
            Offered::KnowledgeBase => " [kb]",
            Offered::Mcp => " [mcp]",
        }
    }
}

/// One row of the listing.
#[derive(Debug, Serialize)]
struct Row {
    name: String,
    risk: RiskLevel,
    /// Whether a call asks a person first, with this configuration's permission settings.
    needs_permission: bool,
    description: String,
    offered: Offered,
    /// The built-in agents whose allowlist names the tool: only they are ever offered it.
    agents: Vec<&'static str>,
}

/// The built-in agents offered `tool`: those whose allowlist names it (`ask_user` is added
/// to every allowlist when it is registered, which every run of `lsm` does), with the tools
/// `[agents.extra_tools]` adds.
fn agents_offered(config: &config::Config, tool: &str) -> Vec<&'static str> {
    lsm_agents::BUILTIN
        .iter()
        .filter(|a| {
            tool == "ask_user"
                || a.tools.contains(&tool)
                || config
                    .agents
                    .extra_tools_of(a.name)
                    .iter()
                    .any(|t| t == tool)
        })
        .map(|a| a.name)
        .collect()
}

/// Print every tool a run can be offered: the built-ins, `ask_user`, the memory tools
/// (offered when `[agents.memory]` is on) and the knowledge-base tools (offered when an index
/// exists), with the remote-source tools of the configuration's `[kb.remote]`; each with the
/// agents whose allowlist names it. With `agent`, only the tools that agent is offered.
pub fn list(cfg: &crate::config::ConfigArgs, agent: Option<&str>, json: bool) -> u8 {
    let config = match cfg.load() {
        Ok(c) => c,
        Err(e) => {
            // As every error `lsm` prints: a path in it (under the project's folder) is
            // shown, never obeyed.
            eprintln!(
                "error: {}",
                crate::text::terminal_text(&crate::secrets::clean(&format!("{e:#}")))
            );
            return exit::USAGE;
        }
    };
    if let Some(name) = agent
        && lsm_agents::find(name).is_none()
    {
        let known: Vec<&str> = lsm_agents::BUILTIN.iter().map(|a| a.name).collect();
        eprintln!(
            "error: unknown agent '{name}'; the agents are: {} (see `lsm agent list`)",
            known.join(", ")
        );
        return exit::USAGE;
    }
    let mut rows = rows(&config);
    rows.extend(mcp_rows(&config));
    if let Some(name) = agent {
        rows.retain(|r| r.agents.contains(&name));
    }
    if json {
        match serde_json::to_string(&rows) {
            Ok(text) => crate::output::print_json(&text),
            Err(e) => {
                eprintln!("error: cannot serialize the tool list: {e}");
                return exit::ERROR;
            }
        }
        return exit::OK;
    }
    let risk_of = |r: &Row| {
        let mut risk = r.risk.to_string();
        if r.needs_permission {
            risk.push('*');
        }
        risk
    };
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    let risk_width = rows
        .iter()
        .map(|r| risk_of(r).len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!("{:<width$}  {:<risk_width$}  DESCRIPTION", "NAME", "RISK");
    for r in &rows {
        let no_agent = if r.agents.is_empty() {
            " [no agent]"
        } else {
            ""
        };
        println!(
            "{:<width$}  {:<risk_width$}  {}{}{no_agent}",
            r.name,
            risk_of(r),
            // An MCP server's words: nothing in them drives the terminal.
            one_line(r.description.clone()),
            r.offered.marker()
        );
    }
    println!("\n* asks a person's permission first (with this configuration)");
    println!("[memory] offered when [agents.memory] is on");
    println!("[kb] offered when a knowledge base exists (`lsm ingest <dir>`)");
    if rows.iter().any(|r| r.offered == Offered::Mcp) {
        println!("[mcp] a tool of a configured MCP server ([mcp.servers.<name>], `lsm mcp list`)");
    }
    match agent {
        Some(name) => println!("(the tools agent '{name}' may be offered)"),
        None => {
            println!("[no agent] no built-in agent's allowlist names it, so no run offers it");
            println!(
                "An agent is offered only the tools its allowlist names: `lsm tools list --agent NAME`."
            );
        }
    }
    exit::OK
}

/// Every tool a run of `lsm` can register, with the agents each is offered to under
/// `config` (its `[agents.extra_tools]` included).
fn rows(config: &config::Config) -> Vec<Row> {
    // The store is only named, never opened: listing touches no file.
    let store: std::sync::Arc<dyn lsm_memory::MemoryBackend> = std::sync::Arc::new(
        lsm_memory::MemoryStore::new(lsm_memory::StoreLayout::new("Agents")),
    );
    let builtin = lsm_sandbox::builtin::registry();
    let memory = crate::memory_wiring::with_memory_tools(lsm_sandbox::ToolRegistry::new(), &store);
    let interaction = crate::interaction_wiring::run_channel(&config.agents.interaction)
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
        agents: agents_offered(config, t.name()),
    };
    let mut rows: Vec<Row> = builtin.iter().map(|t| row(t, Offered::Always)).collect();
    rows.extend(interaction.iter().map(|t| row(t, Offered::Always)));
    rows.extend(memory.iter().map(|t| row(t, Offered::Memory)));
    rows.extend(
        lsm_tools_kb::tools::catalog(&config.kb.remote)
            .into_iter()
            .map(|t| Row {
                needs_permission: sandbox.asks_permission(&t.name, t.risk, t.needs_permission),
                agents: agents_offered(config, &t.name),
                name: t.name,
                risk: t.risk,
                description: t.description,
                offered: Offered::KnowledgeBase,
            }),
    );
    rows
}

/// The tools of the configured MCP servers: each enabled server is started, listed and
/// stopped. A server that fails is named on stderr and contributes no row.
fn mcp_rows(config: &config::Config) -> Vec<Row> {
    if config.mcp.servers.is_empty() {
        return Vec::new();
    }
    let clients = match lsm_mcp::McpClients::new(&config.mcp) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("note: MCP servers not listed: {}", one_line(e.to_string()));
            return Vec::new();
        }
    };
    let statuses = match exit::runtime(Some(1)) {
        Ok(rt) => rt.block_on(async {
            let (_tools, statuses) = clients.tools().await;
            clients.shutdown().await;
            statuses
        }),
        Err(e) => {
            eprintln!("note: MCP servers not listed: cannot start the async runtime: {e}");
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
                    agents: mcp_agents(config, &t.name, &names),
                    name: t.name,
                    risk: t.risk,
                    description: t.description.lines().next().unwrap_or("").to_string(),
                    offered: Offered::Mcp,
                }));
            }
            lsm_mcp::ServerState::Failed { reason } => {
                eprintln!(
                    "note: MCP server '{}' failed: {}",
                    status.name,
                    one_line(reason.clone())
                );
            }
            lsm_mcp::ServerState::Disabled => {}
        }
    }
    rows
}

/// The built-in agents whose allowlist (`[agents.extra_tools]`, with `mcp__<server>__*`
/// expanded against the server's `tools`) names the MCP tool `name`.
fn mcp_agents(config: &config::Config, name: &str, tools: &[String]) -> Vec<&'static str> {
    lsm_agents::BUILTIN
        .iter()
        .filter(|a| {
            lsm_mcp::naming::expand(
                config.agents.extra_tools_of(a.name),
                tools.iter().map(String::as_str),
            )
            .iter()
            .any(|t| t == name)
        })
        .map(|a| a.name)
        .collect()
}

/// The names of every tool a run of `lsm` can register under `config`.
pub fn known_tool_names(config: &config::Config) -> Vec<String> {
    rows(config).into_iter().map(|r| r.name).collect()
}
