//! PostgreSQL storage for lsm, for runs that must outlive one machine.
//!
//! - [`Db`] is a connection pool on a runtime of its own, usable from synchronous code (the
//!   harness appends journal lines synchronously, as it writes files) and from async code
//!   alike; connections are re-made after the server restarts, and the operations retry
//!   while it is away ([`Db::blocking`], [`Db::run`]).
//! - [`PgSettings`] is how to reach the server: a `postgres://` URL without a password (the
//!   password comes from the environment only), a schema, TLS.
//! - The schema is created and migrated automatically, in numbered, recorded steps
//!   ([`migrate`]); a database migrated by a newer program is refused.
//! - [`PgRuns`] keeps run journals (one row per journal line, exactly the line the file
//!   journal would hold), the runs' leases and a queue of runs that workers claim with
//!   `SELECT … FOR UPDATE SKIP LOCKED`.
//! - [`PgMemory`] keeps agent memory (`lsm_memory::MemoryBackend`): every scope in one
//!   table, projects apart by a key, full-text search on a `tsvector` column under a GIN
//!   index. It passes the same shared tests as the SQLite store.
//!
//! # What this crate must never do
//!
//! - Depend on `lsm-harness` (rule 4: only the composition root wires the harness in): it
//!   stores journal lines as text and is told what it needs of them; `lsm-cli` adapts it to
//!   the harness's `RunStore`.
//! - Take a password from a URL or a configuration file (only from the environment).
//! - Append a journal line for a run whose lease this process does not hold: every append
//!   checks the lease in the same statement, so a worker that lost its run cannot write
//!   into it after another took it over.

mod db;
mod error;
mod memory;
pub mod migrate;
mod runs;
mod settings;
mod tls;

pub use db::Db;
pub use error::StoreError;
pub use memory::PgMemory;
pub use runs::{
    CancelOutcome, FINISHED_STATUSES, Heartbeat, ListFilter, PgRuns, RunRow, TakeOutcome,
};
pub use settings::{PASSWORD_ENV, PgSettings, SCHEMA_DEFAULT};
