//! `lsm-app`: the composition root of lsm, as a library — the one place where the concrete
//! crates (providers, sandbox, harness, agents, knowledge base, memory, MCP, the PostgreSQL
//! store) are wired together. Configuration layers ([`config`]), the wiring of a run
//! ([`wiring`]), the run stores ([`store`]), preparing and launching a run ([`run`]), the
//! conductor's workers, the queue of runs a worker drives ([`queue`]) and the runtime manager
//! of concurrent runs ([`runtime`]) live here.
//!
//! Front ends — the `lsm` binary's commands and TUI, and any web or chat front end beside it
//! — use this crate and nothing below it to start runs: they hand in what a person asked and
//! render the values, events ([`protocol`]) and errors that come back.
//!
//! # What this crate must never do
//!
//! - Print for a person: no `println!`/`eprintln!`. Output is the front ends' job; what a
//!   person should see is returned, or passed to a callback or an event sink the front end
//!   supplies. Diagnostics go to `tracing`.
//! - Depend on a front end (the `lsm` binary, a web console): they depend on it.
//! - Decide an exit code: errors are typed values ([`error::AppError`]; its `Config` variant,
//!   [`error::ConfigError`], marks "bad configuration or command line; nothing ran"), and a
//!   run's end is its stop reason.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agent_defs;
pub mod agent_files;
pub mod config;
pub mod deferred_tools;
pub mod error;
pub mod llm;
pub mod mcp_server;
pub mod notice;
pub mod protocol;
pub mod queue;
pub mod run;
pub mod runtime;
pub mod secrets;
pub mod store;
pub mod tools;
pub mod wiring;
