//! [`MemoryError`]: what can go wrong with the store, and what to do about it.

use std::path::PathBuf;

/// A memory operation that failed. Every message says what was wrong and how to recover.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// SQLite refused an operation on a database file. Recover: check that the folder exists
    /// and is writable, that the file is not corrupt (`sqlite3 <file> 'PRAGMA
    /// integrity_check'`) and that it is not on a network file system (WAL needs shared
    /// memory).
    #[error("memory database {}: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// A folder for a database could not be created. Recover: make the agents folder (or the
    /// configured database folder) writable.
    #[error("cannot create the memory folder {}: {source}", path.display())]
    Io {
        /// The folder.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The database was written by a newer version of this program. Recover: upgrade `lsm`,
    /// or point the configuration at another database file.
    #[error(
        "memory database {} has schema version {found}, newer than the {supported} this build \
         knows; upgrade lsm or use another database file",
        path.display()
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// The newest version this build can read.
        supported: i64,
    },
    /// The memory text is empty. Recover: give the fact to remember.
    #[error("the memory text is empty: give the fact to remember")]
    EmptyText,
    /// The memory text is longer than a memory may be. Recover: store a shorter, single fact
    /// (split long notes into several memories).
    #[error(
        "the memory text is {len} bytes, over the limit of {max}: store one short fact per memory"
    )]
    TextTooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A tag is not acceptable. Recover: use short tags of letters, digits, `-`, `_`, `.`,
    /// `:` or `/`.
    #[error("tag '{tag}' is not acceptable: {reason}")]
    BadTag {
        /// The tag as given.
        tag: String,
        /// Why.
        reason: String,
    },
    /// Too many tags on one memory or in one query. Recover: keep the most telling ones.
    #[error("{count} tags given, at most {max} are allowed")]
    TooManyTags {
        /// How many were given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// An agent name that cannot name a folder. Recover: use the agent's own name (letters,
    /// digits, `-`, `_`).
    #[error("'{0}' is not an agent name: use letters, digits, '-' and '_' only")]
    BadAgentName(String),
    /// Global scope was asked for but has no database. Recover: set `[agents.memory]
    /// global_db`, or set `HOME` (or `XDG_DATA_HOME`) so the default location exists.
    #[error(
        "global memory has no database: no user data folder was found; set [agents.memory] \
         global_db in lsm.toml"
    )]
    NoGlobalDatabase,
    /// No memory has this id within reach. Recover: list the ids with `lsm memory list` (an
    /// agent can only reach its own, project and global memories).
    #[error("no memory with id '{0}' (list the ids with `lsm memory list`)")]
    NotFound(String),
    /// The store's database (a server) failed or could not be reached. Recover: what the
    /// message says (check that the server runs and the settings that name it).
    #[error("memory store: {0}")]
    Backend(Box<dyn std::error::Error + Send + Sync>),
    /// The blocking worker running a store operation was lost (the runtime is shutting
    /// down). Recover: retry the operation.
    #[error("the memory operation did not complete: {0}")]
    Interrupted(String),
}

impl MemoryError {
    pub(crate) fn sqlite(path: &std::path::Path) -> impl FnOnce(rusqlite::Error) -> Self + '_ {
        move |source| MemoryError::Sqlite {
            path: path.to_path_buf(),
            source,
        }
    }
}
