//! What the helper applies: the paths, network switch and limits of one program's sandbox.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::SandboxConfig;

/// Readable and executable for every program: what a dynamically linked program needs to
/// load and run. `/bin`, `/lib`… are usually links into `/usr`; missing ones are skipped.
pub(crate) const SYSTEM_EXEC_PATHS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib64"];

/// Readable for every program: the dynamic loader's cache and configuration, the time zone,
/// randomness, and the program's own `/proc` entry.
pub(crate) const SYSTEM_READ_PATHS: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/dev/urandom",
    "/dev/random",
    "/dev/zero",
    "/proc/self",
];

/// Readable and writable for every program (output thrown away).
pub(crate) const SYSTEM_WRITE_PATHS: &[&str] = &["/dev/null"];

/// Readable when network access is on: name resolution and TLS certificates.
pub(crate) const NETWORK_READ_PATHS: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/host.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
];

/// Address space a program may map: enough for an interpreter's working set, far from what
/// would exhaust the machine.
pub const DEFAULT_ADDRESS_SPACE_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// Processes (and threads) the program may have, counted inside its own user namespace.
pub const DEFAULT_PROCESSES: u64 = 256;

/// Resource limits set in the child before `exec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU seconds (soft limit; the hard limit is one second more).
    pub cpu_seconds: u64,
    /// Address space in bytes.
    pub address_space_bytes: u64,
    /// Processes of the program's user; applied only inside a new user namespace, where
    /// the count starts at zero (outside it, the user's other processes would count too).
    pub processes: u64,
    /// Largest file the program may write, in bytes.
    pub file_size_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits::for_call(Duration::from_secs(30), 10 * 1024 * 1024)
    }
}

impl Limits {
    /// The limits of one call: its timeout as CPU seconds (rounded up), its write limit as
    /// the largest file.
    pub fn for_call(timeout: Duration, max_write_bytes: usize) -> Self {
        Limits {
            cpu_seconds: timeout.as_secs_f64().ceil().max(1.0) as u64,
            address_space_bytes: DEFAULT_ADDRESS_SPACE_BYTES,
            processes: DEFAULT_PROCESSES,
            file_size_bytes: max_write_bytes as u64,
        }
    }
}

/// The helper's instructions (sent as JSON in its argument list).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Plan {
    /// Readable (and executable: what runs there is confined too).
    pub read: Vec<PathBuf>,
    /// Readable, writable and executable.
    pub write: Vec<PathBuf>,
    /// Readable and executable (system folders, the program's prefix).
    pub exec: Vec<PathBuf>,
    /// Read-only system files.
    pub system_read: Vec<PathBuf>,
    /// Writable system files.
    pub system_write: Vec<PathBuf>,
    /// Existing protected paths inside (or around) a write root: bind-mounted read-only.
    pub protected: Vec<PathBuf>,
    pub allow_network: bool,
    /// The program (absolute); `None` for a probe, which applies everything and reports.
    pub program: Option<PathBuf>,
    pub arg0: String,
    pub args: Vec<String>,
    pub limits: Limits,
    /// Run the program as the first process of a PID namespace of its own, so that every
    /// process it starts (a `setsid` daemon, a double fork) ends when it does, or when the
    /// helper is killed. Set when the probe found that namespaces can be entered.
    #[serde(default)]
    pub contain: bool,
    /// Set by the helper for its second stage only: the pipe (read end, write end) whose
    /// write end the first stage holds while it lives.
    #[serde(default)]
    pub pid1: Option<[i32; 2]>,
}

impl Plan {
    /// The parts of the plan that come from the policy (program and limits come per call).
    pub(crate) fn from_config(config: &SandboxConfig) -> Self {
        let read = canonical(&config.allowed_read_paths);
        let write = canonical(&config.allowed_write_paths);
        let protected = canonical(&config.protected_paths)
            .into_iter()
            .filter(|p| write.iter().any(|w| p.starts_with(w) || w.starts_with(p)))
            .collect();
        let mut system_read = existing(SYSTEM_READ_PATHS);
        if config.allow_url_access {
            system_read.extend(existing(NETWORK_READ_PATHS));
        }
        Plan {
            read,
            write,
            exec: existing(SYSTEM_EXEC_PATHS),
            system_read,
            system_write: existing(SYSTEM_WRITE_PATHS),
            protected,
            allow_network: config.allow_url_access,
            ..Plan::default()
        }
    }

    /// Whether the helper must enter a user namespace: to make protected paths read-only,
    /// and as root, whose capabilities only a user namespace takes away.
    pub(crate) fn needs_namespaces(&self) -> bool {
        !self.protected.is_empty() || nix::unistd::geteuid().is_root()
    }

    /// Run `program` (resolved), with read and execute access to its installation prefix so
    /// that interpreters installed outside `/usr` (pyenv, nvm, a venv) find their libraries.
    pub(crate) fn set_program(&mut self, program: &Path) {
        self.program = Some(program.to_path_buf());
        if let Some(prefix) = installation_prefix(program) {
            if !self.exec.iter().any(|e| prefix.starts_with(e)) {
                self.exec.push(prefix);
            }
        }
    }
}

/// The folder a program is installed under: for `<prefix>/bin/<name>` (or `sbin`, `shims`,
/// `libexec`) the prefix, else the program's own folder. Never `/` or the home folder (or
/// one of its ancestors): a program in `~/bin` gets its folder only.
pub(crate) fn installation_prefix(program: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(program).ok()?;
    let dir = real.parent()?;
    let is_bin = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| matches!(n, "bin" | "sbin" | "shims" | "libexec"));
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let too_wide =
        |p: &Path| p.parent().is_none() || home.as_deref().is_some_and(|h| h.starts_with(p));
    let prefix = match dir.parent() {
        Some(parent) if is_bin && !too_wide(parent) => parent,
        _ => dir,
    };
    (!too_wide(prefix)).then(|| prefix.to_path_buf())
}

/// The canonical forms of `paths` that exist (a missing root grants nothing).
fn canonical(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}

fn existing(paths: &[&str]) -> Vec<PathBuf> {
    paths
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_of_a_bin_folder_is_its_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("py/3.11/bin")).unwrap();
        std::fs::write(root.join("py/3.11/bin/python3"), "").unwrap();
        std::fs::write(root.join("py/tool"), "").unwrap();
        assert_eq!(
            installation_prefix(&root.join("py/3.11/bin/python3")),
            Some(root.join("py/3.11"))
        );
        assert_eq!(
            installation_prefix(&root.join("py/tool")),
            Some(root.join("py"))
        );
        assert_eq!(installation_prefix(&root.join("missing")), None);
    }

    #[test]
    fn cpu_limit_rounds_the_timeout_up() {
        let limits = Limits::for_call(Duration::from_millis(1500), 7);
        assert_eq!(limits.cpu_seconds, 2);
        assert_eq!(limits.file_size_bytes, 7);
    }
}
