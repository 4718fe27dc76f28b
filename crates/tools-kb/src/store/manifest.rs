//! `kb.json`: the on-disk format version and the embedder the vectors were made with.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{KbError, Result};

/// Version of the on-disk layout.
pub const FORMAT: u32 = 1;
/// The manifest's file name inside the index folder.
pub const MANIFEST_FILE: &str = "kb.json";

/// The embedder an index was built with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedderInfo {
    /// Model name.
    pub model: String,
    /// Vector dimensions.
    pub dims: usize,
}

/// `kb.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Layout version ([`FORMAT`]).
    pub format: u32,
    /// The embedder of the stored vectors, or `None` for a lexical-only index.
    pub embedder: Option<EmbedderInfo>,
}

impl Manifest {
    /// `model (dims)` or `none`.
    pub fn embedder_label(&self) -> String {
        self.embedder.as_ref().map_or_else(
            || "none".to_string(),
            |e| crate::embed::describe(&e.model, e.dims),
        )
    }
}

/// Read `kb.json` of `dir`, or `None` when there is no index.
///
/// # Errors
/// [`KbError::Index`] when it exists but cannot be read.
pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>> {
    let path = dir.join(MANIFEST_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| KbError::io(&path, e))?;
    let m: Manifest = serde_json::from_str(&text)
        .map_err(|e| KbError::index(dir, format!("{MANIFEST_FILE} is not valid: {e}")))?;
    if m.format != FORMAT {
        return Err(KbError::index(
            dir,
            format!(
                "index format {} is not supported (this build reads {FORMAT}); rebuild it with `lsm ingest --rebuild`",
                m.format
            ),
        ));
    }
    Ok(Some(m))
}

/// Write `bytes` to `path` through a temporary file and a rename.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(|e| KbError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| KbError::io(path, e))
}
