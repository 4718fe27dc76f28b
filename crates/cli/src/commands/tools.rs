//! `lsm tools list`.

use crate::exit;
use crate::terminal::text::one_line;
use lsm_app::tools::{Offered, Row, mcp_rows, rows};

/// Print every tool a run can be offered: the built-ins, `ask_user`, the memory tools
/// (offered when `[agents.memory]` is on) and the knowledge-base tools (offered when an index
/// exists), with the remote-source tools of the configuration's `[kb.remote]`; each with the
/// agents whose allowlist names it. With `agent`, only the tools that agent is offered.
pub fn list(cfg: &lsm_app::config::ConfigArgs, agent: Option<&str>, json: bool) -> u8 {
    let config = match cfg.load() {
        Ok(c) => c,
        Err(e) => {
            // As every error `lsm` prints: a path in it (under the project's folder) is
            // shown, never obeyed.
            eprintln!(
                "error: {}",
                crate::terminal::text::terminal_text(&lsm_app::secrets::clean(&format!("{e:#}")))
            );
            return exit::USAGE;
        }
    };
    let catalog = match lsm_app::agent_defs::catalog(&config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    if let Some(name) = agent
        && catalog.get(name).is_none()
    {
        eprintln!(
            "error: unknown agent '{name}'; the agents are: {} (see `lsm agent list`)",
            catalog.names().join(", ")
        );
        return exit::USAGE;
    }
    let mut rows = rows(&config, &catalog);
    rows.extend(mcp_rows(&config, &catalog, &crate::terminal::notices::show));
    if let Some(name) = agent {
        rows.retain(|r| r.agents.iter().any(|a| a == name));
    }
    if json {
        match serde_json::to_string(&rows) {
            Ok(text) => crate::terminal::output::print_json(&text),
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
