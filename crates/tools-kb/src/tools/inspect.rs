//! The tools that look into the index without the LLM: `extract_snippets`, `source_map`,
//! `similarity_search`, and `find_section` (a section of one file, by its heading).

use std::collections::BTreeMap;
use std::sync::Arc;

use lsm_sandbox::{PathArg, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::bounded::{bounded, tool_err};
use crate::blocking::off_runtime;
use crate::mode::ModeSpec;
use crate::pipeline::{Pipeline, QueryRequest};
use crate::retrieve::MinHash;
use crate::store::{Filters, Snapshot, dot};
use crate::text::truncate_chars;

/// `extract_snippets`: short passages around the query's terms.
#[derive(Debug)]
pub struct ExtractSnippets(pub Arc<Pipeline>);

/// Arguments of `extract_snippets`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtractSnippetsArgs {
    /// What to look for.
    pub query: String,
    /// Only from files whose path contains this text.
    pub path_contains: Option<String>,
    /// How many snippets (default 5, at most 20).
    pub max_snippets: Option<u64>,
    /// Characters around the match (default 300, at most 2000).
    pub context_chars: Option<u64>,
}

/// What `ExtractSnippets` tells the model it does.
pub(super) const EXTRACT_SNIPPETS_DESCRIPTION: &str = "Find short passages in the knowledge base around the \
    words of a query, with their file, heading and chunk.";

kb_tool! { ExtractSnippets {
    name: "extract_snippets",
    description: EXTRACT_SNIPPETS_DESCRIPTION,
    args: ExtractSnippetsArgs,
    risk: ReadOnly,
} }

impl ExtractSnippets {
    async fn run(
        &self,
        a: ExtractSnippetsArgs,
        _ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let pipeline = Arc::clone(&self.0);
        off_runtime(move || extract_snippets(&pipeline, a)).await
    }
}

/// The index as of now, and a filter on the path.
fn snapshot_and_filter(
    pipeline: &Pipeline,
    path_contains: Option<String>,
) -> Result<(Snapshot, Filters), ToolError> {
    let filters = Filters {
        path_contains,
        ..Default::default()
    };
    let snap = pipeline.kb().store().snapshot().map_err(tool_err)?;
    Ok((snap, filters))
}

/// The work of `ExtractSnippets`: index reads, off the runtime.
fn extract_snippets(pipeline: &Pipeline, a: ExtractSnippetsArgs) -> Result<ToolOutput, ToolError> {
    let n = a.max_snippets.unwrap_or(5).clamp(1, 20) as usize;
    let width = a.context_chars.unwrap_or(300).clamp(40, 2000) as usize;
    let (snap, filters) = snapshot_and_filter(pipeline, a.path_contains)?;
    let hits = snap.lexical(&a.query, &filters, n).map_err(tool_err)?;
    let terms = crate::store::analyze(&a.query);
    let mut out = Vec::new();
    for h in hits {
        let c = snap.chunk(h.addr).map_err(tool_err)?;
        out.push(json!({
            "path": c.path,
            "heading": c.heading(),
            "chunk_index": c.chunk_index,
            "chunk_id": c.chunk_id,
            "score": h.score,
            "snippet": snippet(&c.text, &terms, width),
        }));
    }
    Ok(ToolOutput::text(bounded(
        json!({"query": a.query, "snippets": out}),
    )))
}

/// A window of about `width` characters of `text` around the first word whose analyzed form
/// is one of `terms`.
fn snippet(text: &str, terms: &[String], width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut start = 0;
    let mut found = None;
    for (i, c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if i > start {
                let word: String = chars[start..i].iter().collect();
                if crate::store::analyze(&word)
                    .iter()
                    .any(|w| terms.contains(w))
                {
                    found = Some(start);
                    break;
                }
            }
            start = i + 1;
        }
    }
    let center = found.unwrap_or(0);
    let from = center.saturating_sub(width / 3);
    let to = (from + width).min(chars.len());
    let mut s: String = chars[from..to].iter().collect();
    if from > 0 {
        s.insert(0, '…');
    }
    if to < chars.len() {
        s.push('…');
    }
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `source_map`: evidence grouped by file.
#[derive(Debug)]
pub struct SourceMap(pub Arc<Pipeline>);

/// Arguments of `source_map`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceMapArgs {
    /// Map the evidence for this query (or give chunk_ids).
    pub query: Option<String>,
    /// Map these chunks (ids from earlier results).
    pub chunk_ids: Option<Vec<String>>,
    /// Number of sources for a query (default 12, at most 50).
    pub k: Option<u64>,
    /// Filters for a query: path_contains, ext_allow, ext_deny.
    pub filters: Option<Filters>,
}

/// What `SourceMap` tells the model it does.
pub(super) const SOURCE_MAP_DESCRIPTION: &str = "Map evidence to its sources: for a query (or a list of chunk \
    ids), the files it comes from, each with its chunks (heading, position, relevance, excerpt).";

kb_tool! { SourceMap {
    name: "source_map",
    description: SOURCE_MAP_DESCRIPTION,
    args: SourceMapArgs,
    risk: ReadOnly,
} }

impl SourceMap {
    async fn run(&self, a: SourceMapArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let mut entries: Vec<MapEntry> = Vec::new();
        let mut missing = Vec::new();
        if let Some(ids) = a.chunk_ids.filter(|v| !v.is_empty()) {
            let pipeline = Arc::clone(&self.0);
            (entries, missing) = off_runtime(move || chunks_by_id(&pipeline, &ids)).await?;
        } else if let Some(query) = a.query.filter(|q| !q.trim().is_empty()) {
            let mut mode = crate::mode::grounded();
            mode.local_policy.min_relevance = 0.0;
            mode.retrieval_profile = if self.0.kb().embedder().is_some() {
                "hybrid_rrf".into()
            } else {
                "lexical".into()
            };
            let request = QueryRequest {
                query,
                mode: Some(ModeSpec::Config(Box::new(mode))),
                filters: a.filters.unwrap_or_default(),
                k: Some(a.k.unwrap_or(12).clamp(1, 50) as usize),
                ..Default::default()
            };
            let pkg = self.0.build_sources(request).await.map_err(tool_err)?;
            for s in pkg.candidates {
                entries.push((
                    s.path.clone(),
                    json!({"chunk_id": s.chunk_id, "label": s.label, "heading": s.heading,
                       "chunk_index": s.chunk_index, "relevance": s.relevance,
                       "excerpt": truncate_chars(s.text.trim(), 200)}),
                ));
            }
        } else {
            return Err(ToolError::InvalidArguments(
                "give a query or a list of chunk_ids".into(),
            ));
        }
        let mut map: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for (path, e) in entries {
            map.entry(path).or_default().push(e);
        }
        let files = map.len();
        let sources: serde_json::Map<String, Value> = map
            .into_iter()
            .map(|(p, chunks)| (p, json!({"count": chunks.len(), "chunks": chunks})))
            .collect();
        Ok(ToolOutput::text(bounded(json!({
            "files": files,
            "sources": sources,
            "missing_chunk_ids": missing,
        }))))
    }
}

/// One chunk in `source_map`: its file and what is said of it.
type MapEntry = (String, Value);

/// `source_map`'s entries for chunk ids (at most 100), and the ids the index does not hold.
fn chunks_by_id(
    pipeline: &Pipeline,
    ids: &[String],
) -> Result<(Vec<MapEntry>, Vec<String>), ToolError> {
    let mut entries = Vec::new();
    let mut missing = Vec::new();
    let snap = pipeline.kb().store().snapshot().map_err(tool_err)?;
    for id in ids.iter().take(100) {
        match snap.find_chunk(id).map_err(tool_err)? {
            Some(addr) => {
                let c = snap.chunk(addr).map_err(tool_err)?;
                entries.push((
                    c.path.clone(),
                    json!({"chunk_id": c.chunk_id, "heading": c.heading(),
                       "chunk_index": c.chunk_index,
                       "excerpt": truncate_chars(c.text.trim(), 200)}),
                ));
            }
            None => missing.push(id.clone()),
        }
    }
    Ok((entries, missing))
}

/// `similarity_search`: pairs of chunks that say nearly the same thing.
#[derive(Debug)]
pub struct SimilaritySearch(pub Arc<Pipeline>);

/// Arguments of `similarity_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SimilaritySearchArgs {
    /// Compare the chunks most related to this query (default: all chunks passing the filter).
    pub query: Option<String>,
    /// Only chunks of files whose path contains this text.
    pub path_contains: Option<String>,
    /// Similarity (0..1) at or above which a pair is reported (default 0.85).
    pub threshold: Option<f64>,
    /// Most pairs returned (default 20, at most 100).
    pub max_pairs: Option<u64>,
}

/// Most chunks compared pairwise in one call.
const SIMILARITY_SCAN: usize = 400;

/// What `SimilaritySearch` tells the model it does.
pub(super) const SIMILARITY_SEARCH_DESCRIPTION: &str = "Find pairs of knowledge-base chunks that are \
    near-duplicates or say nearly the same thing (cosine similarity with an embedder, else \
    shingle overlap).";

kb_tool! { SimilaritySearch {
    name: "similarity_search",
    description: SIMILARITY_SEARCH_DESCRIPTION,
    args: SimilaritySearchArgs,
    risk: ReadOnly,
} }

impl SimilaritySearch {
    async fn run(
        &self,
        a: SimilaritySearchArgs,
        _ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let pipeline = Arc::clone(&self.0);
        off_runtime(move || similar_pairs(&pipeline, a)).await
    }
}

/// The work of `SimilaritySearch`: index reads, off the runtime.
fn similar_pairs(pipeline: &Pipeline, a: SimilaritySearchArgs) -> Result<ToolOutput, ToolError> {
    let threshold = a.threshold.unwrap_or(0.85).clamp(0.0, 1.0) as f32;
    let max_pairs = a.max_pairs.unwrap_or(20).clamp(1, 100) as usize;
    let (snap, filters) = snapshot_and_filter(pipeline, a.path_contains)?;
    let addrs: Vec<tantivy::DocAddress> = match a.query.as_deref().filter(|q| !q.trim().is_empty())
    {
        Some(q) => snap
            .lexical(q, &filters, SIMILARITY_SCAN)
            .map_err(tool_err)?
            .into_iter()
            .map(|h| h.addr)
            .collect(),
        None => snap.filtered(&filters, SIMILARITY_SCAN).map_err(tool_err)?,
    };
    let chunks: Vec<crate::store::ChunkRecord> = addrs
        .iter()
        .map(|a| snap.chunk(*a))
        .collect::<Result<_, _>>()
        .map_err(tool_err)?;
    let vectors: Vec<Option<&[f32]>> = addrs
        .iter()
        .map(|a| snap.dense().and_then(|d| d.vector_of(*a)))
        .collect();
    let sigs: Vec<MinHash> = chunks.iter().map(|c| MinHash::of(&c.text)).collect();
    let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
    for i in 0..chunks.len() {
        for j in i + 1..chunks.len() {
            let sim = match (vectors[i], vectors[j]) {
                (Some(x), Some(y)) => dot(x, y),
                _ => sigs[i].similarity(&sigs[j]),
            };
            if sim >= threshold {
                pairs.push((sim, i, j));
            }
        }
    }
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total = pairs.len();
    pairs.truncate(max_pairs);
    let side = |c: &crate::store::ChunkRecord| {
        json!({"chunk_id": c.chunk_id, "path": c.path, "heading": c.heading(),
           "chunk_index": c.chunk_index, "excerpt": truncate_chars(c.text.trim(), 160)})
    };
    let out: Vec<Value> = pairs
        .iter()
        .map(|(s, i, j)| {
            json!({"similarity": (s * 1000.0).round() / 1000.0,
               "a": side(&chunks[*i]), "b": side(&chunks[*j])})
        })
        .collect();
    Ok(ToolOutput::text(bounded(json!({
        "compared_chunks": chunks.len(),
        "measure": if snap.dense().is_some() { "cosine" } else { "minhash_jaccard" },
        "threshold": threshold,
        "pairs_found": total,
        "pairs": out,
    }))))
}

/// `find_section`: a section of a file, by its heading.
#[derive(Debug, Clone, Copy, Default)]
pub struct FindSection;

/// Arguments of `find_section`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindSectionArgs {
    /// The file, absolute or relative to the working directory.
    pub path: String,
    /// Text of the heading to find (case-insensitive; the first match wins).
    pub heading: String,
    /// Most characters of the section returned (default 8000, at most 50000).
    pub max_chars: Option<u64>,
}

const FIND_SECTION_PATHS: &[PathArg] = &[PathArg::read("path")];

/// Most bytes of a file `find_section` reads (the knowledge base's default file limit).
const FIND_SECTION_MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// What `FindSection` tells the model it does.
pub(super) const FIND_SECTION_DESCRIPTION: &str = "Return one section of a document (Markdown, \
    reStructuredText, HTML, text, PDF page, or a top-level item of source code) by its heading, \
    with the document's outline.";

kb_tool! { FindSection {
    name: "find_section",
    description: FIND_SECTION_DESCRIPTION,
    args: FindSectionArgs,
    risk: ReadOnly,
    path_args: FIND_SECTION_PATHS,
} }

impl FindSection {
    async fn run(&self, a: FindSectionArgs, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let path = ctx.path("path")?;
        let max = a.max_chars.unwrap_or(8000).clamp(100, 50_000) as usize;
        // Through the sandbox root's handle: only a regular file beneath the root, never a
        // named pipe that would block.
        let bytes = path.read_bytes(FIND_SECTION_MAX_FILE_BYTES).await?;
        let ext = crate::extract::extension_of(path.shown());
        let ct = crate::extract::ContentType::for_extension(&ext)
            .unwrap_or(crate::extract::ContentType::Text);
        // Parsing (a PDF especially) is CPU work: off the runtime.
        let doc = off_runtime(move || crate::extract::extract(ct, &bytes))
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let outline: Vec<Value> = doc
            .headings
            .iter()
            .map(|h| json!({"level": h.level, "title": h.title}))
            .collect();
        let needle = a.heading.to_lowercase();
        let Some(pos) = doc
            .headings
            .iter()
            .position(|h| h.title.to_lowercase().contains(&needle))
        else {
            return Err(ToolError::InvalidArguments(format!(
                "no heading matching '{}' in {}; its headings: {}",
                a.heading,
                a.path,
                doc.headings
                    .iter()
                    .map(|h| h.title.as_str())
                    .take(50)
                    .collect::<Vec<_>>()
                    .join(" | ")
            )));
        };
        let h = &doc.headings[pos];
        let end = doc.headings[pos + 1..]
            .iter()
            .find(|n| n.level <= h.level)
            .map_or(doc.text.len(), |n| n.offset);
        let section = doc.text.get(h.offset..end).unwrap_or("");
        let text = truncate_chars(section.trim_end(), max);
        Ok(ToolOutput::text(bounded(json!({
            "path": a.path,
            "heading": h.title,
            "heading_path": crate::extract::heading_path_at(&doc.headings, h.offset),
            "level": h.level,
            "text": text,
            "outline": outline,
        }))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_center_on_a_query_term() {
        let terms = crate::store::analyze("flutter");
        let text = format!(
            "{} Flutter happens at speed. {}",
            "a ".repeat(300),
            "b ".repeat(300)
        );
        let s = snippet(&text, &terms, 60);
        assert!(s.contains("Flutter"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'));
    }
}
