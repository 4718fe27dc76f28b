//! Context providers' data: the standing texts a run is given besides its system prompt — the
//! project's instructions (`AGENTS.md`, then `LSM.md`, at the project root), a short
//! environment block, and the nested `AGENTS.md` files added just in time as tools touch their
//! folders ([`guidance`]). Their settings are `[agents.context]` ([`ContextConfig`]).
//!
//! Pure: the driver (lsm-harness's `context`) reads the files — never for a resumed run (the
//! texts a run started with are in its journal, and the fold gives them back) and a nested
//! file only through the sandbox's read confinement. What is here must never hand the model
//! more of a file than the cap allows without saying that it was cut and where the whole
//! file is ([`with_note`]).

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
    pub fn validate(&self) -> Result<(), crate::error::SettingError> {
        if self.max_instruction_bytes == 0 {
            return Err(crate::error::SettingError::InstructionBytes);
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

/// `text`, followed by a note saying it was cut and where the whole file is when `truncated`.
pub fn with_note(
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
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
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
