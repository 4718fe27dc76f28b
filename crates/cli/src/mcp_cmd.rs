//! `lsm mcp list`: every configured MCP server, whether it started, and its tools.

use std::path::Path;

use anyhow::Result;
use clap::{Args, Subcommand};
use lsm_mcp::{McpClients, ServerState};

use crate::{config, exit};

/// `lsm mcp …`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start every configured MCP server, and show its status (started, or why not) and its
    /// tools as agents see them (`mcp__<server>__<tool>`).
    List(ListArgs),
    /// Serve the knowledge-base tools over MCP on stdin/stdout (for another MCP client's
    /// configuration). Every call goes through the sandbox of this configuration; calls that
    /// need a person's permission are denied (nobody is asked).
    Serve(ServeArgs),
}

/// Arguments of `lsm mcp serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The LLM provider the synthesis tools use (default: [llm] provider), as for
    /// `lsm agent run --provider`.
    #[arg(long, value_name = "SPEC")]
    pub provider: Option<String>,
}

/// Arguments of `lsm mcp list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Run an `lsm mcp` command; returns the exit code.
pub fn run(config_path: Option<&Path>, command: McpCommand) -> u8 {
    match command {
        McpCommand::List(args) => exit::block_on_command(list(config_path, args)),
        McpCommand::Serve(args) => exit::block_on_command(serve(config_path, args)),
    }
}

/// `lsm mcp serve`: the knowledge-base tools of the configured index, through the sandbox,
/// with nobody to ask for permission. Their model calls (synthesis) use the normal tier
/// under one budget of `[agents] max_tokens_budget` for the whole session.
async fn serve(config_path: Option<&Path>, args: ServeArgs) -> Result<u8> {
    let config = config::load(config_path, &config::lsm_env())?;
    let cwd = std::env::current_dir()?;
    let llm = config.llm.resolve(lsm_phase::LlmTier::Normal)?;
    let provider = crate::wiring::build_provider(
        &llm,
        &crate::wiring::ProviderFlags {
            provider: args.provider,
            ..crate::wiring::ProviderFlags::default()
        },
        &cwd,
        &config.source_name(),
    )?
    .provider;
    let budget = lsm_harness::RunBudget::new(lsm_harness::BudgetLimits::from_config(
        &config.agents.harness,
    ));
    let kb = crate::kb_cmd::agent_tools(&config, provider, &budget)?;
    let kb_names: Vec<String> = lsm_tools_kb::tools::catalog(&config.kb.remote)
        .into_iter()
        .map(|t| t.name)
        .collect();
    let registry = kb
        .registry
        .iter()
        .filter(|t| kb_names.iter().any(|n| n == t.name()))
        .fold(lsm_sandbox::ToolRegistry::new(), |r, t| {
            r.with(std::sync::Arc::clone(t))
        });
    if registry.is_empty() {
        return Err(config::ConfigError(format!(
            "no knowledge base at {}: run `lsm ingest <folder>` first",
            config.kb.index_dir.display()
        ))
        .into());
    }
    let sandbox = lsm_sandbox::Sandbox::new(config.sandbox.clone(), registry, None)
        .map_err(|e| config::ConfigError(format!("the sandbox cannot be used: {e}")))?;
    lsm_mcp::SandboxServer::new(
        std::sync::Arc::new(sandbox),
        "lsm: retrieval tools over the user's own documents (cite the sources they return).",
    )
    .serve_stdio()
    .await?;
    Ok(exit::OK)
}

async fn list(config_path: Option<&Path>, args: ListArgs) -> Result<u8> {
    let config = config::load(config_path, &config::lsm_env())?;
    let clients = McpClients::new(&config.mcp).map_err(|e| config::ConfigError(e.to_string()))?;
    let (_tools, statuses) = clients.tools().await;
    clients.shutdown().await;
    let failed = statuses
        .iter()
        .any(|s| matches!(s.state, ServerState::Failed { .. }));
    if args.json {
        println!("{}", serde_json::to_string(&statuses)?);
    } else if statuses.is_empty() {
        println!(
            "No MCP servers configured: add [mcp.servers.<name>] to {} (see docs/CONFIG.md).",
            config.source_name()
        );
    } else {
        for s in &statuses {
            match &s.state {
                ServerState::Disabled => println!("{}  ({})  disabled", s.name, s.transport),
                ServerState::Failed { reason } => {
                    println!("{}  ({})  FAILED: {reason}", s.name, s.transport);
                }
                ServerState::Ok { tools, skipped } => {
                    println!("{}  ({})  ok, {} tools", s.name, s.transport, tools.len());
                    let width = tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
                    for t in tools {
                        let risk =
                            if config
                                .sandbox
                                .asks_permission(&t.name, t.risk, t.needs_permission)
                            {
                                format!("{}*", t.risk)
                            } else {
                                t.risk.to_string()
                            };
                        let first_line = t.description.lines().next().unwrap_or("");
                        println!("  {:<width$}  {risk:<17}  {first_line}", t.name);
                    }
                    for why in skipped {
                        println!("  left out: {why}");
                    }
                }
            }
        }
        println!("\n* asks a person's permission first (with this configuration)");
        println!(
            "An agent is offered a server's tools only when its allowlist names them: \
             [agents.extra_tools] <agent> = [\"mcp__<server>__<tool>\"] or \"mcp__<server>__*\"."
        );
    }
    Ok(if failed { exit::ERROR } else { exit::OK })
}
