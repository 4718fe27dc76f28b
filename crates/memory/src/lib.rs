//! Persistent agent memory: facts an agent (or a person) saves in one run and the agents see
//! again in later runs.
//!
//! - [`MemoryBackend`] is what every store offers: put, get, approve, remove, search,
//!   prune, list, and the standing block built on search; with the rules every store keeps
//!   ([`NewMemory::checked`], [`Reach::check`], [`refresh`], [`SearchQuery::matching`]).
//!   The tools, the standing-context adapter and the command line take an
//!   `Arc<dyn MemoryBackend>`; `lsm-store-pg` implements it over PostgreSQL. The shared tests
//!   of the `testing` module (feature `testing`) run against every implementation.
//! - [`MemoryStore`], the embedded implementation, keeps memories in SQLite databases with an FTS5 full-text
//!   index: one per agent for agent scope (`<agents_folder>/<agent>/memory/memory.db`), one
//!   per agents folder for project scope (`<agents_folder>/project_memory.db`), and one per
//!   user for global scope (`$XDG_DATA_HOME/lsm/global_memory.db`, else
//!   `~/.local/share/lsm/global_memory.db`); see [`StoreLayout`]. Every file is in WAL mode
//!   with a busy timeout, writers take the lock up front and retry while another run holds
//!   it, and the schema is migrated by `PRAGMA user_version`. Expired memories are never
//!   returned, and are deleted by the next write.
//! - [`tools()`] are the agent's tools over the store: `memory_put`, `memory_search`,
//!   `memory_remove` (they implement `lsm_sandbox::Tool`, so every call goes through the
//!   sandbox's permission gate, schema check and rate limit). Each change they make is
//!   reported as a `lsm_sandbox::ToolEvent` for the run's records.
//! - [`MemoryBackend::standing_context`] builds the standing block the harness injects before
//!   every LLM call: the approved memories relevant to the topic, scopes agent → project →
//!   global, at most `limit` of them within a token budget ([`format_block`]).
//!
//! - [`MemoryConfig`] is the settings (`[agents.memory]` in `lsm.toml`) and the store they
//!   describe.
//!
//! A memory is a **candidate** until approved: candidates are never injected and never found
//! by an agent's search. A `memory_put` that a person allowed through the permission gate is
//! stored approved; see [`tools`] for the rule.
//!
//! # What this crate must never do
//!
//! - Block the async runtime: the tools run every store operation on the blocking pool, and
//!   callers of the blocking [`MemoryBackend`] API from async code must do the same.
//! - Depend on a database server's client (`lsm-store-pg` depends on this crate, not the
//!   other way round): this crate stays a small embedded store.
//! - Surface "database is locked" to an agent while another run writes: writers wait and
//!   retry.
//! - Return or inject an expired memory, or inject a candidate.
//! - Let an agent reach another agent's agent-scope memories, or write outside the memory
//!   databases (its tools take no paths).
//! - Depend on `lsm-harness` or be depended on by `lsm-agents` (checked by
//!   `cargo xtask check-layers`): the composition root adapts it to the harness's
//!   `MemoryProvider`.

mod backend;
mod config;
mod error;
mod model;
mod schema;
mod standing;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tools;

pub use backend::{
    Matching, MemoryBackend, Refresh, new_memory_id, query_terms, refresh, scopes_wanted,
};
pub use config::{MemoryConfig, MemoryConfigError};
pub use error::MemoryError;
pub use model::{
    Hit, ListFilter, MAX_TAG_CHARS, MAX_TAGS, MAX_TEXT_BYTES, Memory, NewMemory, PutOutcome, Reach,
    Scope, SearchQuery, Status, normalize_tags,
};
pub use standing::{
    STANDING_HEADER, StandingOptions, estimate_tokens, format_block, token_budget_for,
};
pub use store::{
    AGENT_DB_FILE, Clock, GLOBAL_DB_FILE, MemoryStore, PROJECT_DB_FILE, StoreLayout,
    default_global_db,
};
pub use tools::tools;

/// The names of the memory tools.
pub const TOOL_NAMES: &[&str] = &["memory_put", "memory_search", "memory_remove"];
