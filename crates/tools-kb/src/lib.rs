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

pub mod chunk;
pub mod config;
pub mod embed;
pub mod embed_http;
pub mod error;
pub mod eval;
pub mod extract;
pub mod http;
pub mod ingest;
pub mod kb;
pub mod mode;
pub mod pipeline;
pub mod remote;
pub mod rerank;
pub mod retrieve;
pub mod stem_cache;
pub mod store;
pub mod tools;

pub use config::{EmbedderConfig, EmbedderKind, KbConfig, RetrievalSettings};
pub use error::{KbError, Result};
pub use kb::{KbStats, KnowledgeBase};
pub use mode::{ModeConfig, ModePolicy, ModeSpec};
pub use pipeline::{ContextPackage, Pipeline, QueryRequest, QueryResponse};
pub use retrieve::Profile;
pub use store::Filters;
pub use tools::{ModeGuard, TOOL_NAMES};
