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
        self.embedder
            .as_ref()
            .map_or_else(|| "none".to_string(), |e| describe(&e.model, e.dims))
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

/// Write `bytes` to `path` atomically and durably: into a temporary file of its own beside
/// `path` (so concurrent writers never share one), flushed to disk, renamed over `path`, and
/// the folder flushed so the rename survives a power loss too. A reader sees the old file or
/// the new one, never a mix; a crash before the rename leaves the old file as it was.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let staged = stage(path, bytes)?;
    staged
        .persist(path)
        .map_err(|e| KbError::io(path, e.error))?;
    sync_folder(folder_of(path))
}

fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The first half of [`write_atomically`]: `bytes` in a new temporary file beside `path`,
/// already on disk.
fn stage(path: &Path, bytes: &[u8]) -> Result<tempfile::NamedTempFile> {
    use std::io::Write;
    let folder = folder_of(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(".kb-write-")
        .suffix(".tmp")
        .tempfile_in(folder)
        .map_err(|e| KbError::io(folder, e))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| KbError::io(tmp.path(), e))?;
    Ok(tmp)
}

/// Flush a folder's entries (a rename in it) to disk. Folders cannot be opened for that on
/// Windows, where the rename is already durable once it returns.
fn sync_folder(folder: &Path) -> Result<()> {
    if cfg!(unix) {
        std::fs::File::open(folder)
            .and_then(|f| f.sync_all())
            .map_err(|e| KbError::io(folder, e))?;
    }
    Ok(())
}

/// `model (dims)`, as shown in messages and `lsm kb stats`.
pub fn describe(model: &str, dims: usize) -> String {
    format!("{model} ({dims} dims)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_between_the_temporary_write_and_the_rename_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MANIFEST_FILE);
        write_atomically(&path, b"old").unwrap();
        // The process dies after staging: the temporary file stays, nothing is renamed.
        let staged = stage(&path, b"new, never renamed").unwrap();
        staged.into_temp_path().keep().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        // The next write is not disturbed by the leftover.
        write_atomically(&path, b"newer").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"newer");
    }

    #[test]
    fn concurrent_writers_never_tear_or_lose_the_file() {
        // With one fixed temporary name, one writer renamed the other's half-written file
        // away and the other's rename failed.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(MANIFEST_FILE);
        let contents: Vec<Vec<u8>> = (0..4u8).map(|i| vec![b'a' + i; 64 * 1024]).collect();
        std::thread::scope(|s| {
            for c in &contents {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..25 {
                        write_atomically(path, c).unwrap();
                    }
                });
            }
        });
        let last = std::fs::read(&path).unwrap();
        assert!(
            contents.contains(&last),
            "a torn file of {} bytes",
            last.len()
        );
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }
}
