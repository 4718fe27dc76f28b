//! Support for the black-box tests in `tests/e2e.rs`: find (building if needed) the `lsm`
//! binary and run it like a user would. The tests talk to `lsm` only through its command
//! line, exit codes, stdout/stderr and the files it leaves on disk.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Path of the `lsm` binary: `$LSM_BIN` if set, else built once with
/// `cargo build -p lsm-cli --bin lsm` and located from cargo's JSON messages.
///
/// # Panics
/// When the binary cannot be built or found (the test cannot run without it).
#[allow(clippy::panic, clippy::expect_used)]
pub fn lsm_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("LSM_BIN") {
            return PathBuf::from(p);
        }
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args([
                "build",
                "-p",
                "lsm-cli",
                "--bin",
                "lsm",
                // The crash tests abort runs at chosen journal lines: a test build only.
                "--features",
                "crash-points",
                "--message-format=json-render-diagnostics",
            ])
            .current_dir(workspace_root())
            .output()
            .expect("cannot run cargo build for the lsm binary");
        assert!(
            out.status.success(),
            "cargo build -p lsm-cli failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "lsm")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .unwrap_or_else(|| panic!("cargo build did not report the lsm executable"))
    })
}

/// A command for `lsm` with a clean `LSM_*` environment and no user configuration file (a
/// test that wants one sets `XDG_CONFIG_HOME` again), run in `cwd`.
pub fn lsm(cwd: &Path) -> Command {
    let mut cmd = Command::new(lsm_bin());
    cmd.current_dir(cwd);
    cmd.env("XDG_CONFIG_HOME", cwd.join(".no-user-config"));
    for (k, _) in std::env::vars() {
        if k.starts_with("LSM_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// `lsm agent run general --task TASK --provider PROVIDER` in `cwd` (as [`lsm`]), for more
/// arguments.
pub fn general_run(cwd: &Path, task: &str, provider: &str) -> Command {
    let mut cmd = lsm(cwd);
    cmd.args([
        "agent",
        "run",
        "general",
        "--task",
        task,
        "--provider",
        provider,
    ]);
    cmd
}

/// `lsm args…` on a pseudo-terminal of its own, through `script` (util-linux), with the same
/// clean environment as [`lsm`]: what the terminal shows is `script`'s stdout, what a person
/// types goes to its stdin.
pub fn lsm_on_a_terminal(cwd: &Path, args: &[String]) -> Command {
    let quoted: Vec<String> = std::iter::once(lsm_bin().display().to_string())
        .chain(args.iter().cloned())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let mut on_terminal = Command::new("script");
    on_terminal
        .args(["-qfec", &quoted.join(" "), "/dev/null"])
        .current_dir(cwd);
    for (k, v) in lsm(cwd).get_envs() {
        match v {
            Some(v) => on_terminal.env(k, v),
            None => on_terminal.env_remove(k),
        };
    }
    on_terminal
}

/// Run and capture.
///
/// # Panics
/// When the binary cannot be started.
#[allow(clippy::expect_used)]
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("cannot start lsm")
}
