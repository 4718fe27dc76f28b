//! The commands of `lsm`, one module per command or group: each parses its arguments (clap),
//! asks the engine (`lsm-app`) to do the work, and shows the result through [`crate::terminal`].

pub mod agent_run;
pub mod agent_view;
pub mod chat;
pub mod config;
pub mod init;
pub mod kb;
pub mod llm;
pub mod mcp;
pub mod memory;
pub mod run_many;
pub mod runs;
pub mod tools;
pub mod worker;
