//! The error every front end maps to "bad command line or configuration; nothing ran" (the
//! `lsm` binary's exit code 2): [`ConfigError`]. Any other error of this crate is a failure
//! of the work itself.

/// A configuration or command-line error: what was asked cannot be done as configured. Its
/// message names the file and line, the variable or the flag at fault, and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// A [`ConfigError`] with `msg`, as an [`anyhow::Error`] (a caller tells it from other errors
/// with `downcast_ref::<ConfigError>()`).
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    ConfigError(msg.into()).into()
}

/// Whether `e` is, or wraps, a [`ConfigError`].
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.downcast_ref::<ConfigError>().is_some()
}
