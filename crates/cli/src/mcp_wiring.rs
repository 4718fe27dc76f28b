//! MCP servers in a run: the servers some agent's allowlist names (`[agents.extra_tools]`,
//! `--allow-tool`) are started when the run is wired, and their tools join the registry
//! like any tool. A server no allowlist names is never started for a run. The servers stop
//! when the run's tools are dropped (the run ended).

use std::collections::BTreeSet;
use std::sync::Arc;

use lsm_mcp::McpClients;
use lsm_sandbox::Tool;

use crate::config::Config;

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
