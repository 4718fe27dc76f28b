//! Context providers: the standing texts a run is given besides its system prompt — the
//! project's instructions (`AGENTS.md`, then `LSM.md`, at the project root), a short
//! environment block, and the nested `AGENTS.md` files added just in time as tools touch their
//! folders ([`guidance`]). Their settings are `[agents.context]` ([`ContextConfig`]). The
//! data and the texts are lsm-run's ([`lsm_run::context`]); this module reads the files.
//!
//! What this module must never do: read a file for a resumed run (the texts a run started
//! with are in its journal, and the fold gives them back), read a nested file except through
//! the sandbox's read confinement, or hand the model more of a file than the cap allows
//! without saying that it was cut and where the whole file is.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub mod guidance;

pub use lsm_run::context::{
    ContextConfig, DEFAULT_MAX_INSTRUCTION_BYTES, EnvironmentFacts, INSTRUCTION_FILES,
    InstructionFile, NESTED_FILE, RunContext, environment, environment_block, hex, sha256_hex,
    standing_text, with_note,
};

/// Why an instruction file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextError {
    /// The file exists and cannot be read.
    #[error(
        "cannot read the project instructions {path}: {reason}; fix the file or switch them off with [agents.context] project_instructions = false"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        reason: String,
    },
    /// The file is not UTF-8 text.
    #[error(
        "the project instructions {path} are not UTF-8 text; fix the file or switch them off with [agents.context] project_instructions = false"
    )]
    NotText {
        /// The file.
        path: PathBuf,
    },
}

/// The project instructions of `root`: `AGENTS.md`, then `LSM.md`, those that exist, their
/// texts together cut to at most `max_bytes` bytes (at a character boundary; a cut text ends
/// with a note saying so and where the full file is). A file is read once, its hash over the
/// whole of it; only the first `max_bytes` bytes are kept in memory.
///
/// # Errors
/// [`ContextError`] when a file exists and cannot be read, or is not UTF-8 text.
pub fn project_instructions(
    root: &Path,
    max_bytes: usize,
) -> Result<Vec<InstructionFile>, ContextError> {
    let mut left = max_bytes;
    let mut files = Vec::new();
    for name in INSTRUCTION_FILES {
        let path = root.join(name);
        let Some(file) = read_capped(&path, left)? else {
            continue;
        };
        left = left.saturating_sub(file.shown);
        files.push(InstructionFile {
            name: name.to_string(),
            text: with_note(file.text, file.truncated, file.bytes, file.shown, &path),
            path,
            bytes: file.bytes,
            sha256: file.sha256,
            truncated: file.truncated,
        });
    }
    Ok(files)
}

/// A file's head as read by [`read_capped`].
pub(crate) struct Capped {
    /// The kept text (at most the cap, whole characters).
    pub text: String,
    /// Its length in bytes.
    pub shown: usize,
    /// The whole file's size.
    pub bytes: u64,
    /// The whole file's SHA-256, hex.
    pub sha256: String,
    /// Whether the text is shorter than the file.
    pub truncated: bool,
}

/// Read `path` (`None` when there is no file), hashing all of it and keeping its first `cap`
/// bytes, cut back to a character boundary.
fn read_capped(path: &Path, cap: usize) -> Result<Option<Capped>, ContextError> {
    let read_error = |e: std::io::Error| ContextError::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_error(e)),
    };
    let meta = file.metadata().map_err(read_error)?;
    if !meta.is_file() {
        return Err(ContextError::Read {
            path: path.to_path_buf(),
            reason: "not a regular file".into(),
        });
    }
    let mut hasher = Sha256::new();
    let mut head = Vec::new();
    let mut total: u64 = 0;
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(read_error)?;
        if n == 0 {
            break;
        }
        let chunk = buf.get(..n).unwrap_or_default();
        hasher.update(chunk);
        let room = cap.saturating_sub(head.len()).min(n);
        head.extend_from_slice(chunk.get(..room).unwrap_or_default());
        total = total.saturating_add(n as u64);
    }
    let text = head_text(head).ok_or_else(|| ContextError::NotText {
        path: path.to_path_buf(),
    })?;
    let shown = text.len();
    Ok(Some(Capped {
        truncated: (shown as u64) < total,
        text,
        shown,
        bytes: total,
        sha256: hex(&hasher.finalize()),
    }))
}

/// The head of a file as text: whole characters only (a character the cap split is left
/// out); `None` when the head is not UTF-8.
pub(crate) fn head_text(head: Vec<u8>) -> Option<String> {
    match String::from_utf8(head) {
        Ok(text) => Some(text),
        Err(e) => {
            let utf8 = e.utf8_error();
            if utf8.error_len().is_some() {
                return None;
            }
            let valid = utf8.valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).ok()
        }
    }
}

#[cfg(test)]
mod tests;
