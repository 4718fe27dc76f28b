//! The errors of the composition root: [`AppError`], and among them the one every front end
//! maps to "bad command line or configuration; nothing ran" (the `lsm` binary's exit code 2),
//! [`ConfigError`]. Any other error is a failure of the work itself.

use std::fmt::Display;

/// A configuration or command-line error: what was asked cannot be done as configured. Its
/// message names the file and line, the variable or the flag at fault, and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// What went wrong in the engine. [`AppError::Config`] is the caller's to fix (the command
/// line, a setting); the rest are failures of the work, each saying what failed and why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppError {
    /// Bad command line or configuration; nothing ran. Fix what the message names.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A run's records, journal or store.
    #[error(transparent)]
    Harness(#[from] lsm_harness::HarnessError),
    /// The PostgreSQL store.
    #[error(transparent)]
    Store(#[from] lsm_store_pg::StoreError),
    /// A model provider.
    #[error(transparent)]
    Provider(#[from] lsm_providers::ProviderError),
    /// The sandbox's settings.
    #[error(transparent)]
    Sandbox(#[from] lsm_sandbox::SandboxConfigError),
    /// The knowledge base.
    #[error(transparent)]
    Kb(#[from] lsm_tools_kb::KbError),
    /// Persistent memory.
    #[error(transparent)]
    Memory(#[from] lsm_memory::MemoryError),
    /// An MCP server.
    #[error(transparent)]
    Mcp(#[from] lsm_mcp::McpError),
    /// A file or process operation.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// JSON that could not be written or read.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// An agent of the catalog whose definition names no agent this build has (a code
    /// agent's card without its code): a bug of this build, not of the configuration.
    #[error("agent '{name}' is listed but cannot be built")]
    AgentUnbuildable {
        /// The agent.
        name: String,
    },
    /// What was being done when `source` happened.
    #[error("{context}: {source}")]
    Context {
        /// What was being done.
        context: String,
        /// What went wrong.
        #[source]
        source: Box<AppError>,
    },
}

/// The engine's result.
pub type Result<T, E = AppError> = std::result::Result<T, E>;

/// Say what was being done when an error happened (the message comes first, then the cause).
pub trait Context<T> {
    /// With a fixed message.
    ///
    /// # Errors
    /// The error, wrapped in [`AppError::Context`].
    fn context(self, context: impl Display) -> Result<T>;
    /// With a message made only on error.
    ///
    /// # Errors
    /// The error, wrapped in [`AppError::Context`].
    fn with_context<C: Display>(self, context: impl FnOnce() -> C) -> Result<T>;
}

impl<T, E: Into<AppError>> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl Display) -> Result<T> {
        self.map_err(|e| AppError::Context {
            context: context.to_string(),
            source: Box::new(e.into()),
        })
    }

    fn with_context<C: Display>(self, context: impl FnOnce() -> C) -> Result<T> {
        self.map_err(|e| AppError::Context {
            context: context().to_string(),
            source: Box::new(e.into()),
        })
    }
}

/// An [`AppError::Config`] with `msg`.
pub fn usage(msg: impl Into<String>) -> AppError {
    AppError::Config(ConfigError(msg.into()))
}

/// Whether `e`, or an error it wraps, is a [`ConfigError`] (exit code 2).
pub fn is_usage(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if e.downcast_ref::<ConfigError>().is_some()
            || matches!(e.downcast_ref::<AppError>(), Some(AppError::Config(_)))
        {
            return true;
        }
        next = e.source();
    }
    false
}
