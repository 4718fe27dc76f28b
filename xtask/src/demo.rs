//! `cargo xtask demo`: build `lsm` and run the bundled example in a temporary workspace.
//!
//! Today the example is a scripted model driving the general agent over a file task
//! (`examples/file-task/`), so it runs offline with no API key; the transcript and run
//! summary it leaves behind are real.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

const EXAMPLE: &str = "examples/file-task";
const TASK: &str = "Summarize notes.md into summary.md";

/// Build, copy the example to a temp folder, run it, show what it wrote.
pub fn demo(root: &Path) -> Result<()> {
    crate::tasks::run_cargo(root, "build", &["build", "-p", "lsm-cli", "--bin", "lsm"])?;
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_relative() { root.join(p) } else { p })
        .unwrap_or_else(|| root.join("target"));
    let lsm = target.join("debug").join("lsm");
    if !lsm.is_file() {
        bail!("built lsm not found at {}", lsm.display());
    }

    let work = tempfile::Builder::new()
        .prefix("lsm-demo-")
        .tempdir()
        .context("cannot create a temporary folder")?
        .keep();
    copy_dir(&root.join(EXAMPLE), &work)?;
    let config = work.join("lsm.toml");
    eprintln!("xtask: [demo] workspace {}", work.display());
    eprintln!(
        "xtask: [demo] lsm agent run general --config {} --task \"{TASK}\"",
        config.display()
    );
    let status = Command::new(&lsm)
        .args(["agent", "run", "general", "--config"])
        .arg(&config)
        .args(["--task", TASK])
        .current_dir(&work)
        .status()
        .with_context(|| format!("cannot start {}", lsm.display()))?;
    let written = work.join("workspace").join("summary.md");
    if let Ok(text) = std::fs::read_to_string(&written) {
        eprintln!(
            "\nxtask: [demo] the agent wrote {}:\n{text}",
            written.display()
        );
    }
    if !status.success() {
        bail!("the demo run exited with {status}");
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), &dest)
                .with_context(|| format!("cannot copy {}", entry.path().display()))?;
        }
    }
    Ok(())
}
