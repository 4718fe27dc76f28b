//! Errors of the knowledge base. Each variant says what went wrong and how to recover.

use std::path::PathBuf;

/// Why a knowledge-base operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KbError {
    /// The index folder could not be created, read or written. Check the path in
    /// `[kb] index_dir` and its permissions.
    #[error("knowledge-base index at {path}: {message}")]
    Index {
        /// The index folder.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// No index exists yet at the configured folder. Run `lsm ingest <folder>` first.
    #[error("no knowledge base at {path}: run `lsm ingest <folder>` first")]
    NoIndex {
        /// The index folder.
        path: PathBuf,
    },
    /// The index was built with another embedder than the one configured. Configure the
    /// embedder it was built with, or re-ingest into a fresh index (`lsm ingest --rebuild`).
    #[error(
        "the index at {path} was built with embedder {built}, but {configured} is configured; \
         set [kb.embedder] back to {built}, or rebuild the index with `lsm ingest --rebuild <folder>...`"
    )]
    EmbedderMismatch {
        /// The index folder.
        path: PathBuf,
        /// What the index records (`model (dims)` or `none`).
        built: String,
        /// What the configuration asks for.
        configured: String,
    },
    /// The embedder could not be loaded or failed on an input. For the local model, run
    /// `cargo xtask fetch-model`; for an endpoint, check its URL and that it is running.
    #[error("embedder {model}: {message}")]
    Embedder {
        /// The model name.
        model: String,
        /// What failed and what to do.
        message: String,
    },
    /// A setting is invalid. Fix the named key.
    #[error("invalid knowledge-base setting {key}: {message}")]
    Config {
        /// The key.
        key: String,
        /// What is allowed.
        message: String,
    },
    /// A query or mode is invalid. Correct the request.
    #[error("{0}")]
    InvalidRequest(String),
    /// The run's budget refused an LLM call the operation needed (the provider's
    /// `BudgetExhausted`): no further model call is possible in this run. Not retryable;
    /// the message says which ceiling is spent.
    #[error("{0}")]
    BudgetExhausted(String),
    /// A file system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl KbError {
    /// An [`KbError::Index`] for `path`.
    pub fn index(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        KbError::Index {
            path: path.into(),
            message: message.to_string(),
        }
    }

    /// An [`KbError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        KbError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = KbError> = std::result::Result<T, E>;
