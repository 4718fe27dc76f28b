//! Built-in file and shell tools.
//!
//! Every tool takes its paths only from [`ToolContext::path`] (confined by the sandbox) and
//! opens, lists and creates only through that [`crate::ConfinedPath`]'s root handle; file
//! I/O and directory walks run on a blocking thread, and walks stop when the call is
//! abandoned (timeout). No open can block: only regular files are opened, non-blocking.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::de::DeserializeOwned;

use crate::{ToolContext, ToolError, ToolRegistry};

mod bash;
mod find;
mod read;
mod write;

pub use bash::{Bash, ShellBash};
pub use find::FindFile;
pub use read::{FileMetadata, HashFile, ReadFile, ReadFolder};
pub use write::{AppendFile, CreateFolder, EditFile, WriteFile};

/// A registry holding every built-in tool.
pub fn registry() -> ToolRegistry {
    ToolRegistry::new()
        .with(Arc::new(ReadFile))
        .with(Arc::new(ReadFolder))
        .with(Arc::new(WriteFile))
        .with(Arc::new(AppendFile))
        .with(Arc::new(CreateFolder))
        .with(Arc::new(EditFile))
        .with(Arc::new(FindFile))
        .with(Arc::new(FileMetadata))
        .with(Arc::new(HashFile))
        .with(Arc::new(Bash))
}

/// The call's arguments as the tool's typed struct. The sandbox validated them against the
/// same struct's schema; this also catches what a schema cannot say (`1.0` for an integer).
fn parse_args<T: DeserializeOwned>(ctx: &ToolContext) -> Result<T, ToolError> {
    // Read from the arguments where they are: no copy of the tree for each call.
    serde::Deserialize::deserialize(&ctx.args)
        .map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

/// Set when the async side of a call is dropped (the sandbox's timeout), so a blocking walk
/// started for the call stops instead of running on unobserved.
#[derive(Debug, Clone, Default)]
struct Abandoned(Arc<AtomicBool>);

impl Abandoned {
    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Sets its [`Abandoned`] flag when dropped.
struct AbandonOnDrop(Abandoned);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.0.store(true, Ordering::Relaxed);
    }
}

/// Run blocking work (a directory walk) on the blocking pool. `work` should poll the flag.
async fn run_blocking<T: Send + 'static>(
    work: impl FnOnce(Abandoned) -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    let flag = Abandoned::default();
    let _guard = AbandonOnDrop(flag.clone());
    match tokio::task::spawn_blocking(move || work(flag)).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(ToolError::Failed(format!("the walk was cancelled: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PathAccess;

    #[test]
    fn registry_has_all_ten() {
        let reg = registry();
        let names: Vec<&str> = reg.names().collect();
        assert_eq!(
            names,
            [
                "append_file",
                "bash",
                "create_folder",
                "edit_file",
                "file_metadata",
                "find_file",
                "hash_file",
                "read_file",
                "read_folder",
                "write_file",
            ]
        );
    }

    #[test]
    fn schemas_describe_every_argument_and_deny_unknown() {
        for tool in registry().iter() {
            let schema = tool.parameters();
            assert_eq!(schema["type"], "object", "{}", tool.name());
            assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
            let props = schema["properties"].as_object().unwrap();
            for (name, prop) in props {
                assert!(
                    prop.get("description")
                        .and_then(|d| d.as_str())
                        .is_some_and(|d| !d.is_empty()),
                    "{}.{name} has no description",
                    tool.name()
                );
            }
            assert!(!tool.description().is_empty());
        }
    }

    #[test]
    fn risk_and_permission_defaults() {
        use crate::RiskLevel::*;
        let expected = [
            ("append_file", WritesWorkspace, true),
            ("bash", Exec, true),
            ("create_folder", WritesWorkspace, true),
            ("edit_file", WritesWorkspace, true),
            ("file_metadata", ReadOnly, false),
            ("find_file", ReadOnly, false),
            ("hash_file", ReadOnly, false),
            ("read_file", ReadOnly, false),
            ("read_folder", ReadOnly, false),
            ("write_file", WritesWorkspace, true),
        ];
        let reg = registry();
        for (name, risk, needs) in expected {
            let tool = reg.get(name).unwrap();
            assert_eq!(tool.risk(), risk, "{name}");
            assert_eq!(tool.needs_permission(), needs, "{name}");
        }
        assert_eq!(reg.get("bash").unwrap().command_arg(), Some("command"));
    }

    #[test]
    fn writing_tools_declare_write_paths() {
        let reg = registry();
        for tool in reg.iter() {
            let writes = tool.risk() == crate::RiskLevel::WritesWorkspace;
            for arg in tool.path_args() {
                let expected = if writes {
                    PathAccess::Write
                } else {
                    PathAccess::Read
                };
                assert_eq!(arg.access, expected, "{}.{}", tool.name(), arg.name);
            }
        }
    }
}
