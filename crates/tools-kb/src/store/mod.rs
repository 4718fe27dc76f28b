//! The embedded index: one tantivy index holds every chunk (text for BM25, metadata for the
//! filters, the dense vector) and one record per ingested file. Chunks and file records are
//! added and deleted in the same commit, so the index is consistent after any interruption:
//! what was committed is complete, what was not is absent and is redone by the next ingest.
//!
//! A `kb.json` manifest beside the tantivy files records the format and the embedder (model
//! and dimensions) the vectors were made with.

mod analyzer;
mod dense;
mod filters;
mod manifest;
mod records;
mod schema;
mod snapshot;
mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tantivy::collector::{Count, DocSetCollector};
use tantivy::query::TermQuery;
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::{
    DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term,
};

pub use analyzer::{analyze, analyzer};
pub use dense::{DenseView, dot};
pub use filters::Filters;
pub(crate) use manifest::write_atomically;
pub use manifest::{EmbedderInfo, FORMAT, MANIFEST_FILE, Manifest, describe, read_manifest};
pub use records::{ChunkRecord, FileRecord, sha256_hex};
pub use snapshot::{Hit, Snapshot};
pub use writer::StoreWriter;

use crate::error::{KbError, Result};
use analyzer::ANALYZER;
use dense::quantize;
use schema::{Fields, first_str, schema};

/// The tantivy index's sub-folder.
const TANTIVY_DIR: &str = "tantivy";

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
