//! Running cargo and building `lsm`, for the tasks that need a built binary (demo, evals,
//! benchmarks, CI).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The cargo that runs us (`$CARGO`, set by `cargo run`), or `cargo` from `PATH`.
pub fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"))
}

/// Runs `cargo <args>` from `root`, streaming its output; fails naming `step` if it fails.
pub fn run_cargo(root: &Path, step: &str, args: &[&str]) -> Result<()> {
    let shown = format!("cargo {}", args.join(" "));
    eprintln!("xtask: [{step}] {shown}");
    let status = Command::new(cargo())
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("step `{step}`: could not start `{shown}`"))?;
    if !status.success() {
        bail!("step `{step}` failed: `{shown}` exited with {status}");
    }
    Ok(())
}

/// Build `lsm` with the local provider (what the demo and `eval-local` run); its path.
pub fn build_lsm(root: &Path) -> Result<PathBuf> {
    build(root, &["--features", "local"])
}

/// Build `lsm` (the `lsm-cli` binary) with `features`; its path.
pub fn build(root: &Path, features: &[&str]) -> Result<PathBuf> {
    let mut args = vec!["build", "-p", "lsm-cli", "--bin", "lsm"];
    args.extend_from_slice(features);
    run_cargo(root, "build", &args)?;
    let lsm = target_dir(root).join("debug").join("lsm");
    if !lsm.is_file() {
        bail!("built lsm not found at {}", lsm.display());
    }
    Ok(lsm)
}

/// `s` as a TOML basic string.
pub fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The target folder: `$CARGO_TARGET_DIR` (relative to `root`), else `root/target`.
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_relative() { root.join(p) } else { p })
        .unwrap_or_else(|| root.join("target"))
}
