//! The embedded index: one tantivy index holds every chunk (text for BM25, metadata for the
//! filters, the dense vector) and one record per ingested file. Chunks and file records are
//! added and deleted in the same commit, so the index is consistent after any interruption:
//! what was committed is complete, what was not is absent and is redone by the next ingest.
//!
//! A `kb.json` manifest beside the tantivy files records the format and the embedder (model
//! and dimensions) the vectors were made with.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tantivy::collector::{Count, DocSetCollector, TopDocs};
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, Occur, Query, RegexQuery, TermQuery,
};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing,
    TextOptions, Value,
};
use tantivy::tokenizer::{
    LowerCaser, RemoveLongFilter, SimpleTokenizer, StopWordFilter, TextAnalyzer,
};
use tantivy::{
    DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term,
};

use crate::chunk::ChunkDraft;
use crate::error::{KbError, Result};

/// Version of the on-disk layout.
pub const FORMAT: u32 = 1;
/// The manifest's file name inside the index folder.
pub const MANIFEST_FILE: &str = "kb.json";
/// The tantivy index's sub-folder.
const TANTIVY_DIR: &str = "tantivy";
/// Name of the text analyzer (lower case, English stop words, English stemming).
const ANALYZER: &str = "kb_en";
/// Separator of heading-path elements in stored text.
pub const HEADING_SEP: &str = " > ";

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

/// The schema's fields.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fields {
    kind: Field,
    chunk_id: Field,
    path: Field,
    path_lc: Field,
    ext: Field,
    content_type: Field,
    heading: Field,
    body: Field,
    text: Field,
    chunk_index: Field,
    content_hash: Field,
    file_hash: Field,
    mtime: Field,
    size: Field,
    chunks: Field,
    vector: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let body_opts = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        kind: b.add_text_field("kind", STRING),
        chunk_id: b.add_text_field("chunk_id", STRING | STORED),
        path: b.add_text_field("path", STRING | STORED),
        path_lc: b.add_text_field("path_lc", STRING),
        ext: b.add_text_field("ext", STRING | STORED),
        content_type: b.add_text_field("content_type", STRING | STORED),
        heading: b.add_text_field("heading", STORED),
        body: b.add_text_field("body", body_opts),
        text: b.add_text_field("text", STORED),
        chunk_index: b.add_u64_field("chunk_index", STORED | FAST),
        content_hash: b.add_text_field("content_hash", STORED),
        file_hash: b.add_text_field("file_hash", STORED),
        mtime: b.add_i64_field("mtime", STORED | INDEXED),
        size: b.add_u64_field("size", STORED),
        chunks: b.add_u64_field("chunks", STORED),
        vector: b.add_bytes_field("vector", STORED),
    };
    (b.build(), fields)
}

/// English stop words: the Snowball list (contractions split as the tokenizer splits them)
/// plus a few function words it lacks.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "cannot",
    "could",
    "d",
    "did",
    "do",
    "does",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "ll",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "ought",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

/// The analyzer of chunk text and queries: simple tokens, lower case, English stop words
/// removed, English stemming.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            STOP_WORDS.iter().map(|w| (*w).to_string()),
        ))
        .filter(crate::stem_cache::CachedStemmer::english())
        .build()
}

/// The distinct analyzed terms of `text`, in order of first appearance.
pub fn analyze(text: &str) -> Vec<String> {
    let mut analyzer = analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    while stream.advance() {
        let t = stream.token().text.clone();
        if seen.insert(t.clone()) {
            out.push(t);
        }
    }
    out
}

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

/// Filters on path and extension, applied inside retrieval (never after truncation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Filters {
    /// Keep chunks whose path contains this text (case-insensitive).
    pub path_contains: Option<String>,
    /// Keep only these extensions (no dot, e.g. `["md", "txt"]`); empty: all.
    pub ext_allow: Vec<String>,
    /// Drop these extensions.
    pub ext_deny: Vec<String>,
}

impl Filters {
    /// Whether no filter is set.
    pub fn is_empty(&self) -> bool {
        self.path_contains.as_deref().is_none_or(str::is_empty)
            && self.ext_allow.is_empty()
            && self.ext_deny.is_empty()
    }

    fn normalized_exts(list: &[String]) -> Vec<String> {
        list.iter()
            .map(|e| e.trim().trim_start_matches('.').to_ascii_lowercase())
            .filter(|e| !e.is_empty())
            .collect()
    }

    /// Whether a chunk with this lower-case path and extension passes.
    pub fn accepts(&self, path_lc: &str, ext: &str) -> bool {
        if let Some(needle) = self.path_contains.as_deref().filter(|s| !s.is_empty())
            && !path_lc.contains(&needle.to_lowercase())
        {
            return false;
        }
        let allow = Self::normalized_exts(&self.ext_allow);
        if !allow.is_empty() && !allow.iter().any(|a| a == ext) {
            return false;
        }
        !Self::normalized_exts(&self.ext_deny)
            .iter()
            .any(|d| d == ext)
    }
}

/// A scored hit within one [`Snapshot`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Where the chunk is in the snapshot.
    pub addr: DocAddress,
    /// The ranking's score (BM25, or cosine similarity).
    pub score: f32,
}

/// The dense vectors of a snapshot, in memory, searched exactly.
#[derive(Debug)]
pub struct DenseView {
    dims: usize,
    vectors: Vec<f32>,
    /// The vectors scaled by 127 and rounded: a quarter of the memory to scan.
    quantized: Vec<i8>,
    addrs: Vec<DocAddress>,
    paths_lc: Vec<String>,
    exts: Vec<String>,
}

impl DenseView {
    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// Whether it holds no vector.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// The `limit` chunks most similar to `query` (cosine; vectors are unit length) among
    /// those passing `filters`.
    ///
    /// The scan compares 8-bit quantized vectors (a quarter of the memory traffic of f32),
    /// keeps four times `limit` candidates, and re-scores those with the exact f32 vectors; the
    /// scores returned are exact.
    pub fn search(&self, query: &[f32], filters: &Filters, limit: usize) -> Vec<Hit> {
        if query.len() != self.dims || limit == 0 {
            return Vec::new();
        }
        let q8: Vec<i8> = query.iter().map(|x| quantize(*x)).collect();
        let keep = (limit * 4).max(limit + 32);
        let rows = self.addrs.len();
        // Large views are scanned by two threads, each over half of the rows.
        let threads = if rows >= PARALLEL_SCAN_ROWS {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
        } else {
            1
        };
        let per = rows.div_ceil(threads.max(1));
        let scan = |from: usize| -> TopK {
            let to = (from + per).min(rows);
            let check = !filters.is_empty();
            let mut top = TopK::new(keep);
            let vectors = &self.quantized[from * self.dims..to * self.dims];
            for (i, v) in vectors.chunks_exact(self.dims).enumerate() {
                let row = from + i;
                if check && !filters.accepts(&self.paths_lc[row], &self.exts[row]) {
                    continue;
                }
                top.push(dot_i8(&q8, v) as f32, row);
            }
            top
        };
        let mut top = if threads <= 1 {
            scan(0)
        } else {
            std::thread::scope(|s| {
                let other = s.spawn(|| scan(per));
                let mut mine = scan(0);
                if let Ok(theirs) = other.join() {
                    for (score, row) in theirs.into_sorted() {
                        mine.push(score, row);
                    }
                }
                mine
            })
        };
        let mut exact = TopK::new(limit);
        for (_, row) in std::mem::take(&mut top).into_sorted() {
            let v = &self.vectors[row * self.dims..(row + 1) * self.dims];
            exact.push(dot(query, v), row);
        }
        exact
            .into_sorted()
            .into_iter()
            .map(|(score, row)| Hit {
                addr: self.addrs[row],
                score,
            })
            .collect()
    }

    /// The vector of the chunk at `addr`, if it has one.
    pub fn vector_of(&self, addr: DocAddress) -> Option<&[f32]> {
        let row = self.addrs.binary_search(&addr).ok()?;
        self.vectors.get(row * self.dims..(row + 1) * self.dims)
    }
}

/// An f32 in -1..1 as a signed byte (×127, rounded, clamped).
fn quantize(x: f32) -> i8 {
    (x * 127.0).round().clamp(-127.0, 127.0) as i8
}

/// Dot product of quantized vectors, in i32 (exact for up to 133k dimensions).
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    let mut sum: i32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        sum += i32::from(*x) * i32::from(*y);
    }
    sum
}

/// Dot product, written so the compiler vectorizes it.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}

/// Views with at least this many vectors are scanned by two threads.
const PARALLEL_SCAN_ROWS: usize = 20_000;

/// A bounded min-heap keeping the `k` best (score, row) pairs.
#[derive(Default)]
struct TopK {
    k: usize,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<(OrdF32, usize)>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF32(f32);
impl Eq for OrdF32 {}
impl PartialOrd for OrdF32 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF32 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK {
            k,
            heap: std::collections::BinaryHeap::with_capacity(k + 1),
        }
    }
    fn push(&mut self, score: f32, row: usize) {
        if self.heap.len() < self.k {
            self.heap.push(std::cmp::Reverse((OrdF32(score), row)));
        } else if let Some(std::cmp::Reverse((min, _))) = self.heap.peek()
            && score > min.0
        {
            self.heap.pop();
            self.heap.push(std::cmp::Reverse((OrdF32(score), row)));
        }
    }
    fn into_sorted(self) -> Vec<(f32, usize)> {
        let mut v: Vec<(f32, usize)> = self
            .heap
            .into_iter()
            .map(|std::cmp::Reverse((s, r))| (s.0, r))
            .collect();
        v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        v
    }
}

/// What identifies a searcher's content: its segments and their delete stamps (a reload
/// without a new commit gives a new generation id but the same segments).
type SegmentsKey = Vec<(tantivy::index::SegmentId, Option<tantivy::Opstamp>)>;

/// The on-disk index.
pub struct Store {
    dir: PathBuf,
    index: Index,
    reader: IndexReader,
    fields: Fields,
    manifest: Manifest,
    dense: Mutex<Option<(SegmentsKey, Arc<DenseView>)>>,
    /// The commit stamp the reader was last reloaded at.
    seen_opstamp: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir)
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Open the index in `dir`.
    ///
    /// # Errors
    /// [`KbError::NoIndex`] when there is none; [`KbError::Index`] when it cannot be read.
    pub fn open(dir: &Path) -> Result<Self> {
        let Some(manifest) = read_manifest(dir)? else {
            return Err(KbError::NoIndex {
                path: dir.to_path_buf(),
            });
        };
        let tdir = dir.join(TANTIVY_DIR);
        let index = Index::open_in_dir(&tdir).map_err(|e| KbError::index(dir, e))?;
        Self::finish_open(dir, index, manifest)
    }

    /// Create an empty index in `dir` (which must not hold one) for vectors of `embedder`.
    ///
    /// # Errors
    /// [`KbError::Index`] when the folder cannot be created or written.
    pub fn create(dir: &Path, embedder: Option<EmbedderInfo>) -> Result<Self> {
        let tdir = dir.join(TANTIVY_DIR);
        std::fs::create_dir_all(&tdir).map_err(|e| KbError::io(&tdir, e))?;
        let (schema, _) = schema();
        let index = Index::create_in_dir(&tdir, schema).map_err(|e| KbError::index(dir, e))?;
        let manifest = Manifest {
            format: FORMAT,
            embedder,
        };
        write_atomically(
            &dir.join(MANIFEST_FILE),
            &serde_json::to_vec_pretty(&manifest).map_err(|e| KbError::index(dir, e))?,
        )?;
        Self::finish_open(dir, index, manifest)
    }

    fn finish_open(dir: &Path, index: Index, manifest: Manifest) -> Result<Self> {
        index.tokenizers().register(ANALYZER, analyzer());
        let (_, fields) = schema();
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| KbError::index(dir, e))?;
        Ok(Store {
            dir: dir.to_path_buf(),
            index,
            reader,
            fields,
            manifest,
            dense: Mutex::new(None),
            seen_opstamp: std::sync::atomic::AtomicU64::new(u64::MAX),
        })
    }

    /// The index folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Pick up the latest commit (also one made by another process).
    ///
    /// # Errors
    /// [`KbError::Index`] when the index cannot be re-read.
    pub fn reload(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        let stamp = self
            .index
            .load_metas()
            .map_err(|e| KbError::index(&self.dir, e))?
            .opstamp;
        self.reader
            .reload()
            .map_err(|e| KbError::index(&self.dir, e))?;
        self.seen_opstamp.store(stamp, Ordering::SeqCst);
        Ok(())
    }

    /// Reload only when a commit happened since the last reload (reading `meta.json` is much
    /// cheaper than reopening every segment).
    fn refresh(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        let stamp = self
            .index
            .load_metas()
            .map_err(|e| KbError::index(&self.dir, e))?
            .opstamp;
        if stamp != self.seen_opstamp.load(Ordering::SeqCst) {
            self.reader
                .reload()
                .map_err(|e| KbError::index(&self.dir, e))?;
            self.seen_opstamp.store(stamp, Ordering::SeqCst);
        }
        Ok(())
    }

    /// A consistent view of the index as of its latest commit (also one made by another
    /// process or another handle since the last snapshot).
    ///
    /// # Errors
    /// [`KbError::Index`] when the index or the dense vectors cannot be loaded.
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.refresh()?;
        let searcher = self.reader.searcher();
        let dense = match &self.manifest.embedder {
            None => None,
            Some(info) => Some(self.dense_view(&searcher, info.dims)?),
        };
        Ok(Snapshot {
            searcher,
            fields: self.fields,
            dense,
        })
    }

    fn dense_view(&self, searcher: &Searcher, dims: usize) -> Result<Arc<DenseView>> {
        let key: SegmentsKey = searcher
            .generation()
            .segments()
            .iter()
            .map(|(id, stamp)| (*id, *stamp))
            .collect();
        let mut cached = match self.dense.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some((k, view)) = cached.as_ref()
            && *k == key
        {
            return Ok(Arc::clone(view));
        }
        let view = Arc::new(self.build_dense(searcher, dims)?);
        *cached = Some((key, Arc::clone(&view)));
        Ok(view)
    }

    fn build_dense(&self, searcher: &Searcher, dims: usize) -> Result<DenseView> {
        let f = self.fields;
        let mut view = DenseView {
            dims,
            vectors: Vec::new(),
            quantized: Vec::new(),
            addrs: Vec::new(),
            paths_lc: Vec::new(),
            exts: Vec::new(),
        };
        for (ord, segment) in searcher.segment_readers().iter().enumerate() {
            let store = segment
                .get_store_reader(64)
                .map_err(|e| KbError::index(&self.dir, e))?;
            for doc_id in 0..segment.max_doc() {
                if segment.is_deleted(doc_id) {
                    continue;
                }
                let doc: TantivyDocument = store
                    .get(doc_id)
                    .map_err(|e| KbError::index(&self.dir, e))?;
                let Some(bytes) = doc.get_first(f.vector).and_then(|v| v.as_bytes()) else {
                    continue;
                };
                if bytes.len() != dims * 4 {
                    continue;
                }
                let start = view.vectors.len();
                view.vectors.extend(
                    bytes
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
                );
                let added: Vec<i8> = view.vectors[start..].iter().map(|x| quantize(*x)).collect();
                view.quantized.extend(added);
                view.addrs.push(DocAddress::new(ord as u32, doc_id));
                view.paths_lc
                    .push(first_str(&doc, f.path).unwrap_or_default().to_lowercase());
                view.exts.push(first_str(&doc, f.ext).unwrap_or_default());
            }
        }
        Ok(view)
    }

    /// Every file record, by path.
    ///
    /// # Errors
    /// [`KbError::Index`] when the index cannot be read.
    pub fn file_records(&self) -> Result<BTreeMap<String, FileRecord>> {
        let searcher = self.reader.searcher();
        let f = self.fields;
        let q = TermQuery::new(
            Term::from_field_text(f.kind, "file"),
            IndexRecordOption::Basic,
        );
        let docs = searcher
            .search(&q, &DocSetCollector)
            .map_err(|e| KbError::index(&self.dir, e))?;
        let mut out = BTreeMap::new();
        for addr in docs {
            let doc: TantivyDocument = searcher
                .doc(addr)
                .map_err(|e| KbError::index(&self.dir, e))?;
            let rec = FileRecord {
                path: first_str(&doc, f.path).unwrap_or_default(),
                file_hash: first_str(&doc, f.file_hash).unwrap_or_default(),
                mtime: doc.get_first(f.mtime).and_then(|v| v.as_i64()).unwrap_or(0),
                size: doc.get_first(f.size).and_then(|v| v.as_u64()).unwrap_or(0),
                chunks: doc
                    .get_first(f.chunks)
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0),
                ext: first_str(&doc, f.ext).unwrap_or_default(),
                content_type: first_str(&doc, f.content_type).unwrap_or_default(),
            };
            out.insert(rec.path.clone(), rec);
        }
        Ok(out)
    }

    /// Number of chunk documents.
    ///
    /// # Errors
    /// [`KbError::Index`] when the index cannot be read.
    pub fn chunk_count(&self) -> Result<usize> {
        let q = TermQuery::new(
            Term::from_field_text(self.fields.kind, "chunk"),
            IndexRecordOption::Basic,
        );
        self.reader
            .searcher()
            .search(&q, &Count)
            .map_err(|e| KbError::index(&self.dir, e))
    }

    /// Bytes the index folder takes on disk.
    pub fn disk_size(&self) -> u64 {
        fn walk(p: &Path) -> u64 {
            let Ok(rd) = std::fs::read_dir(p) else {
                return 0;
            };
            rd.flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => walk(&e.path()),
                    Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
                    Err(_) => 0,
                })
                .sum()
        }
        walk(&self.dir)
    }

    /// A writer for one ingest (holds tantivy's writer lock until dropped). It indexes on two
    /// threads with 96 MB of indexing memory between them: on two cores the analysis
    /// (tokenizing, stemming, postings) is what bounds ingest speed.
    ///
    /// # Errors
    /// [`KbError::Index`] when another ingest holds the lock or the index cannot be written.
    pub fn writer(&self) -> Result<StoreWriter<'_>> {
        let writer: IndexWriter = self
            .index
            .writer_with_num_threads(2, 96 * 1024 * 1024)
            .map_err(|e| {
                KbError::index(
                    &self.dir,
                    format!(
                        "cannot open the index for writing ({e}); is another `lsm ingest` running?"
                    ),
                )
            })?;
        Ok(StoreWriter {
            store: self,
            writer,
        })
    }
}

fn first_str(doc: &TantivyDocument, field: Field) -> Option<String> {
    doc.get_first(field)
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// Write `bytes` to `path` through a temporary file and a rename.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(|e| KbError::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| KbError::io(path, e))
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

/// Adds and deletes documents; nothing is visible until [`StoreWriter::commit`].
pub struct StoreWriter<'a> {
    store: &'a Store,
    writer: IndexWriter,
}

impl std::fmt::Debug for StoreWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWriter").finish_non_exhaustive()
    }
}

impl StoreWriter<'_> {
    /// Delete every chunk and the record of the file at `path`.
    pub fn delete_path(&mut self, path: &str) {
        self.writer
            .delete_term(Term::from_field_text(self.store.fields.path, path));
    }

    /// Add a file's chunks (with their vectors, when the index has an embedder) and its record.
    ///
    /// # Errors
    /// [`KbError::Index`] when a vector has the wrong dimensions or tantivy refuses a document.
    pub fn add_file(
        &mut self,
        record: &FileRecord,
        chunks: &[ChunkDraft],
        vectors: Option<&[Vec<f32>]>,
    ) -> Result<()> {
        let f = self.store.fields;
        let dims = self.store.manifest.embedder.as_ref().map(|e| e.dims);
        let path_lc = record.path.to_lowercase();
        for (i, chunk) in chunks.iter().enumerate() {
            let content_hash = sha256_hex(chunk.text.as_bytes());
            let id = chunk_id(&record.path, chunk.index, &content_hash);
            let heading = chunk.heading_path.join(HEADING_SEP);
            let mut doc = TantivyDocument::new();
            doc.add_text(f.kind, "chunk");
            doc.add_text(f.chunk_id, &id);
            doc.add_text(f.path, &record.path);
            doc.add_text(f.path_lc, &path_lc);
            doc.add_text(f.ext, &record.ext);
            doc.add_text(f.content_type, &record.content_type);
            doc.add_text(f.heading, &heading);
            doc.add_text(f.body, format!("{heading}\n\n{}", chunk.text));
            doc.add_text(f.text, &chunk.text);
            doc.add_u64(f.chunk_index, chunk.index as u64);
            doc.add_text(f.content_hash, &content_hash);
            doc.add_i64(f.mtime, record.mtime);
            if let (Some(dims), Some(vectors)) = (dims, vectors) {
                let v = vectors
                    .get(i)
                    .ok_or_else(|| KbError::index(&self.store.dir, "fewer vectors than chunks"))?;
                if v.len() != dims {
                    return Err(KbError::index(
                        &self.store.dir,
                        format!("a vector has {} dimensions, the index {dims}", v.len()),
                    ));
                }
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                doc.add_bytes(f.vector, &bytes);
            }
            self.writer
                .add_document(doc)
                .map_err(|e| KbError::index(&self.store.dir, e))?;
        }
        let mut doc = TantivyDocument::new();
        doc.add_text(f.kind, "file");
        doc.add_text(f.path, &record.path);
        doc.add_text(f.path_lc, &path_lc);
        doc.add_text(f.ext, &record.ext);
        doc.add_text(f.content_type, &record.content_type);
        doc.add_text(f.file_hash, &record.file_hash);
        doc.add_i64(f.mtime, record.mtime);
        doc.add_u64(f.size, record.size);
        doc.add_u64(f.chunks, chunks.len() as u64);
        self.writer
            .add_document(doc)
            .map_err(|e| KbError::index(&self.store.dir, e))?;
        Ok(())
    }

    /// Make everything added and deleted so far visible, atomically, and reload the reader.
    ///
    /// # Errors
    /// [`KbError::Index`] when the commit fails (nothing of this batch is then visible).
    pub fn commit(&mut self) -> Result<()> {
        self.writer
            .commit()
            .map_err(|e| KbError::index(&self.store.dir, e))?;
        self.store.reload()
    }
}

/// A consistent read view: lexical and dense search and chunk lookup agree on one commit.
pub struct Snapshot {
    searcher: Searcher,
    fields: Fields,
    dense: Option<Arc<DenseView>>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").finish_non_exhaustive()
    }
}

impl Snapshot {
    /// The dense vectors, when the index has an embedder.
    pub fn dense(&self) -> Option<&DenseView> {
        self.dense.as_deref()
    }

    /// Number of chunks visible.
    ///
    /// # Errors
    /// When tantivy fails.
    pub fn chunk_count(&self) -> tantivy::Result<usize> {
        let q = TermQuery::new(
            Term::from_field_text(self.fields.kind, "chunk"),
            IndexRecordOption::Basic,
        );
        self.searcher.search(&q, &Count)
    }

    fn filter_clauses(&self, filters: &Filters) -> Result<Vec<(Occur, Box<dyn Query>)>> {
        let f = self.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(
            Occur::Must,
            Box::new(ConstScoreQuery::new(
                Box::new(TermQuery::new(
                    Term::from_field_text(f.kind, "chunk"),
                    IndexRecordOption::Basic,
                )),
                0.0,
            )),
        )];
        if let Some(needle) = filters.path_contains.as_deref().filter(|s| !s.is_empty()) {
            let pattern = format!(".*{}.*", regex_escape(&needle.to_lowercase()));
            let q = RegexQuery::from_pattern(&pattern, f.path_lc)
                .map_err(|e| KbError::InvalidRequest(format!("bad path_contains: {e}")))?;
            clauses.push((
                Occur::Must,
                Box::new(ConstScoreQuery::new(Box::new(q), 0.0)),
            ));
        }
        let allow = Filters::normalized_exts(&filters.ext_allow);
        if !allow.is_empty() {
            let any: Vec<(Occur, Box<dyn Query>)> = allow
                .iter()
                .map(|e| {
                    let q: Box<dyn Query> = Box::new(TermQuery::new(
                        Term::from_field_text(f.ext, e),
                        IndexRecordOption::Basic,
                    ));
                    (Occur::Should, q)
                })
                .collect();
            clauses.push((
                Occur::Must,
                Box::new(ConstScoreQuery::new(Box::new(BooleanQuery::new(any)), 0.0)),
            ));
        }
        for e in Filters::normalized_exts(&filters.ext_deny) {
            clauses.push((
                Occur::MustNot,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.ext, &e),
                    IndexRecordOption::Basic,
                )),
            ));
        }
        Ok(clauses)
    }

    /// BM25 over heading + text of the chunks passing `filters`, best first.
    ///
    /// # Errors
    /// [`KbError::InvalidRequest`] for an unusable filter, [`KbError::Index`] when tantivy fails.
    pub fn lexical(&self, query: &str, filters: &Filters, limit: usize) -> Result<Vec<Hit>> {
        let terms = analyze(query);
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let should: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(self.fields.body, t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect();
        let text_query = BooleanQuery::new(should);
        // File records have no body text, so a pure text query matches chunks only; without
        // filters it stays a plain disjunction, which tantivy scores with block-max WAND.
        let q: Box<dyn Query> = if filters.is_empty() {
            Box::new(text_query)
        } else {
            let mut clauses = self.filter_clauses(filters)?;
            clauses.push((Occur::Must, Box::new(text_query)));
            Box::new(BooleanQuery::new(clauses))
        };
        let top = self
            .searcher
            .search(q.as_ref(), &TopDocs::with_limit(limit))
            .map_err(|e| KbError::index(PathBuf::new(), e))?;
        Ok(top
            .into_iter()
            .map(|(score, addr)| Hit { addr, score })
            .collect())
    }

    /// For each of `addrs`, how many of the analyzed `terms` its heading + text contains
    /// (read from the postings lists).
    ///
    /// # Errors
    /// [`KbError::Index`] when the postings cannot be read.
    pub fn term_matches(&self, terms: &[String], addrs: &[DocAddress]) -> Result<Vec<usize>> {
        use tantivy::DocSet;
        let mut counts = vec![0usize; addrs.len()];
        // Per segment, the candidates in doc order (postings only seek forward).
        let mut by_segment: BTreeMap<u32, Vec<(u32, usize)>> = BTreeMap::new();
        for (i, a) in addrs.iter().enumerate() {
            by_segment
                .entry(a.segment_ord)
                .or_default()
                .push((a.doc_id, i));
        }
        for (seg, mut docs) in by_segment {
            docs.sort_unstable();
            let reader = self.searcher.segment_reader(seg);
            let inverted = reader
                .inverted_index(self.fields.body)
                .map_err(|e| KbError::index(PathBuf::new(), e))?;
            for t in terms {
                let term = Term::from_field_text(self.fields.body, t);
                let Some(mut postings) = inverted
                    .read_postings(&term, IndexRecordOption::Basic)
                    .map_err(|e| KbError::index(PathBuf::new(), e))?
                else {
                    continue;
                };
                for &(doc, i) in &docs {
                    if postings.doc() > doc {
                        continue;
                    }
                    if postings.seek(doc) == doc {
                        counts[i] += 1;
                    }
                }
            }
        }
        Ok(counts)
    }

    /// Every chunk passing `filters` (at most `limit`), in index order.
    ///
    /// # Errors
    /// As [`Snapshot::lexical`].
    pub fn filtered(&self, filters: &Filters, limit: usize) -> Result<Vec<DocAddress>> {
        let mut clauses = self.filter_clauses(filters)?;
        clauses.push((Occur::Must, Box::new(AllQuery)));
        let q = BooleanQuery::new(clauses);
        let docs = self
            .searcher
            .search(&q, &DocSetCollector)
            .map_err(|e| KbError::index(PathBuf::new(), e))?;
        let mut v: Vec<DocAddress> = docs.into_iter().collect();
        v.sort();
        v.truncate(limit);
        Ok(v)
    }

    /// The chunk at `addr`.
    ///
    /// # Errors
    /// [`KbError::Index`] when it cannot be read.
    pub fn chunk(&self, addr: DocAddress) -> Result<ChunkRecord> {
        let doc: TantivyDocument = self
            .searcher
            .doc(addr)
            .map_err(|e| KbError::index(PathBuf::new(), e))?;
        let f = self.fields;
        let heading = first_str(&doc, f.heading).unwrap_or_default();
        Ok(ChunkRecord {
            chunk_id: first_str(&doc, f.chunk_id).unwrap_or_default(),
            path: first_str(&doc, f.path).unwrap_or_default(),
            ext: first_str(&doc, f.ext).unwrap_or_default(),
            content_type: first_str(&doc, f.content_type).unwrap_or_default(),
            heading_path: if heading.is_empty() {
                Vec::new()
            } else {
                heading.split(HEADING_SEP).map(str::to_string).collect()
            },
            chunk_index: doc
                .get_first(f.chunk_index)
                .and_then(|v| v.as_u64())
                .unwrap_or(0),
            text: first_str(&doc, f.text).unwrap_or_default(),
            content_hash: first_str(&doc, f.content_hash).unwrap_or_default(),
            mtime: doc.get_first(f.mtime).and_then(|v| v.as_i64()).unwrap_or(0),
        })
    }

    /// The address of the chunk with id `chunk_id`, if it is current.
    ///
    /// # Errors
    /// [`KbError::Index`] when tantivy fails.
    pub fn find_chunk(&self, chunk_id: &str) -> Result<Option<DocAddress>> {
        let q = TermQuery::new(
            Term::from_field_text(self.fields.chunk_id, chunk_id),
            IndexRecordOption::Basic,
        );
        let top = self
            .searcher
            .search(&q, &TopDocs::with_limit(1))
            .map_err(|e| KbError::index(PathBuf::new(), e))?;
        Ok(top.first().map(|(_, a)| *a))
    }
}

/// Escape regex metacharacters (tantivy's regex syntax).
fn regex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~\"<>@".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_the_best_in_order() {
        let mut t = TopK::new(3);
        for (i, s) in [0.1, 0.9, 0.5, 0.7, 0.2].into_iter().enumerate() {
            t.push(s, i);
        }
        let rows: Vec<usize> = t.into_sorted().into_iter().map(|(_, r)| r).collect();
        assert_eq!(rows, [1, 3, 2]);
    }

    #[test]
    fn the_two_thread_scan_finds_the_same_best_rows_as_a_naive_one() {
        let dims = 8;
        let rows = PARALLEL_SCAN_ROWS + 123;
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let vectors: Vec<f32> = (0..rows * dims).map(|_| next()).collect();
        let view = DenseView {
            dims,
            addrs: (0..rows as u32).map(|d| DocAddress::new(0, d)).collect(),
            paths_lc: (0..rows).map(|i| format!("/p{}", i % 3)).collect(),
            exts: vec!["md".into(); rows],
            quantized: vectors.iter().map(|x| quantize(*x)).collect(),
            vectors,
        };
        let q: Vec<f32> = (0..dims).map(|_| next()).collect();
        let mut naive: Vec<(f32, u32)> = view
            .vectors
            .chunks_exact(dims)
            .enumerate()
            .map(|(i, v)| (dot(&q, v), i as u32))
            .collect();
        naive.sort_by(|a, b| b.0.total_cmp(&a.0));
        let got: Vec<u32> = view
            .search(&q, &Filters::default(), 10)
            .iter()
            .map(|h| h.addr.doc_id)
            .collect();
        let want: Vec<u32> = naive.iter().take(10).map(|x| x.1).collect();
        assert_eq!(got, want);
        let filtered = view.search(
            &q,
            &Filters {
                path_contains: Some("/p1".into()),
                ..Default::default()
            },
            5,
        );
        assert!(filtered.iter().all(|h| h.addr.doc_id % 3 == 1));
    }

    #[test]
    fn dot_matches_the_naive_sum() {
        let a: Vec<f32> = (0..21).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..21).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-3);
    }

    #[test]
    fn analyzer_lowercases_stems_and_drops_stop_words() {
        assert_eq!(
            analyze("The Boundary layers of the wings"),
            ["boundari", "layer", "wing"]
        );
    }

    #[test]
    fn filters_accept_by_path_and_extension() {
        let f = Filters {
            path_contains: Some("Notes".into()),
            ext_allow: vec![".MD".into()],
            ext_deny: vec![],
        };
        assert!(f.accepts("/home/x/notes/a.md", "md"));
        assert!(!f.accepts("/home/x/docs/a.md", "md"));
        assert!(!f.accepts("/home/x/notes/a.txt", "txt"));
        let deny = Filters {
            ext_deny: vec!["txt".into()],
            ..Default::default()
        };
        assert!(!deny.accepts("a.txt", "txt"));
        assert!(deny.accepts("a.md", "md"));
    }
}
