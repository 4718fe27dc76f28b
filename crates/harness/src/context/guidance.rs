//! Just-in-time guidance: the nested `AGENTS.md` files of the folders a tool call touched,
//! between the project root (excluded: its file is the project instructions) and the path.
//!
//! [`candidates`] is pure (lexical paths only; lsm-run's); [`find`] reads the candidates through the
//! sandbox's read confinement ([`Sandbox::inspect_file`]: the read roots, by handle), so a
//! nested file outside the read roots is never read. Neither must decide what the model has
//! already been given: the caller passes what the run's journal says was added, and the pure
//! core refuses a file added before.

use std::collections::BTreeSet;
use std::path::Path;

use lsm_sandbox::{Inspection, Sandbox};

use lsm_run::context::{InstructionFile, NESTED_FILE, sha256_hex, with_note};

pub use lsm_run::context::guidance::{candidates, note};

/// Nested files larger than this are not read (a warning is logged).
pub const MAX_NESTED_READ: u64 = 1024 * 1024;

/// Read the nested instruction files that apply to `paths` and are not in `seen` (paths
/// already given to the run), through `sandbox`, each cut to `max_bytes`. A file that is
/// missing, outside the read roots, not a regular file, too large or not UTF-8 is left out.
/// Blocking: call it off the async runtime's workers.
pub fn find(
    sandbox: &Sandbox,
    root: &Path,
    paths: &[String],
    seen: &BTreeSet<String>,
    max_bytes: usize,
) -> Vec<InstructionFile> {
    let mut out: Vec<InstructionFile> = Vec::new();
    for raw in paths {
        for candidate in candidates(root, sandbox.working_dir(), raw) {
            let key = candidate.display().to_string();
            if seen.contains(&key) || out.iter().any(|f| f.path == candidate) {
                continue;
            }
            if let Some(file) = read_one(sandbox, &candidate, max_bytes) {
                out.push(file);
            }
        }
    }
    out
}

fn read_one(sandbox: &Sandbox, path: &Path, max_bytes: usize) -> Option<InstructionFile> {
    let shown_path = path.display().to_string();
    match sandbox.inspect_file(&shown_path, MAX_NESTED_READ) {
        Inspection::File {
            bytes,
            text: Some(text),
        } => {
            let sha256 = sha256_hex(text.as_bytes());
            let mut cut = max_bytes.min(text.len());
            while !text.is_char_boundary(cut) {
                cut = cut.saturating_sub(1);
            }
            let truncated = cut < text.len();
            let head = text.get(..cut)?.to_string();
            let shown = head.len();
            Some(InstructionFile {
                name: NESTED_FILE.to_string(),
                path: path.to_path_buf(),
                bytes,
                sha256,
                truncated,
                text: with_note(head, truncated, bytes, shown, path),
            })
        }
        Inspection::File { bytes, text: None } => {
            tracing::warn!(
                "nested instructions {shown_path} not given: {bytes} bytes, not UTF-8 text or over {MAX_NESTED_READ} bytes"
            );
            None
        }
        Inspection::Missing => None,
        Inspection::Unusable(reason) => {
            tracing::debug!("nested instructions {shown_path} not read: {reason}");
            None
        }
    }
}
