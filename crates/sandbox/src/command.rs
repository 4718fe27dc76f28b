//! Command-line policy for tools that execute programs. IMPLEMENTATION PENDING.

use std::path::PathBuf;

use crate::paths::PathPolicy;

/// An output redirection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// Confined target path.
    pub path: PathBuf,
    /// `>>` rather than `>`.
    pub append: bool,
}

/// A parsed command line that passed the policy. Executed without a shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedCommand {
    /// The program (as given; looked up on the scrubbed PATH).
    pub program: String,
    /// Its arguments, unexpanded.
    pub args: Vec<String>,
    /// `< file`, confined for reading.
    pub stdin: Option<PathBuf>,
    /// `> file` / `>> file`, confined for writing.
    pub stdout: Option<Redirect>,
}

#[derive(Debug)]
pub(crate) struct CommandPolicy {}

impl CommandPolicy {
    pub(crate) fn new(_allow: &[String], _deny: &[String], _allow_network: bool) -> Self {
        CommandPolicy {}
    }

    pub(crate) fn check(&self, _line: &str, _paths: &PathPolicy) -> Result<CheckedCommand, String> {
        Err("command checks are not implemented yet".into())
    }
}
