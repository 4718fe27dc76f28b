//! Sandbox settings (`[sandbox]` in `lsm.toml`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::RiskLevel;

/// Which executable applies the OS sandbox (set by the composition root; never read from
/// `lsm.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ExecHelper {
    /// The running program, provided it dispatches the helper by calling
    /// [`crate::confine::run_helper_if_requested`] at the start of `main` (the `lsm` binary does). Without
    /// that call confinement is unavailable.
    #[default]
    CurrentExe,
    /// This executable, e.g. the `lsm-confine` binary of this crate.
    Path(PathBuf),
    /// Confinement is unavailable for this reason (what a host without the helper sees; the
    /// tests of the refusal path use it).
    Unavailable(String),
}

/// A rate limit: at most `calls` per `per_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Calls allowed per window (≥ 1).
    pub calls: u32,
    /// Window length in seconds (≥ 1).
    pub per_seconds: u64,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            calls: 120,
            per_seconds: 60,
        }
    }
}

/// The sandbox policy. Every field has a safe default: nothing readable or writable, no
/// network, permission rules from the tools' own defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// Folders whose contents tools may read.
    pub allowed_read_paths: Vec<PathBuf>,
    /// Folders whose contents tools may write.
    pub allowed_write_paths: Vec<PathBuf>,
    /// Base folder for relative paths and the working directory of commands. Default: the
    /// first write path, else the first read path, else the process's current directory.
    pub working_dir: Option<PathBuf>,
    /// Whether tools of risk `network` may run.
    pub allow_url_access: bool,
    /// Per-tool permission override: `true` asks a person, `false` never asks.
    pub require_user_permission: BTreeMap<String, bool>,
    /// Per-risk permission override, consulted when the tool has no per-tool setting.
    pub require_permission_by_risk: BTreeMap<RiskLevel, bool>,
    /// Only these programs may run in `bash` (base names, case-insensitive; a program given
    /// by a path must be the one its name finds on `PATH`). Empty means the default list
    /// ([`default_command_allowlist`]), never "anything": see `command_allow_any`.
    pub command_allowlist: Vec<String>,
    /// Let `bash` run any program the denylist does not name (the allowlist is ignored).
    pub command_allow_any: bool,
    /// These base command names never run (case-insensitive); checked before the allowlist.
    pub command_denylist: Vec<String>,
    /// Run programs without the OS sandbox where it is unavailable (no Landlock, user
    /// namespaces refused) instead of refusing them; the result then says so.
    pub allow_unconfined_exec: bool,
    /// Run `bash` commands with `/bin/sh -c`, so that pipes, globs, `&&` and redirections
    /// work. Allowed only where the OS sandbox is fully available (Landlock, namespaces,
    /// seccomp): it, not the command policy, confines what the shell runs. The policy still
    /// checks the first program of the command.
    pub exec_shell: bool,
    /// Paths no tool may change, whatever the allowlists say: lsm's own configuration files
    /// and run records (the agents folder). Every write-type access to one of them or to
    /// anything beneath it is refused (file tools by name and again on the opened handle);
    /// reading stays allowed. Not settable from TOML or the environment (a configuration could
    /// lift it): only the composition root sets it, in code.
    #[serde(skip)]
    pub protected_paths: Vec<PathBuf>,
    /// Which executable applies the OS sandbox to executed programs. Set by the composition
    /// root, not read from `lsm.toml`.
    #[serde(skip)]
    pub exec_helper: ExecHelper,
    /// Per-call time limit in seconds.
    pub timeout_seconds: f64,
    /// Output cap in bytes; the rest is replaced by `[TRUNCATED n bytes]`.
    pub max_output_bytes: usize,
    /// Largest file a tool may write, in bytes.
    pub max_write_bytes: usize,
    /// Largest string argument accepted, in bytes.
    pub max_string_arg_bytes: usize,
    /// Default rate limit per tool.
    pub rate_limit: RateLimit,
    /// Per-tool rate limits.
    pub rate_limits: BTreeMap<String, RateLimit>,
    /// Environment variables passed to executed commands; everything else is scrubbed.
    pub env_passthrough: Vec<String>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            allowed_read_paths: Vec::new(),
            allowed_write_paths: Vec::new(),
            working_dir: None,
            allow_url_access: false,
            require_user_permission: BTreeMap::new(),
            require_permission_by_risk: BTreeMap::new(),
            command_allowlist: default_command_allowlist(),
            command_allow_any: false,
            command_denylist: default_command_denylist(),
            allow_unconfined_exec: false,
            exec_shell: false,
            protected_paths: Vec::new(),
            exec_helper: ExecHelper::default(),
            timeout_seconds: 30.0,
            max_output_bytes: 256 * 1024,
            max_write_bytes: 10 * 1024 * 1024,
            max_string_arg_bytes: 10 * 1024 * 1024,
            rate_limit: RateLimit::default(),
            rate_limits: BTreeMap::new(),
            env_passthrough: ["PATH", "HOME", "TMP", "TMPDIR", "LANG"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// Programs `bash` runs by default: they read, compare and copy files and print text, and
/// none of them runs another program or a script (no shells, interpreters, `awk`, `sed`,
/// `find`, `git`, `tar`, `xargs`, `env`).
pub fn default_command_allowlist() -> Vec<String> {
    [
        "ls", "cat", "head", "tail", "wc", "grep", "sort", "uniq", "diff", "echo", "pwd", "date",
        "true", "false", "mkdir", "cp", "mv", "touch", "stat", "file", "cut", "tr", "basename",
        "dirname", "realpath",
    ]
    .map(String::from)
    .to_vec()
}

/// Commands refused unless the configuration replaces the list: privilege changes, disk
/// and system administration, and programs that open a shell or the network themselves.
pub fn default_command_denylist() -> Vec<String> {
    [
        "sudo", "su", "doas", "dd", "mkfs", "mount", "umount", "shutdown", "reboot", "halt",
        "poweroff", "chown", "chmod", "sh", "bash", "zsh", "dash", "fish", "env", "xargs", "eval",
        "exec", "nohup", "curl", "wget", "nc", "ncat", "ssh", "scp", "rsync", "ftp", "telnet",
        "python", "python3", "perl", "ruby", "node", "rbash", "ksh", "csh", "tcsh",
    ]
    .map(String::from)
    .to_vec()
}

impl SandboxConfig {
    /// A policy that reads and writes inside `root` only (relative paths resolve against it).
    pub fn confined_to(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        SandboxConfig {
            allowed_read_paths: vec![root.clone()],
            allowed_write_paths: vec![root.clone()],
            working_dir: Some(root),
            ..SandboxConfig::default()
        }
    }

    /// Whether a call of `tool` (of risk `risk`, asking by default when `tool_default`) asks a
    /// person first: the per-tool setting, else the per-risk setting, else the tool's default.
    pub fn asks_permission(&self, tool: &str, risk: RiskLevel, tool_default: bool) -> bool {
        self.require_user_permission
            .get(tool)
            .or_else(|| self.require_permission_by_risk.get(&risk))
            .copied()
            .unwrap_or(tool_default)
    }

    /// The rate limit that applies to `tool`.
    pub fn rate_limit_for(&self, tool: &str) -> RateLimit {
        self.rate_limits
            .get(tool)
            .copied()
            .unwrap_or(self.rate_limit)
    }
}
