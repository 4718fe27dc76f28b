//! Model Context Protocol for lsm.
//!
//! **Client.** `[mcp.servers.<name>]` configures MCP servers, started over stdio
//! (`command`, `args`, `env`) or reached over streamable HTTP (`url`). [`McpClients`] starts
//! them on first use and turns each of their tools into an [`McpTool`], an ordinary
//! [`lsm_sandbox::Tool`] named `mcp__<server>__<tool>`: registered in a run's
//! [`lsm_sandbox::ToolRegistry`], it is called only through the [`lsm_sandbox::Sandbox`], like
//! every tool (schema validation, permission gate, rate limit, timeout, output cap,
//! redaction), and offered to an agent only when its allowlist names it.
//!
//! **Server.** [`SandboxServer`] serves a [`lsm_sandbox::Sandbox`]'s tools over MCP (stdio):
//! every call a client makes goes through that sandbox's checks.
//!
//! # What this crate must never do
//!
//! - Let a server that crashes or hangs hang a run: every request is bounded by the server's
//!   `timeout_seconds` and ends in an error result; the session is then stopped and started
//!   again on the next call.
//! - Pass our environment to a stdio server: it gets `PATH`, `HOME`, `LANG` and its configured
//!   `env`, nothing else (no API keys).
//! - Trust a server: its tools default to risk `exec` and need a person's permission.
//! - Depend on `lsm-harness`, `lsm-providers` or `lsm-agents` (checked by
//!   `cargo xtask check-layers`).

mod client;
mod clients;
mod config;
mod error;
pub mod naming;
mod server;
mod tool;

pub use client::{Connection, PASSED_ENV, child_env};
pub use clients::{McpClients, ServerState, ServerStatus, ToolRow, servers_named};
pub use config::{McpConfig, ServerConfig, ToolOverride, Transport};
pub use error::McpError;
pub use server::SandboxServer;
pub use tool::{MAX_DESCRIPTION_CHARS, McpTool, SchemaError, parameters_for, result_text};
