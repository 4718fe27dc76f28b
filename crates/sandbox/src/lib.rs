//! Tools and the sandbox every tool execution goes through.
//!
//! A [`Tool`] declares its name, description, JSON-schema parameters, [`RiskLevel`], whether
//! it needs a person's permission by default, which of its arguments are paths
//! ([`Tool::path_args`]) and which is a shell command ([`Tool::command_arg`]). A
//! [`ToolRegistry`] holds tools by name. The [`Sandbox`] runs a call through, in this order:
//!
//! 1. permission gate — `require_user_permission[tool]`, then `require_permission_by_risk[risk]`,
//!    then the tool's default; when a person must decide, the [`PermissionAsker`] is asked, and
//!    with none configured the call is denied;
//! 2. network policy — tools of risk `network` need `allow_url_access`;
//! 3. argument validation against the schema (missing, unexpected, wrong JSON type, oversize
//!    strings);
//! 4. read/write path allowlists for every declared path argument (empty, NUL, `..` before and
//!    after resolving, escaping symlinks, anything outside the allowlists, named pipes, devices
//!    and sockets are refused; writes to [`SandboxConfig::protected_paths`] too, whatever the
//!    allowlists say);
//! 5. command policy for a declared command argument (chaining and substitution refused,
//!    allow/deny lists on the base command name, network programs refused without network
//!    access, programs that run other programs refused, path arguments and redirections
//!    checked — as writes for programs that write to their arguments, such as `rm` or `cp`);
//! 6. a rate limit per tool;
//! 7. the runner: a timeout (none for a tool that [`Tool::bounds_itself`]: the interaction
//!    channel bounds a person's answer, a run's budget bounds an agent run), panics caught, an output cap with `[TRUNCATED n bytes]`,
//!    secrets redacted.
//!
//! Tools receive their checked paths and command through [`ToolContext`]: a path is a
//! [`ConfinedPath`] — the allowlisted root's open directory handle plus the path beneath it —
//! and tools open, create and list only through it, so nothing swapped in on the path after
//! the check can lead outside the root, only regular files are ever opened (non-blocking), and
//! protected files and folders are refused again on the opened handle.
//!
//! # What this crate must never do
//!
//! - Let a denial or a tool failure escape as a panic or an `Err` to the caller: every call
//!   ends in an [`Execution`] whose outcome is a value.
//! - Run a command through a shell: `bash` parses the command itself and executes the program
//!   directly, so no expansion, globbing or chaining can happen behind the policy's back.
//! - Depend on any other `lsm-*` crate than `lsm-phase`, the leaf, for its text helpers
//!   ([`char_cut`], [`truncate_chars`]).
//!
//! # Guide: a tool of your own
//!
//! Implement [`Tool`], register it in a [`ToolRegistry`] (beside the [`builtin`] tools, or
//! alone), and run calls through a [`Sandbox`]. The tool sees only arguments that match its
//! schema; a refused or failed call is an [`Execution`] whose outcome is an error.
//!
//! ```
//! use std::sync::Arc;
//!
//! use lsm_sandbox::{
//!     RiskLevel, Sandbox, SandboxConfig, Tool, ToolContext, ToolError, ToolOutput, schema_for,
//! };
//! use serde_json::json;
//!
//! /// The arguments; the schema the model is shown and the sandbox checks is derived from it.
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct ShoutArgs {
//!     /// The text to shout.
//!     text: String,
//! }
//!
//! struct Shout;
//!
//! #[async_trait::async_trait]
//! impl Tool for Shout {
//!     fn name(&self) -> &str {
//!         "shout"
//!     }
//!     fn description(&self) -> &str {
//!         "Upper-case a text."
//!     }
//!     fn parameters(&self) -> serde_json::Value {
//!         schema_for::<ShoutArgs>()
//!     }
//!     fn risk(&self) -> RiskLevel {
//!         RiskLevel::ReadOnly
//!     }
//!     async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
//!         Ok(ToolOutput::text(ctx.str_arg("text")?.to_uppercase()))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let workspace = tempfile::tempdir()?;
//! let registry = lsm_sandbox::builtin::registry().with(Arc::new(Shout));
//! // Reads and writes inside the workspace only; no person to ask, so calls that need
//! // permission are denied.
//! let policy = SandboxConfig::confined_to(workspace.path());
//! let sandbox = Sandbox::new(policy, registry, None)?;
//!
//! let shouted = sandbox.execute("shout", &json!({"text": "hello"})).await;
//! assert_eq!(shouted.outcome?, "HELLO");
//! // Arguments that do not match the schema never reach the tool.
//! let refused = sandbox.execute("shout", &json!({"text": 42})).await;
//! assert!(refused.outcome.is_err());
//! // Nor does a path outside the workspace reach a built-in tool.
//! let outside = sandbox.execute("read_file", &json!({"path": "/etc/hostname"})).await;
//! assert!(outside.outcome.is_err());
//! # Ok(())
//! # }
//! ```

pub mod builtin;
mod call;
mod command;
mod config;
pub mod confine;
mod confined_path;
mod context;
mod error;
mod output;
mod paths;
mod permission;
pub mod preview;
mod redactor;
mod registry;
mod sandbox;
mod tool;
mod validate;

pub use call::{Caller, PathAccess, PathArg, RiskLevel, ToolEvent, ToolEventKind, ToolOutput};
pub use command::{CheckedCommand, Redirect};
pub use config::{RateLimit, SandboxConfig, default_command_allowlist, default_command_denylist};
pub use confine::{Confinement, ConfinementUnavailable, ExecHelper};
pub use confined_path::{ConfinedPath, EntryInfo, EntryKind, WriteMode};
pub use context::ToolContext;
pub use error::{ExecError, SandboxConfigError, ToolError};
pub use lsm_phase::text::{char_cut, truncate_chars};
pub use output::{MIN_SECRET_LEN, REDACTED, cap_output};
pub use permission::{PermissionAsker, PermissionDecision, PermissionEvent, PermissionRequest};
pub use redactor::{
    Redactor, json_may_hold_secrets, redact_json_secrets, redact_secrets, register_own_folder,
    register_secret,
};
pub use registry::ToolRegistry;
pub use sandbox::{Execution, Inspection, Sandbox};
pub use tool::{Tool, schema_for};
