//! What the index stores per file and per chunk, and the ids and hashes that name them.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Separator of heading-path elements in stored text.
pub const HEADING_SEP: &str = " > ";

/// What the index knows about one ingested file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// Absolute path.
    pub path: String,
    /// SHA-256 of the file's bytes (hex).
    pub file_hash: String,
    /// Modification time (seconds since the Unix epoch).
    pub mtime: i64,
    /// Size in bytes.
    pub size: u64,
    /// Number of chunks stored for it.
    pub chunks: u64,
    /// Extension (lower case, no dot).
    pub ext: String,
    /// Content type name.
    pub content_type: String,
}

/// One stored chunk with its metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkRecord {
    /// Stable id (hex), unique per path, position and content.
    pub chunk_id: String,
    /// Absolute path of its file.
    pub path: String,
    /// Extension (lower case, no dot).
    pub ext: String,
    /// Content type name.
    pub content_type: String,
    /// Headings in force at its start, outermost first.
    pub heading_path: Vec<String>,
    /// 0-based position in the file.
    pub chunk_index: u64,
    /// The chunk's text.
    pub text: String,
    /// SHA-256 of the chunk's text (hex).
    pub content_hash: String,
    /// The file's modification time (seconds since the Unix epoch).
    pub mtime: i64,
}

impl ChunkRecord {
    /// `heading > sub` (empty when the chunk is under no heading).
    pub fn heading(&self) -> String {
        self.heading_path.join(HEADING_SEP)
    }
}

/// The id of a chunk: path, position and content.
pub fn chunk_id(path: &str, index: usize, content_hash: &str) -> String {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0]);
    h.update(index.to_le_bytes());
    h.update([0]);
    h.update(content_hash.as_bytes());
    hex(&h.finalize()[..8])
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// SHA-256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
