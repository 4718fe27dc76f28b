//! Context providers: the standing texts a run is given besides its system prompt — the
//! project's instructions (`AGENTS.md`, then `LSM.md`, at the project root), a short
//! environment block, and the nested `AGENTS.md` files added just in time as tools touch their
//! folders ([`guidance`]). Their settings are `[agents.context]` ([`ContextConfig`]).
//!
//! What this module must never do: read a file for a resumed run (the texts a run started
//! with are in its journal, and the fold gives them back), read a nested file except through
//! the sandbox's read confinement, or hand the model more of a file than the cap allows
//! without saying that it was cut and where the whole file is.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub mod environment;
pub mod guidance;

pub use environment::{EnvironmentFacts, environment_block};

/// The project instruction files, in the order they are given.
pub const INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "LSM.md"];

/// The nested instruction file looked for in the project's subfolders.
pub const NESTED_FILE: &str = "AGENTS.md";

/// Default of [`ContextConfig::max_instruction_bytes`]: 32 KiB.
pub const DEFAULT_MAX_INSTRUCTION_BYTES: usize = 32 * 1024;

/// `[agents.context]`: which context providers a run has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ContextConfig {
    /// Give every run the project's `AGENTS.md` and `LSM.md` (at the project root) as
    /// standing instructions.
    pub project_instructions: bool,
    /// Give every run a short block on its environment: the date, the operating system, the
    /// working folder, the tools and their limits.
    pub environment: bool,
    /// Add a subfolder's own `AGENTS.md` after the first tool result that touches a path
    /// under it (once per run per file).
    pub nested_instructions: bool,
    /// Most bytes of instruction text given: of the project instructions together, and of
    /// each nested file. A longer text is cut, with a note saying where the whole file is.
    pub max_instruction_bytes: usize,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            project_instructions: true,
            environment: true,
            nested_instructions: true,
            max_instruction_bytes: DEFAULT_MAX_INSTRUCTION_BYTES,
        }
    }
}

impl ContextConfig {
    /// Check the values.
    ///
    /// # Errors
    /// A message naming the key, when `max_instruction_bytes` is 0.
    pub fn validate(&self) -> Result<(), crate::SettingError> {
        if self.max_instruction_bytes == 0 {
            return Err(crate::SettingError::InstructionBytes);
        }
        Ok(())
    }
}

/// One instruction file as given to a run: which file, its size and hash, and the text the
/// model gets (cut to the cap, with a note when it was cut).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InstructionFile {
    /// The file's name (`AGENTS.md`, `LSM.md`).
    pub name: String,
    /// Where the file is.
    pub path: PathBuf,
    /// The whole file's size in bytes.
    pub bytes: u64,
    /// The SHA-256 of the whole file, lower-case hex.
    pub sha256: String,
    /// Whether the text was cut to the cap.
    #[serde(default)]
    pub truncated: bool,
    /// The text given to the model.
    pub text: String,
}

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

/// `text`, followed by a note saying it was cut and where the whole file is when `truncated`.
pub(crate) fn with_note(
    mut text: String,
    truncated: bool,
    bytes: u64,
    shown: usize,
    path: &Path,
) -> String {
    if truncated {
        text.push_str(&format!(
            "\n\n[cut: this file is {bytes} bytes; only its first {shown} are given here. The \
             full file is {}.]",
            path.display()
        ));
    }
    text
}

/// Lower-case hex of `digest`.
pub(crate) fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 of `bytes`, lower-case hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The standing texts a new run starts with (recorded at its start; a resumed run has the
/// recorded ones).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunContext {
    /// The project instructions.
    pub instructions: Vec<InstructionFile>,
    /// The environment block.
    pub environment: Option<String>,
}

/// The system message a run's context providers give: the project instructions, then the
/// environment block; `None` when there is neither.
pub fn standing_text(
    instructions: &[InstructionFile],
    environment: Option<&str>,
) -> Option<String> {
    if instructions.is_empty() && environment.is_none() {
        return None;
    }
    let mut s = String::new();
    if !instructions.is_empty() {
        s.push_str(
            "Project instructions, from the project's own files. Follow them throughout this \
             run unless the task says otherwise.",
        );
        for f in instructions {
            s.push_str(&format!(
                "\n\n--- {} ({}) ---\n{}",
                f.name,
                f.path.display(),
                f.text.trim_end()
            ));
        }
    }
    if let Some(env) = environment {
        if !s.is_empty() {
            s.push_str("\n\n");
        }
        s.push_str(env.trim_end());
    }
    Some(s)
}

#[cfg(test)]
mod tests;
