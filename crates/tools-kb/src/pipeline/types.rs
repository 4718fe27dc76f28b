//! The pipeline's wire types: the request, the sources, the retrieval trace, the context
//! package handed between stages (and to agents), and the response.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::mode::{ModeConfig, ModeSpec};
use crate::store::Filters;

/// Most characters of one source's text in a serialized package.
pub const MAX_SOURCE_CHARS: usize = 2000;

/// A query as the user or an agent asks it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueryRequest {
    /// The question or search text.
    pub query: String,
    /// The mode (name or object); `None`: the configured default.
    pub mode: Option<ModeSpec>,
    /// Path and extension filters.
    pub filters: Filters,
    /// Sources to keep (overrides the mode's `local_policy.k`).
    pub k: Option<usize>,
    /// Extra instructions placed before the sources (e.g. the user's standing prompt).
    pub starting_prompt: Option<String>,
    /// Conversation this query belongs to (generated when absent).
    pub conversation_id: Option<String>,
    /// The previous answer's response id, for provider-side chaining.
    pub prior_response_id: Option<String>,
}

/// One retrieved source.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Source {
    /// `S1`, `S2`, … in rank order.
    pub label: String,
    /// The chunk's id.
    pub chunk_id: String,
    /// Its file.
    pub path: String,
    /// Extension.
    pub ext: String,
    /// Content type.
    pub content_type: String,
    /// Heading path (`A > B`).
    pub heading: String,
    /// 0-based position in the file.
    pub chunk_index: u64,
    /// Fused retrieval score.
    pub score: f32,
    /// Relevance to the query, 0..1 (cosine similarity with an embedder, else the share of
    /// query terms found).
    pub relevance: f32,
    /// The chunk's text (cut at [`MAX_SOURCE_CHARS`] in serialized packages).
    pub text: String,
}

/// One timed stage of retrieval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceStage {
    /// Stage name.
    pub stage: String,
    /// Milliseconds taken.
    pub ms: f64,
    /// Items in.
    pub input: usize,
    /// Items out.
    pub output: usize,
    /// What happened, when it is worth saying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How the sources were found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RetrievalTrace {
    /// The profile the mode asked for.
    pub profile: String,
    /// The profile that ran (lexical when dense retrieval was impossible).
    pub effective_profile: String,
    /// The embedder used, if any.
    pub embedder: Option<String>,
    /// Stages in order.
    pub stages: Vec<TraceStage>,
    /// Fallbacks and gates, in words.
    pub notes: Vec<String>,
    /// Total milliseconds.
    pub total_ms: f64,
}

/// What `build_sources` produced, and `synthesize_context` completed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextPackage {
    /// The request.
    pub request: QueryRequest,
    /// The resolved mode.
    pub mode: ModeConfig,
    /// The sources, best first.
    pub candidates: Vec<Source>,
    /// Results of remote sources (empty unless the mode and the sandbox allow them).
    pub remote_sources: Vec<serde_json::Value>,
    /// How retrieval went.
    pub retrieval_trace: RetrievalTrace,
    /// The `[S#]` block handed to the LLM (empty until `synthesize_context`).
    pub context_block: String,
    /// Label → chunk id of the sources in the context block.
    pub source_labels: BTreeMap<String, String>,
    /// The request's starting prompt.
    pub starting_prompt: Option<String>,
    /// The conversation id.
    pub conversation_id: String,
    /// The previous response id.
    pub prior_response_id: Option<String>,
    /// The best source's relevance (0 when there is none).
    pub relevance: f32,
    /// Whether the best relevance is below the mode's `min_relevance`.
    pub below_min_relevance: bool,
}

/// A citation the answer made to a known source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    /// `S1`, …
    pub label: String,
    /// The chunk.
    pub chunk_id: String,
    /// Its file.
    pub path: String,
    /// Heading path.
    pub heading: String,
    /// Position in the file.
    pub chunk_index: u64,
}

/// The answer and how it came about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryResponse {
    /// The answer text (citations to unknown labels removed).
    pub answer: String,
    /// The package it was answered from.
    pub package: ContextPackage,
    /// Valid citations, in order of first use.
    pub citations: Vec<Citation>,
    /// Labels the answer cited that are not sources (dropped from the answer).
    pub invalid_citations: Vec<String>,
    /// The answer wrote no `[S#]` marker and `citations` are the sources it repeats, matched
    /// by its words ([`super::citations::attribute`]), not sources it named.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub citations_attributed: bool,
    /// Why the answer is a fallback (no LLM answer), if it is.
    pub fallback: Option<String>,
    /// The conversation id.
    pub conversation_id: String,
    /// The provider's response id, for chaining the next query.
    pub response_id: Option<String>,
}

impl RetrievalTrace {
    /// Record one stage: its name, the milliseconds since `started` (none: an untimed
    /// filter, recorded as 0), items in and out, and a note.
    pub(super) fn record(
        &mut self,
        stage: &str,
        started: Option<Instant>,
        input: usize,
        output: usize,
        note: Option<String>,
    ) {
        self.stages.push(TraceStage {
            stage: stage.to_string(),
            ms: started.map_or(0.0, ms),
            input,
            output,
            note,
        });
    }
}

/// Milliseconds since `t`.
pub(super) fn ms(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1e6).round() / 1e3
}
