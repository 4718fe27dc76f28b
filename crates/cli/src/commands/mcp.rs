//! `lsm mcp list`: every configured MCP server, whether it started, and its tools.
//! `lsm mcp serve`: the knowledge-base tools and `run_agent` over MCP, on stdio or streamable
//! HTTP.

use std::net::SocketAddr;

use anyhow::Result;
use clap::{Args, Subcommand};
use lsm_app::error::ConfigError;
use lsm_app::wiring::mcp::ServerState;

use crate::exit;
use crate::terminal::text::one_line;

/// `lsm mcp …`.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start every configured MCP server, and show its status (started, or why not) and its
    /// tools as agents see them (`mcp__<server>__<tool>`).
    List(ListArgs),
    /// Serve the knowledge-base tools and `run_agent` over MCP, on stdin/stdout or (with
    /// `--http`) streamable HTTP, for another MCP client's configuration. Every call goes
    /// through the sandbox of this configuration; calls that need a person's permission are
    /// denied (nobody is asked).
    Serve(ServeArgs),
}

/// Arguments of `lsm mcp serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The LLM provider the synthesis tools use (default: [llm] provider), as for
    /// `lsm agent run --provider`.
    #[arg(long, value_name = "SPEC")]
    pub provider: Option<String>,

    /// Serve streamable HTTP on this address (`127.0.0.1:8931`; a bare port means
    /// 127.0.0.1) instead of stdio. The endpoint is `http://ADDR/mcp`; the address actually
    /// bound (port 0 picks a free one) is printed on stdout.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,

    /// Allow `--http` to listen on an address other than loopback. Anyone who can reach it
    /// can then query the knowledge base and run agents: put it behind something that
    /// authenticates.
    #[arg(long, requires = "http")]
    pub allow_non_loopback: bool,
}

/// Arguments of `lsm mcp list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Run an `lsm mcp` command; returns the exit code.
pub fn run(cfg: &lsm_app::config::ConfigArgs, command: McpCommand) -> u8 {
    match command {
        McpCommand::List(args) => exit::block_on_command(list(cfg, args)),
        McpCommand::Serve(args) => exit::block_on_command(serve(cfg, args)),
    }
}

/// `lsm mcp serve`: the knowledge-base tools of the configured index (when there is one) and
/// `run_agent`, through the sandbox, with nobody to ask for permission. The knowledge-base
/// tools' model calls (synthesis) use the normal tier under one budget of `[agents]
/// max_tokens_budget` for the whole session; each `run_agent` call has its own run budget.
async fn serve(cfg: &lsm_app::config::ConfigArgs, args: ServeArgs) -> Result<u8> {
    let config = cfg.load()?;
    let listen = args
        .http
        .as_deref()
        .map(|a| listen_address(a, args.allow_non_loopback))
        .transpose()?;
    let registry = lsm_app::wiring::mcp::serve_tools(&config, args.provider.clone())?;
    if registry.is_empty() {
        eprintln!(
            "note: no knowledge-base tools: no index at {} (or no [llm] provider); serving run_agent only",
            one_line(config.kb.index_dir.display().to_string())
        );
    }
    let server = lsm_app::mcp_server::server(
        &config,
        registry,
        args.provider,
        crate::terminal::notices::on_stderr(),
    )?;
    let Some(addr) = listen else {
        server.serve_stdio().await?;
        return Ok(exit::OK);
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| ConfigError(format!("--http {addr}: cannot listen there: {e}")))?;
    let bound = listener.local_addr()?;
    println!("listening on http://{bound}/mcp");
    let stop = tokio_util::sync::CancellationToken::new();
    let _signals = crate::signals::on_stop("closing the server", {
        let stop = stop.clone();
        move || stop.cancel()
    });
    server.serve_http(listener, stop).await?;
    Ok(exit::OK)
}

/// The address `--http` names: `IP:PORT`, `localhost:PORT`, or a bare port on 127.0.0.1.
/// Loopback only, unless `allow_non_loopback`.
fn listen_address(text: &str, allow_non_loopback: bool) -> Result<SocketAddr> {
    let addr = if let Ok(port) = text.parse::<u16>() {
        SocketAddr::from(([127, 0, 0, 1], port))
    } else if let Some(port) = text.strip_prefix("localhost:") {
        let port = port.parse::<u16>().map_err(|_| bad_address(text))?;
        SocketAddr::from(([127, 0, 0, 1], port))
    } else {
        text.parse::<SocketAddr>().map_err(|_| bad_address(text))?
    };
    if !addr.ip().is_loopback() && !allow_non_loopback {
        return Err(ConfigError(format!(
            "--http {text}: {} is not a loopback address; anyone who can reach it could query \
             the knowledge base and run agents. Use 127.0.0.1, or pass --allow-non-loopback \
             behind something that authenticates",
            addr.ip()
        ))
        .into());
    }
    Ok(addr)
}

fn bad_address(text: &str) -> anyhow::Error {
    ConfigError(format!(
        "--http {text}: not an address; use IP:PORT (127.0.0.1:8931), localhost:PORT or a port"
    ))
    .into()
}

async fn list(cfg: &lsm_app::config::ConfigArgs, args: ListArgs) -> Result<u8> {
    let config = cfg.load()?;
    let statuses = lsm_app::wiring::mcp::statuses(&config).await?;
    let failed = statuses
        .iter()
        .any(|s| matches!(s.state, ServerState::Failed { .. }));
    if args.json {
        crate::terminal::output::print_json(&serde_json::to_string(&statuses)?);
    } else if statuses.is_empty() {
        println!(
            "No MCP servers configured: add [mcp.servers.<name>] to {} (see docs/CONFIG.md).",
            // Under the project's folder, whose name is not ours.
            one_line(config.source_name())
        );
    } else {
        for s in &statuses {
            // A project's configuration names the server and its command: shown on one line,
            // cleaned, like the server's own words below.
            let server = format!(
                "{}  ({})",
                one_line(s.name.clone()),
                one_line(s.transport.to_string())
            );
            match &s.state {
                ServerState::Disabled => println!("{server}  disabled"),
                ServerState::Failed { reason } => {
                    let reason = one_line(reason.clone());
                    println!("{server}  FAILED: {reason}");
                }
                ServerState::Ok { tools, skipped } => {
                    println!("{server}  ok, {} tools", tools.len());
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
                        // The server's words: nothing in them drives the terminal.
                        let first_line =
                            one_line(t.description.lines().next().unwrap_or("").to_string());
                        let name = one_line(t.name.clone());
                        println!("  {name:<width$}  {risk:<17}  {first_line}");
                    }
                    for why in skipped {
                        println!("  left out: {}", one_line(why.clone()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_listens_on_loopback_unless_told_otherwise() {
        let ok = |t: &str| listen_address(t, false).unwrap().to_string();
        assert_eq!(ok("127.0.0.1:8931"), "127.0.0.1:8931");
        assert_eq!(ok("8931"), "127.0.0.1:8931");
        assert_eq!(ok("localhost:0"), "127.0.0.1:0");
        assert_eq!(ok("[::1]:80"), "[::1]:80");
        for refused in ["0.0.0.0:8931", "192.168.1.4:80", "[::]:80"] {
            let e = listen_address(refused, false).unwrap_err();
            assert!(e.downcast_ref::<ConfigError>().is_some(), "{e}");
            assert!(e.to_string().contains("--allow-non-loopback"), "{e}");
            assert!(listen_address(refused, true).is_ok());
        }
        let e = listen_address("example.com:80", false).unwrap_err();
        assert!(e.to_string().contains("not an address"), "{e}");
    }
}
