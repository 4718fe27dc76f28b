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
    }
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
