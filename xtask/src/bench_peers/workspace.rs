//! The files of a bench-peers run: what the agents read, the bodies `lsm` sent (kept for the
//! floor rows), and the check of the summaries the `lsm` runs left.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::{mock, peers};

/// Fail unless `agents` runs wrote their summaries under `work` since `started`, and none of
/// them had a tool call denied (a denied call does less work than the peers' calls do).
pub(super) fn check_no_denials(
    work: &Path,
    started: std::time::SystemTime,
    agents: usize,
) -> Result<()> {
    let mut summaries = Vec::new();
    find_summaries(&work.join(".lsm"), started, &mut summaries)?;
    if summaries.len() != agents {
        bail!(
            "lsm wrote {} run summaries under {} for {agents} agent(s)",
            summaries.len(),
            work.join(".lsm").display()
        );
    }
    for path in summaries {
        let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        let denials = &summary["approvals_denials"]["denials"];
        if denials.as_u64() != Some(0) {
            bail!(
                "lsm had {denials} tool call(s) denied ({}): the runs would not be comparable",
                path.display()
            );
        }
    }
    Ok(())
}

/// Every `run_summary.json` under `dir` modified since `since`.
pub(super) fn find_summaries(
    dir: &Path,
    since: std::time::SystemTime,
    out: &mut Vec<std::path::PathBuf>,
) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        let meta = entry.metadata()?;
        if meta.is_dir() {
            find_summaries(&path, since, out)?;
        } else if entry.file_name() == "run_summary.json" && meta.modified()? >= since {
            out.push(path);
        }
    }
    Ok(())
}

/// Where the bodies `lsm` sent at `n` calls are kept for the floor.
pub(super) fn bodies_file(work: &Path, n: u64) -> std::path::PathBuf {
    work.join("out").join(format!("lsm-bodies-{n}.bin"))
}

/// Write `bodies` as `bare_exchange` reads them: each a little-endian `u32` length, then its
/// bytes.
pub(super) fn write_bodies(path: &Path, bodies: &[Vec<u8>]) -> Result<()> {
    let mut out = Vec::with_capacity(bodies.iter().map(|b| b.len() + 4).sum());
    for body in bodies {
        let len = u32::try_from(body.len()).context("a request body over 4 GiB")?;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(body);
    }
    std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))
}

/// The files the agents read and the peers' scripts, written under `work`.
pub(super) fn prepare_workspace(work: &Path, file_bytes: Option<usize>) -> Result<peers::Scripts> {
    write_files(work, file_bytes)?;
    std::fs::create_dir_all(work.join("xdg"))?;
    std::fs::create_dir_all(work.join("out"))?;
    peers::write_scripts(work)
}

/// The files the mock's tool calls name, under `work/files/`: [`file_text`] of each.
pub(super) fn write_files(work: &Path, bytes: Option<usize>) -> Result<()> {
    let files = work.join("files");
    std::fs::create_dir_all(&files)?;
    for i in 0..mock::FILES {
        std::fs::write(files.join(format!("f{i}.txt")), file_text(i, bytes))?;
    }
    Ok(())
}

/// A file of no bytes cannot hold the line break that ends every file.
pub(super) fn check_file_bytes(bytes: Option<usize>) -> Result<()> {
    if bytes == Some(0) {
        bail!("--file-bytes 0: a file the agents read needs at least 1 byte; give 1 or more");
    }
    Ok(())
}

/// File `i`'s text: without `bytes`, the small file every table in docs/PERFORMANCE.md was
/// measured with (a heading and one line of notes); with it, the heading and lines of prose
/// of 82 bytes, cut to exactly `bytes` bytes (ASCII, ending in a line break).
pub(super) fn file_text(i: usize, bytes: Option<usize>) -> String {
    let Some(bytes) = bytes else {
        return format!(
            "File {i}.\n{}\n",
            "Some notes of a small project. ".repeat(8)
        );
    };
    const LINE: &str =
        "Some notes of a small project, written as plain prose with the usual punctuation.\n";
    let mut text = format!("File {i}.\n");
    while text.len() < bytes {
        text.push_str(LINE);
    }
    text.truncate(bytes.saturating_sub(1));
    text.push('\n');
    text
}
