//! Ingest: walk folders (respecting `.gitignore` and the include/exclude globs), extract and
//! chunk each supported file, embed the chunks, and store them — incrementally.
//!
//! - An unchanged file (same size and modification time, or same content hash) is skipped.
//! - A changed file's chunks are replaced; a file that disappeared (or is now excluded) from a
//!   folder being ingested is removed; a file that can no longer be read loses its chunks.
//! - Files are committed in batches; each batch's deletions and additions become visible
//!   together. An interruption loses at most the batch in progress, and the next ingest
//!   redoes it because its file records were not committed either.
//! - A file that cannot be read, is binary, too large or broken is reported and skipped; it
//!   never stops the batch.
//! - Reading, hashing, extracting and chunking run on a thread of their own, a few files ahead
//!   of embedding and indexing (tantivy indexes on two threads of its own); results are
//!   consumed in walk order, so reports, progress and commits are as if it were sequential.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, UNIX_EPOCH};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use crate::chunk::{ChunkDraft, Chunker};
use crate::config::KbConfig;
use crate::embed::Embedder;
use crate::error::{KbError, Result};
use crate::extract::{ContentType, extension_of, extract};
use crate::store::{FileRecord, Store, sha256_hex};

/// How an ingest behaves beyond the configuration.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// Commit after this many changed files (at least 1).
    pub commit_every: usize,
    /// Set to stop after the current file: what was committed stays, the rest is redone by
    /// the next ingest.
    pub cancel: Arc<AtomicBool>,
    /// When stopping on `cancel`, commit the files already processed (a clean stop) or drop
    /// them (what a crash does).
    pub commit_on_cancel: bool,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            commit_every: 64,
            cancel: Arc::new(AtomicBool::new(false)),
            commit_on_cancel: true,
        }
    }
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum FileOutcome {
    /// New or changed: its chunks were (re)written.
    Indexed {
        /// Chunks stored.
        chunks: usize,
    },
    /// Unchanged since the last ingest.
    Unchanged,
    /// Not ingested; its old chunks (if any) were removed.
    Failed {
        /// Why.
        reason: String,
    },
}

/// Receives progress, e.g. to draw a progress bar.
pub trait IngestProgress: Send + Sync {
    /// The walk found `files` candidate files.
    fn start(&self, files: usize);
    /// One file is done.
    fn file_done(&self, path: &Path, outcome: &FileOutcome);
    /// `n` more chunks wait to be embedded and stored (a file was read and chunked).
    fn chunks_queued(&self, n: usize) {
        let _ = n;
    }
    /// `n` more chunks are embedded (or stored, without an embedder): reported as the work
    /// proceeds — for each group of a batch the embedder finishes (possibly from its
    /// threads), so a progress bar moves during a long batch. By default ignored.
    fn chunks_embedded(&self, n: usize) {
        let _ = n;
    }
    /// The ingest is over.
    fn finish(&self);
}

/// Progress that goes nowhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl IngestProgress for NoProgress {
    fn start(&self, _files: usize) {}
    fn file_done(&self, _path: &Path, _outcome: &FileOutcome) {}
    fn finish(&self) {}
}

/// A file that could not be ingested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedFile {
    /// Its path.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// The summary of one ingest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IngestReport {
    /// Supported files found.
    pub files: usize,
    /// New or changed files whose chunks were written.
    pub indexed: usize,
    /// Chunks written.
    pub chunks: usize,
    /// Unchanged files skipped.
    pub skipped: usize,
    /// Files removed from the index (deleted, renamed or newly excluded).
    pub removed: usize,
    /// Files that could not be ingested, with the reason.
    pub failed: Vec<FailedFile>,
    /// Files of unsupported types ignored.
    pub unsupported: usize,
    /// Bytes of the files read.
    pub bytes: u64,
    /// Whether the ingest was stopped before it finished.
    pub interrupted: bool,
    /// Files in the index afterwards.
    pub total_files: usize,
    /// Chunks in the index afterwards.
    pub total_chunks: usize,
    /// Seconds taken.
    pub seconds: f64,
}

fn glob_set(patterns: &[String], key: &str) -> Result<Option<GlobSet>> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(Glob::new(p).map_err(|e| KbError::Config {
            key: key.into(),
            message: format!("bad glob '{p}': {e}"),
        })?);
    }
    b.build().map(Some).map_err(|e| KbError::Config {
        key: key.into(),
        message: e.to_string(),
    })
}

/// The supported files under `roots` (a root may also be a single file), sorted, and the
/// count of unsupported ones. Hidden files, `.gitignore`d files and the index folder are
/// skipped.
///
/// # Errors
/// [`KbError::Io`] when a root does not exist; [`KbError::Config`] for a bad glob.
pub fn walk(
    roots: &[PathBuf],
    config: &KbConfig,
    index_dir: &Path,
) -> Result<(Vec<PathBuf>, usize)> {
    let include = glob_set(&config.include, "kb.include")?;
    let exclude = glob_set(&config.exclude, "kb.exclude")?;
    let index_dir = index_dir
        .canonicalize()
        .unwrap_or_else(|_| index_dir.to_path_buf());
    let mut files = BTreeSet::new();
    let mut unsupported = 0;
    for root in roots {
        let root = root.canonicalize().map_err(|e| KbError::io(root, e))?;
        let walker = ignore::WalkBuilder::new(&root)
            .require_git(false)
            .follow_links(false)
            .build();
        for entry in walker.flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.path();
            if path.starts_with(&index_dir) {
                continue;
            }
            let rel = path.strip_prefix(&root).unwrap_or(path);
            let matches = |set: &GlobSet| set.is_match(rel) || set.is_match(path);
            if include.as_ref().is_some_and(|s| !matches(s)) {
                continue;
            }
            if exclude.as_ref().is_some_and(matches) {
                continue;
            }
            if ContentType::for_extension(&extension_of(path)).is_none() {
                unsupported += 1;
                continue;
            }
            files.insert(path.to_path_buf());
        }
    }
    Ok((files.into_iter().collect(), unsupported))
}

/// Files read ahead of the indexing.
const READ_AHEAD: usize = 4;
/// Chunks per commit with an embedder (bounds one embedding batch and what a crash redoes).
const EMBED_BATCH_CHUNKS: usize = 2048;
/// Chunks per commit without one (fewer, larger tantivy segments).
const LEXICAL_BATCH_CHUNKS: usize = 16 * 1024;

/// What reading one file gave: its chunks, `None` when unchanged, or why it failed.
type ReadOutcome = std::result::Result<Option<(Pending, u64)>, ReadError>;

/// Why one file was not ingested: the reason its [`FailedFile`] gives. The file is skipped
/// and the ingest goes on; fix the file (or the setting named) and ingest again.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    /// The file could not be read (permissions, removed meanwhile).
    #[error("cannot read it: {0}")]
    Unreadable(std::io::Error),
    /// The file is larger than `kb.max_file_bytes`. Raise the setting to index it.
    #[error("too large ({size} bytes; kb.max_file_bytes is {max})")]
    TooLarge {
        /// The file's size.
        size: u64,
        /// The setting.
        max: u64,
    },
    /// No extractor knows the file's extension.
    #[error("unsupported file type '.{ext}'")]
    Unsupported {
        /// The extension.
        ext: String,
    },
    /// The file's text could not be extracted.
    #[error(transparent)]
    Extract(#[from] crate::extract::ExtractError),
}

/// A file read and chunked, waiting for its batch's commit.
struct Pending {
    record: FileRecord,
    chunks: Vec<ChunkDraft>,
}

/// Ingest `roots` into `store`. See the module documentation for the guarantees.
///
/// # Errors
/// Only when the index itself fails (cannot be written or committed) or a root is missing;
/// a bad file is a [`FailedFile`] in the report.
pub fn ingest(
    store: &Store,
    embedder: Option<&dyn Embedder>,
    roots: &[PathBuf],
    config: &KbConfig,
    options: &IngestOptions,
    progress: &dyn IngestProgress,
) -> Result<IngestReport> {
    let started = Instant::now();
    let chunker = Chunker::new(config.chunk_size, config.chunk_overlap)?;
    let canonical_roots: Vec<PathBuf> = roots
        .iter()
        .map(|r| r.canonicalize().map_err(|e| KbError::io(r, e)))
        .collect::<Result<_>>()?;
    let (files, unsupported) = walk(&canonical_roots, config, store.dir())?;
    let known = store.file_records()?;
    let mut report = IngestReport {
        files: files.len(),
        unsupported,
        ..Default::default()
    };
    progress.start(files.len());
    let mut writer = store.writer()?;

    // Removed files first: anything under a root we walked that the walk no longer found.
    let seen: BTreeSet<String> = files.iter().map(|p| p.display().to_string()).collect();
    let mut removed = 0;
    for path in known.keys() {
        let under_root = canonical_roots
            .iter()
            .any(|r| Path::new(path).starts_with(r));
        if under_root && !seen.contains(path) {
            writer.delete_path(path);
            removed += 1;
        }
    }
    report.removed = removed;

    let mut pending: Vec<Pending> = Vec::new();
    let mut pending_chunks = 0usize;
    let mut dirty = removed > 0;
    let flush = |writer: &mut crate::store::StoreWriter<'_>,
                 pending: &mut Vec<Pending>,
                 pending_chunks: &mut usize,
                 report: &mut IngestReport|
     -> Result<()> {
        let batch = std::mem::take(pending);
        *pending_chunks = 0;
        let vectors = match embedder {
            None => None,
            Some(e) => {
                let inputs: Vec<String> = batch
                    .iter()
                    .flat_map(|p| p.chunks.iter().map(embedding_input))
                    .collect();
                let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
                let done = |n: usize| progress.chunks_embedded(n);
                Some(e.embed_observed(&refs, &done)?)
            }
        };
        let mut offset = 0;
        for p in &batch {
            writer.delete_path(&p.record.path);
            let v = vectors
                .as_ref()
                .map(|all| &all[offset..offset + p.chunks.len()]);
            offset += p.chunks.len();
            writer.add_file(&p.record, &p.chunks, v)?;
            if embedder.is_none() {
                progress.chunks_embedded(p.chunks.len());
            }
            report.indexed += 1;
            report.chunks += p.chunks.len();
        }
        writer.commit()
    };

    // Reading, hashing, extracting and chunking run on a thread of their own, a few files
    // ahead, while this thread embeds and hands chunks to tantivy's indexing thread: the
    // three stages overlap instead of taking turns.
    let batch_chunks = if embedder.is_some() {
        EMBED_BATCH_CHUNKS
    } else {
        LEXICAL_BATCH_CHUNKS
    };
    let mut received = 0usize;
    let (tx, rx) = std::sync::mpsc::sync_channel::<(&PathBuf, ReadOutcome)>(READ_AHEAD);
    let result: Result<()> = std::thread::scope(|scope| {
        let reader = std::thread::Builder::new()
            .name("lsm-kb-read".into())
            .spawn_scoped(scope, {
                let (files, known, chunker, cancel) = (&files, &known, &chunker, &options.cancel);
                move || {
                    for path in files {
                        if cancel.load(Ordering::SeqCst) {
                            break;
                        }
                        let key = path.display().to_string();
                        let outcome = read_file(path, config, known.get(&key), chunker);
                        if tx.send((path, outcome)).is_err() {
                            break; // the ingest stopped
                        }
                    }
                }
            })
            .map_err(|e| KbError::io(store.dir(), e))?;
        for (path, outcome) in rx.iter() {
            received += 1;
            if options.cancel.load(Ordering::SeqCst) {
                report.interrupted = true;
                break;
            }
            let key = path.display().to_string();
            let outcome = match outcome {
                Ok(None) => {
                    report.skipped += 1;
                    FileOutcome::Unchanged
                }
                Ok(Some((p, bytes))) => {
                    report.bytes += bytes;
                    let n = p.chunks.len();
                    progress.chunks_queued(n);
                    pending_chunks += n;
                    pending.push(p);
                    dirty = true;
                    FileOutcome::Indexed { chunks: n }
                }
                Err(reason) => {
                    let reason = reason.to_string();
                    tracing::warn!(path = %key, "not ingested: {reason}");
                    if known.contains_key(&key) {
                        writer.delete_path(&key);
                        dirty = true;
                    }
                    report.failed.push(FailedFile {
                        path: key.clone(),
                        reason: reason.clone(),
                    });
                    FileOutcome::Failed { reason }
                }
            };
            progress.file_done(path, &outcome);
            if pending.len() >= options.commit_every.max(1) || pending_chunks >= batch_chunks {
                flush(&mut writer, &mut pending, &mut pending_chunks, &mut report)?;
                dirty = false;
            }
        }
        // Whatever stopped the loop, the reader stops at its next send.
        drop(rx);
        reader.join().map_err(|_| {
            KbError::io(
                store.dir(),
                std::io::Error::other("the reading thread failed"),
            )
        })?;
        Ok(())
    });
    result?;
    if received < files.len() {
        // The reader saw the cancellation before this thread did.
        report.interrupted = true;
    }
    if report.interrupted && !options.commit_on_cancel {
        // As a crash would: nothing of the batch in progress is committed.
        drop(writer);
    } else if dirty || !pending.is_empty() {
        flush(&mut writer, &mut pending, &mut pending_chunks, &mut report)?;
    }
    progress.finish();
    store.reload()?;
    report.total_files = store.file_records()?.len();
    report.total_chunks = store.chunk_count()?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The text embedded for a chunk: its heading path, then its text.
pub fn embedding_input(chunk: &ChunkDraft) -> String {
    if chunk.heading_path.is_empty() {
        chunk.text.clone()
    } else {
        format!("{}\n{}", chunk.heading_path.join(" > "), chunk.text)
    }
}

/// Read and chunk one file; `Ok(None)` when it is unchanged since `known`.
fn read_file(
    path: &Path,
    config: &KbConfig,
    known: Option<&FileRecord>,
    chunker: &Chunker,
) -> ReadOutcome {
    let meta = std::fs::metadata(path).map_err(ReadError::Unreadable)?;
    let size = meta.len();
    if size > config.max_file_bytes {
        return Err(ReadError::TooLarge {
            size,
            max: config.max_file_bytes,
        });
    }
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64);
    if known.is_some_and(|k| k.size == size && k.mtime == mtime) {
        return Ok(None);
    }
    let bytes = std::fs::read(path).map_err(ReadError::Unreadable)?;
    let file_hash = sha256_hex(&bytes);
    if known.is_some_and(|k| k.file_hash == file_hash) {
        return Ok(None);
    }
    let ext = extension_of(path);
    let content_type = ContentType::for_extension(&ext)
        .ok_or_else(|| ReadError::Unsupported { ext: ext.clone() })?;
    let extracted = extract(content_type, &bytes)?;
    let chunks = chunker.chunk(&extracted);
    Ok(Some((
        Pending {
            record: FileRecord {
                path: path.display().to_string(),
                file_hash,
                mtime,
                size,
                chunks: chunks.len() as u64,
                ext,
                content_type: content_type.as_str().to_string(),
            },
            chunks,
        },
        size,
    )))
}

/// Remove the files at `path` (a file, or every file under a folder) from the index.
/// Returns the paths removed.
///
/// # Errors
/// [`KbError::Index`] when the index cannot be written.
pub fn remove_path(store: &Store, path: &Path) -> Result<Vec<String>> {
    let target = path
        .canonicalize()
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string();
    let known: BTreeMap<String, FileRecord> = store.file_records()?;
    let gone: Vec<String> = known
        .keys()
        .filter(|p| *p == &target || Path::new(p).starts_with(&target))
        .cloned()
        .collect();
    if gone.is_empty() {
        return Ok(gone);
    }
    let mut writer = store.writer()?;
    for p in &gone {
        writer.delete_path(p);
    }
    writer.commit()?;
    Ok(gone)
}
