//! Errors: what a tool reports, and why the sandbox refused or lost a call.

use std::path::PathBuf;

/// A tool's own failure. The model sees `Error: Tool 'x' failed: <message>`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments passed the schema but make no sense (a line range past the end, …).
    /// The model should correct them.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// A file system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Anything else, with an explanation.
    #[error("{0}")]
    Failed(String),
    /// The call ran past the sandbox's `timeout_seconds` (given in [`crate::ToolContext`])
    /// and was ended by the tool itself, which [`crate::Tool::bounds_itself`]: the sandbox
    /// reports it as [`ExecError::Timeout`].
    #[error("timed out")]
    TimedOut,
}

impl ToolError {
    /// An [`ToolError::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ToolError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Why a call did not produce output. Denials are policy decisions; the rest are failures.
/// Every message says what was wrong, so the model (or person) can correct the call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// No tool of that name is registered.
    #[error("Tool '{name}' does not exist")]
    UnknownTool {
        /// The requested name.
        name: String,
    },
    /// The permission gate said no (or nobody could be asked).
    #[error("Tool '{tool}' was denied permission: {reason}")]
    PermissionDenied {
        /// Tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// A network tool while `allow_url_access` is off.
    #[error(
        "Tool '{tool}' needs network access, which this sandbox does not allow (set sandbox.allow_url_access = true to permit it)"
    )]
    NetworkDenied {
        /// Tool.
        tool: String,
    },
    /// The arguments do not match the tool's schema.
    #[error("Tool '{tool}' was given invalid arguments: {message}")]
    InvalidArguments {
        /// Tool.
        tool: String,
        /// What is wrong, naming the argument.
        message: String,
    },
    /// A path argument is refused by the allowlists.
    #[error("Tool '{tool}' may not use path '{path}': {reason}")]
    PathDenied {
        /// Tool.
        tool: String,
        /// The path as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// The command line is refused by the command policy.
    #[error("Tool '{tool}' command refused: {reason}")]
    CommandDenied {
        /// Tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// Too many calls of this tool in the current window.
    #[error(
        "Tool '{tool}' is rate limited: at most {calls} calls per {per_seconds} s; wait before calling it again"
    )]
    RateLimited {
        /// Tool.
        tool: String,
        /// Calls allowed per window.
        calls: u32,
        /// Window length.
        per_seconds: u64,
    },
    /// The call did not finish in time and was abandoned.
    #[error("Tool '{tool}' timed out after {seconds} s")]
    Timeout {
        /// Tool.
        tool: String,
        /// The limit.
        seconds: f64,
    },
    /// The tool panicked; the panic was contained.
    #[error("Tool '{tool}' failed: it panicked ({message})")]
    Panicked {
        /// Tool.
        tool: String,
        /// The panic message, if it had one.
        message: String,
    },
    /// The tool ran and reported a failure.
    #[error("Tool '{tool}' failed: {source}")]
    Failed {
        /// Tool.
        tool: String,
        /// Its error.
        source: ToolError,
    },
}

impl ExecError {
    /// Whether this is a policy denial (as opposed to an unknown tool or a failure).
    pub fn is_denial(&self) -> bool {
        matches!(
            self,
            ExecError::PermissionDenied { .. }
                | ExecError::NetworkDenied { .. }
                | ExecError::PathDenied { .. }
                | ExecError::CommandDenied { .. }
                | ExecError::RateLimited { .. }
        )
    }
}

/// The sandbox configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxConfigError {
    /// An allowlisted folder does not exist or cannot be resolved. Create it or fix the path.
    #[error("sandbox allowlist path '{path}' cannot be used: {message}")]
    BadAllowlistPath {
        /// The configured path.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A numeric limit is zero or out of range.
    #[error("sandbox setting {key} = {value} is invalid: {message}")]
    BadLimit {
        /// The key.
        key: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        message: String,
    },
}
