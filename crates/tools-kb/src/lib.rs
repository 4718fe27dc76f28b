//! The knowledge base: ingest of the user's documents, an embedded index, the retrieval
//! pipeline, and the tools that expose it to agents (`query_context`, `execute_context`,
//! `query_and_synthesize`, …).
//!
//! Its tools implement `lsm_sandbox::Tool`, so every call is checked by the sandbox like any
//! other tool. It may call a provider for synthesis inside a tool; it never runs an agent loop.
//!
//! # What this crate must never do
//!
//! - Execute tools on an agent's behalf or drive an LLM loop (that is `lsm-harness`).
//! - Reach the network unless the sandbox allows URL access.
//! - Return an answer whose citations point at sources it did not retrieve.

/// The names of the knowledge-base tools this crate provides once a knowledge base is
/// configured.
pub const TOOL_NAMES: &[&str] = &["query_context", "execute_context", "query_and_synthesize"];
