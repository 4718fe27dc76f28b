//! Test doubles and builders that the workspace's tests and benchmarks share, so each is
//! written once: a [`PermissionAsker`](lsm_sandbox::PermissionAsker) that answers as told
//! ([`Asker`]), a tool that does nothing ([`Noop`]), scripted-provider lines and responses
//! ([`script`]), figures of the running process ([`process`]), and PostgreSQL for tests ([`pg`]).
//!
//! # What this crate must never do
//!
//! - Be a normal dependency of anything: it is a dev-dependency only (checked by
//!   `cargo xtask check-layers`, rule 6), so no double can reach a shipped program.
//! - Decide anything a test asserts: a double answers exactly as it is built to.

mod asker;
mod noop;
pub mod pg;
pub mod process;
pub mod script;

pub use asker::Asker;
pub use noop::{Noop, noop_sandbox};
