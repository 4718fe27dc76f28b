//! What a tool receives for one call: validated arguments, confined paths, a checked command.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::{Caller, CheckedCommand, ConfinedPath, ToolError};

/// The inputs of one call, prepared by the sandbox.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The arguments, already validated against the tool's schema.
    pub args: serde_json::Value,
    pub(crate) paths: HashMap<String, ConfinedPath>,
    pub(crate) command: Option<CheckedCommand>,
    /// Largest file the tool may write, in bytes.
    pub max_write_bytes: usize,
    /// The call's time limit (the sandbox enforces it; tools that run children use it too).
    pub timeout: Duration,
    /// Base folder for relative paths and working directory for commands.
    pub working_dir: PathBuf,
    /// The scrubbed environment for executed programs (shared by every call's context: the
    /// sandbox reads it once).
    pub env: Arc<[(String, String)]>,
    pub(crate) caller: Option<Caller>,
    pub(crate) permission_granted: bool,
}

impl ToolContext {
    /// The confined path of the path argument `name`: its root folder's handle plus the
    /// path beneath it. Open, list, create and stat only through it; it resolves every
    /// component beneath the root, so nothing swapped in after the check can lead out.
    ///
    /// # Errors
    /// When `name` is not a declared path argument or was absent from the call: a tool can
    /// only ever open paths the sandbox checked.
    pub fn path(&self, name: &str) -> Result<&ConfinedPath, ToolError> {
        self.paths
            .get(name)
            .ok_or_else(|| ToolError::InvalidArguments(format!("missing path argument '{name}'")))
    }

    /// The confined path of `name`, or `None` when the optional argument was not given.
    pub fn optional_path(&self, name: &str) -> Option<&ConfinedPath> {
        self.paths.get(name)
    }

    /// Who the call is made for (agent and run), when the sandbox was told
    /// ([`crate::Sandbox::execute_as`]); `None` for anonymous calls ([`crate::Sandbox::execute`]).
    pub fn caller(&self) -> Option<&Caller> {
        self.caller.as_ref()
    }

    /// Whether the permission gate asked about this call and the asker approved it. `false`
    /// when no permission was needed (configuration said not to ask).
    pub fn permission_granted(&self) -> bool {
        self.permission_granted
    }

    /// The checked command line of a command tool.
    ///
    /// # Errors
    /// When the tool declared no command argument.
    pub fn command(&self) -> Result<&CheckedCommand, ToolError> {
        self.command
            .as_ref()
            .ok_or_else(|| ToolError::Failed("this tool has no checked command".into()))
    }

    /// A string argument.
    ///
    /// # Errors
    /// When absent or not a string.
    pub fn str_arg(&self, name: &str) -> Result<&str, ToolError> {
        self.args
            .get(name)
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| ToolError::InvalidArguments(format!("'{name}' must be a string")))
    }

    /// An optional string argument.
    pub fn opt_str_arg(&self, name: &str) -> Option<&str> {
        self.args.get(name).and_then(serde_json::Value::as_str)
    }

    /// An optional unsigned integer argument.
    pub fn opt_u64_arg(&self, name: &str) -> Option<u64> {
        self.args.get(name).and_then(serde_json::Value::as_u64)
    }

    /// An optional boolean argument.
    pub fn opt_bool_arg(&self, name: &str) -> Option<bool> {
        self.args.get(name).and_then(serde_json::Value::as_bool)
    }

    /// A context for calling a tool directly in tests of the tool itself (no sandbox checks):
    /// each path must lie under `working_dir`, which serves as their root folder.
    #[cfg(test)]
    pub(crate) fn for_test(
        args: serde_json::Value,
        paths: impl IntoIterator<Item = (&'static str, PathBuf)>,
        working_dir: PathBuf,
    ) -> Self {
        let root = Arc::new(
            cap_std::fs::Dir::open_ambient_dir(&working_dir, cap_std::ambient_authority()).unwrap(),
        );
        let paths = paths
            .into_iter()
            .map(|(k, v)| {
                let relative = v.strip_prefix(&working_dir).unwrap().to_path_buf();
                let confined = ConfinedPath::new(Arc::clone(&root), relative, v, Arc::default());
                (k.to_string(), confined)
            })
            .collect();
        ToolContext {
            args,
            paths,
            command: None,
            max_write_bytes: 10 * 1024 * 1024,
            timeout: Duration::from_secs(30),
            working_dir,
            env: Arc::default(),
            caller: None,
            permission_granted: false,
        }
    }
}
