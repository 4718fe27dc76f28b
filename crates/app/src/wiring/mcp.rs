//! MCP both ways. As a client, in a run: the servers some agent's allowlist names
//! (`[agents.extra_tools]`, `--allow-tool`) are started when the run is wired, and their
//! tools join the registry like any tool. A server no allowlist names is never started for a
//! run. The servers stop when the run's tools are dropped (the run ended). [`statuses`]
//! lists every configured server (`lsm mcp list`); [`serve_tools`] are the knowledge-base
//! tools `lsm mcp serve` offers (its server is `crate::mcp_server`).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::error::Result;
use lsm_mcp::McpClients;
pub use lsm_mcp::{ServerState, ServerStatus};
use lsm_sandbox::{Tool, ToolRegistry};

use crate::config::Config;
use crate::error::ConfigError;

/// The servers the configuration's allowlists name.
fn named_servers(config: &Config) -> BTreeSet<String> {
    lsm_mcp::servers_named(
        config
            .agents
            .extra_tools
            .values()
            .flatten()
            .map(String::as_str),
    )
}

/// Start the MCP servers `config`'s allowlists name and return their tools. A server that
/// fails to start is logged and contributes no tools; the run goes on without them.
pub fn tools_for_run(config: &Config) -> Vec<Arc<dyn Tool>> {
    let named = named_servers(config);
    if named.is_empty() {
        return Vec::new();
    }
    for server in &named {
        if !config.mcp.servers.contains_key(server) {
            tracing::warn!(
                "[agents.extra_tools] names tools of the MCP server '{server}', which \
                 [mcp.servers] does not configure"
            );
        }
    }
    let clients = match McpClients::new(&config.mcp) {
        Ok(c) => c.retain(|s| named.contains(s)),
        Err(e) => {
            tracing::warn!("MCP servers not used: {e}");
            return Vec::new();
        }
    };
    if clients.is_empty() {
        return Vec::new();
    }
    // Wiring is synchronous but runs on the command's runtime: the servers' sessions must
    // live on that runtime, so list them there.
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("MCP servers not used: no async runtime");
        return Vec::new();
    };
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        tracing::warn!("MCP servers not used: they need the multi-threaded runtime");
        return Vec::new();
    }
    let (tools, _statuses) = tokio::task::block_in_place(|| handle.block_on(clients.tools()));
    tools
}

/// Start every configured MCP server, list its tools, and stop it: each server's status.
///
/// # Errors
/// A usage error when the `[mcp]` settings cannot be used.
pub async fn statuses(config: &Config) -> Result<Vec<ServerStatus>> {
    let clients = McpClients::new(&config.mcp).map_err(|e| ConfigError(e.to_string()))?;
    let (_tools, statuses) = clients.tools().await;
    clients.shutdown().await;
    Ok(statuses)
}

/// The knowledge-base tools `lsm mcp serve` offers: those of the configured index, when
/// there is one and a provider to write answers (`provider`, a `--provider` spec over
/// `[llm]`). Their model calls (synthesis) use the normal tier under one budget of `[agents]
/// max_tokens_budget` for the whole session. Empty without an index or a provider.
///
/// # Errors
/// A usage error when the provider cannot be built; the knowledge base's errors.
pub fn serve_tools(config: &Config, provider: Option<String>) -> Result<ToolRegistry> {
    let cwd = std::env::current_dir()?;
    let llm = config.llm.resolve(lsm_phase::LlmTier::Normal)?;
    let flags = super::ProviderFlags {
        provider,
        ..super::ProviderFlags::default()
    };
    let mut registry = ToolRegistry::new();
    // The knowledge-base tools need a provider only to write answers.
    if flags.provider.is_some() || llm.provider.is_some() {
        let provider = super::build_provider(&llm, &flags, &cwd, &config.source_name())?.provider;
        let budget = lsm_harness::RunBudget::new(lsm_harness::BudgetLimits::from_config(
            &config.agents.harness,
        ));
        let kb = super::kb::agent_tools(config, provider, &budget)?;
        let kb_names: Vec<String> = lsm_tools_kb::tools::catalog(&config.kb.remote)
            .into_iter()
            .map(|t| t.name)
            .collect();
        for tool in kb.registry.iter() {
            if kb_names.iter().any(|n| n == tool.name()) {
                registry.register(Arc::clone(tool));
            }
        }
    }
    Ok(registry)
}
