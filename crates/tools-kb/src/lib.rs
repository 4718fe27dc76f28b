//! The knowledge base: ingest of the user's documents, an embedded index (tantivy BM25 plus
//! dense vectors), the retrieval pipeline (`build_sources` → `synthesize_context` → `execute`),
//! and the tools that expose it to agents (`query_context`, `execute_context`,
//! `query_and_synthesize`, `query_llm`, `extract_snippets`, `source_map`, `similarity_search`,
//! `find_section`).
//!
//! Its tools implement `lsm_sandbox::Tool`, so every call is checked by the sandbox like any
//! other tool. It may call a provider for synthesis inside a tool; it never runs an agent loop.
//!
//! # What this crate must never do
//!
//! - Execute tools on an agent's behalf or drive an LLM loop (that is `lsm-harness`).
//! - Reach the network unless the sandbox allows URL access (the configured LLM provider and
//!   embedder are not URL access; remote sources are).
//! - Return an answer whose citations point at sources it did not retrieve: unknown labels are
//!   dropped from the answer and reported.
//! - Retrieve a chunk that is no longer current: a changed or deleted file's chunks are
//!   replaced or removed in the same commit as its file record.
//!
//! # API boundary
//!
//! The public API is what this file exports, nothing else: the types and functions at the
//! crate root (the knowledge base, ingest, the index's read side, the pipeline and its wire
//! types, configuration), and five namespaces for families of items — [`tools`] (the KB
//! tools and their registration), [`remote`] (the `RemoteProvider` seam and its providers),
//! [`mode`] (modes and the built-in ones), [`embed`] (the `Embedder` seam and its
//! implementations) and [`eval`] (retrieval evaluation). Every other module is private, so
//! files can be split or moved without breaking a user of the crate.

mod blocking;
mod chunk;
mod config;
pub mod embed;
mod error;
pub mod eval;
mod extract;
mod http;
mod ingest;
mod kb;
pub mod mode;
mod pipeline;
pub mod remote;
mod rerank;
mod retrieve;
mod stem_cache;
mod store;
mod text;
pub mod tools;

pub use chunk::ChunkDraft;
pub use config::{DEFAULT_INDEX_DIR, KbConfig, RetrievalSettings};
pub use embed::{EmbedderConfig, EmbedderKind, default_model_dir};
pub use error::{KbError, Result};
pub use ingest::{
    FailedFile, FileOutcome, IngestOptions, IngestProgress, IngestReport, NoProgress,
    embedding_input, remove_path,
};
pub use kb::{KbStats, KnowledgeBase, build_embedder};
pub use mode::{ModeConfig, ModePolicy, ModeSpec};
pub use pipeline::{
    Citation, ContextPackage, MAX_SOURCE_CHARS, Pipeline, QueryRequest, QueryResponse,
    RetrievalTrace, Source, TraceStage, check_citations, fallback_answer, source_header,
};
pub use retrieve::Profile;
pub use store::{
    ChunkRecord, DenseView, EmbedderInfo, FileRecord, Filters, Hit, MANIFEST_FILE, Manifest,
    Snapshot, Store, StoreWriter, analyze, dot, read_manifest,
};
pub use text::truncate_chars;
pub use tools::{ModeGuard, ModeRefusal, TOOL_NAMES};
