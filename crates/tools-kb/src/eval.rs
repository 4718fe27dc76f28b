//! Retrieval evaluation on a collection in BEIR layout (`corpus.jsonl`, `queries.jsonl`,
//! `qrels/test.tsv`): nDCG@10 with graded gains (2^g − 1) and recall@100, per retrieval profile.
//! `cargo xtask eval-retrieval` runs it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::chunk::Chunker;
use crate::error::{KbError, Result};
use crate::extract::{ContentType, Extracted, Heading};
use crate::kb::KnowledgeBase;
use crate::retrieve::{Profile, rrf};
use crate::store::{FileRecord, Filters, Hit, Snapshot};

/// A collection: documents, queries and graded judgments.
#[derive(Debug, Clone, Default)]
pub struct Collection {
    /// `(id, title, text)`.
    pub corpus: Vec<(String, String, String)>,
    /// `(id, text)`.
    pub queries: Vec<(String, String)>,
    /// query id → document id → gain.
    pub qrels: HashMap<String, HashMap<String, u32>>,
}

fn read_jsonl(path: &Path) -> Result<Vec<serde_json::Value>> {
    let f = std::fs::File::open(path).map_err(|e| KbError::io(path, e))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| KbError::io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        out.push(serde_json::from_str(&line).map_err(|e| {
            KbError::InvalidRequest(format!("{}, line {}: {e}", path.display(), i + 1))
        })?);
    }
    Ok(out)
}

fn field(v: &serde_json::Value, key: &str) -> String {
    match v.get(key) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) if !other.is_null() => other.to_string(),
        _ => String::new(),
    }
}

/// Load a BEIR collection from `dir`.
///
/// # Errors
/// [`KbError::Io`] or [`KbError::InvalidRequest`] naming the file and line that is wrong.
pub fn load(dir: &Path) -> Result<Collection> {
    let corpus = read_jsonl(&dir.join("corpus.jsonl"))?
        .iter()
        .map(|v| (field(v, "_id"), field(v, "title"), field(v, "text")))
        .collect();
    let queries = read_jsonl(&dir.join("queries.jsonl"))?
        .iter()
        .map(|v| (field(v, "_id"), field(v, "text")))
        .collect();
    let qrels_path = dir.join("qrels").join("test.tsv");
    let text = std::fs::read_to_string(&qrels_path).map_err(|e| KbError::io(&qrels_path, e))?;
    let mut qrels: HashMap<String, HashMap<String, u32>> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let parts: Vec<&str> = line.split('\t').collect();
        if parts.len() < 3 {
            continue;
        }
        let Ok(gain) = parts[2].trim().parse::<i64>() else {
            if i == 0 {
                continue; // header
            }
            return Err(KbError::InvalidRequest(format!(
                "{}, line {}: the score is not a number",
                qrels_path.display(),
                i + 1
            )));
        };
        qrels
            .entry(parts[0].trim().to_string())
            .or_default()
            .insert(parts[1].trim().to_string(), gain.max(0) as u32);
    }
    Ok(Collection {
        corpus,
        queries,
        qrels,
    })
}

/// nDCG@k of `ranked` document ids with graded gains `2^g − 1`.
pub fn ndcg_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    let gain = |g: u32| 2f64.powi(g as i32) - 1.0;
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, d)| gain(judged.get(d).copied().unwrap_or(0)) / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<u32> = judged.values().copied().filter(|g| *g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| gain(*g) / ((i + 2) as f64).log2())
        .sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

/// Share of the relevant documents (gain > 0) found in the first `k` of `ranked`.
pub fn recall_at(ranked: &[String], judged: &HashMap<String, u32>, k: usize) -> f64 {
    let relevant: HashSet<&String> = judged
        .iter()
        .filter(|(_, g)| **g > 0)
        .map(|(d, _)| d)
        .collect();
    if relevant.is_empty() {
        return 0.0;
    }
    let found = ranked
        .iter()
        .take(k)
        .filter(|d| relevant.contains(d))
        .count();
    found as f64 / relevant.len() as f64
}

/// One profile's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileScore {
    /// Mean nDCG@10.
    pub ndcg_at_10: f64,
    /// Mean recall@100.
    pub recall_at_100: f64,
    /// Queries evaluated (those with at least one relevant document).
    pub queries: usize,
    /// `llm_rerank` only: the model that re-ranked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reranker: Option<String>,
    /// `llm_rerank` only: queries whose re-ranking failed and kept the hybrid order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank_failures: Option<usize>,
    /// Set when the profile could not run as itself and these figures are another's:
    /// `llm_rerank` without an LLM is scored as `hybrid_rrf`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scored_as: Option<String>,
}

/// Ingest the collection's documents into `kb` (a fresh index): one file record per
/// document, the title as its heading.
///
/// # Errors
/// When the index or the embedder fails.
pub fn ingest_collection(kb: &KnowledgeBase, collection: &Collection) -> Result<()> {
    let config = kb.config();
    let chunker = Chunker::new(config.chunk_size, config.chunk_overlap)?;
    let store = kb.store();
    let mut writer = store.writer()?;
    for batch in collection.corpus.chunks(256) {
        let mut drafts = Vec::new();
        for (id, title, text) in batch {
            let doc = Extracted {
                text: text.clone(),
                content_type: ContentType::Text,
                headings: if title.is_empty() {
                    Vec::new()
                } else {
                    vec![Heading {
                        offset: 0,
                        level: 1,
                        title: title.clone(),
                    }]
                },
                markdown: false,
            };
            let mut chunks = chunker.chunk(&doc);
            if chunks.is_empty() {
                chunks.push(crate::chunk::ChunkDraft {
                    index: 0,
                    text: title.clone(),
                    heading_path: Vec::new(),
                });
            }
            drafts.push((id, chunks));
        }
        let vectors = match kb.embedder() {
            None => None,
            Some(e) => {
                let inputs: Vec<String> = drafts
                    .iter()
                    .flat_map(|(_, c)| c.iter().map(crate::ingest::embedding_input))
                    .collect();
                let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
                Some(e.embed(&refs)?)
            }
        };
        let mut offset = 0;
        for (id, chunks) in &drafts {
            let record = FileRecord {
                path: (*id).clone(),
                file_hash: String::new(),
                mtime: 0,
                size: 0,
                chunks: chunks.len() as u64,
                ext: "txt".into(),
                content_type: "text".into(),
            };
            let v = vectors
                .as_ref()
                .map(|all| &all[offset..offset + chunks.len()]);
            offset += chunks.len();
            writer.add_file(&record, chunks, v)?;
        }
    }
    writer.commit()
}

/// The LLM that scores the `llm_rerank` profile, and how many candidates it re-orders.
pub struct Reranker {
    /// The model.
    pub provider: std::sync::Arc<dyn lsm_providers::Provider>,
    /// Candidates (chunks of the hybrid ranking) it re-orders; the rest keep their place.
    pub candidates: usize,
}

impl std::fmt::Debug for Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reranker")
            .field("model", &self.provider.model())
            .field("candidates", &self.candidates)
            .finish()
    }
}

/// The chunks ranked by `profile` for `query` (`llm_rerank`: its first stage, hybrid_rrf),
/// at most `pool`.
fn rank_chunks(
    kb: &KnowledgeBase,
    snapshot: &Snapshot,
    profile: Profile,
    query: &str,
    pool: usize,
) -> Result<Vec<Hit>> {
    let settings = &kb.config().retrieval;
    let filters = Filters::default();
    let dense = |q: &str| -> Result<Vec<Hit>> {
        match (kb.embedder(), snapshot.dense()) {
            (Some(e), Some(view)) => {
                let v = e.embed(&[q])?;
                Ok(v.first()
                    .map(|v| view.search(v, &filters, pool))
                    .unwrap_or_default())
            }
            _ => Ok(Vec::new()),
        }
    };
    Ok(match profile {
        Profile::Lexical => snapshot.lexical(query, &filters, pool)?,
        Profile::DenseOnly => dense(query)?,
        Profile::HybridRrf | Profile::LlmRerank => {
            let d = dense(query)?;
            let l = snapshot.lexical(query, &filters, pool)?;
            if d.is_empty() {
                l
            } else {
                rrf(
                    &[(&d, settings.dense_weight), (&l, settings.lexical_weight)],
                    settings.rrf_k,
                )
            }
        }
    })
}

/// Document ids in the order of their best chunk in `hits`, at most `limit`.
fn documents(snapshot: &Snapshot, hits: &[Hit], limit: usize) -> Result<Vec<String>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for h in hits {
        let path = snapshot.chunk(h.addr)?.path;
        if seen.insert(path.clone()) {
            out.push(path);
            if out.len() == limit {
                break;
            }
        }
    }
    Ok(out)
}

/// Re-order the first `reranker.candidates` of `hits` with the LLM, as the pipeline does.
/// `Err` carries why the hybrid order was kept.
fn rerank_hits(
    runtime: &tokio::runtime::Runtime,
    reranker: &Reranker,
    snapshot: &Snapshot,
    query: &str,
    hits: &mut [Hit],
) -> Result<std::result::Result<(), crate::rerank::RerankError>> {
    let n = reranker.candidates.min(hits.len());
    let records = hits[..n]
        .iter()
        .map(|h| snapshot.chunk(h.addr))
        .collect::<Result<Vec<_>>>()?;
    let headings: Vec<String> = records.iter().map(|r| r.heading_path.join(" > ")).collect();
    let passages: Vec<crate::rerank::Passage<'_>> = records
        .iter()
        .zip(&headings)
        .map(|(r, h)| crate::rerank::Passage {
            heading: h,
            text: &r.text,
        })
        .collect();
    let answer = runtime.block_on(crate::rerank::rerank_order(
        reranker.provider.as_ref(),
        query,
        &passages,
    ));
    Ok(answer.map(|(order, _)| {
        let reordered: Vec<Hit> = order.iter().map(|&i| hits[i]).collect();
        hits[..n].copy_from_slice(&reordered);
    }))
}

/// Evaluate `profiles` on `collection` over an index already holding it. `llm_rerank` is
/// re-ranked by `reranker` when there is one (one LLM call per query), else scored as
/// `hybrid_rrf` and marked so (`scored_as`). Call it outside an async runtime: the LLM calls
/// run on a runtime of its own.
///
/// # Errors
/// When the index or the embedder fails (a failed LLM call only counts in
/// `rerank_failures`).
pub fn evaluate(
    kb: &KnowledgeBase,
    collection: &Collection,
    profiles: &[Profile],
    reranker: Option<&Reranker>,
) -> Result<BTreeMap<String, ProfileScore>> {
    let snapshot = kb.store().snapshot()?;
    let runtime = match reranker {
        Some(_) if profiles.contains(&Profile::LlmRerank) => Some(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| KbError::io(Path::new("tokio runtime"), e))?,
        ),
        _ => None,
    };
    let mut out = BTreeMap::new();
    for &profile in profiles {
        let rerank = match (profile, reranker, &runtime) {
            (Profile::LlmRerank, Some(r), Some(rt)) => Some((r, rt)),
            _ => None,
        };
        let (mut ndcg, mut recall, mut n, mut failures) = (0.0, 0.0, 0usize, 0usize);
        for (qid, text) in &collection.queries {
            let Some(judged) = collection.qrels.get(qid) else {
                continue;
            };
            if !judged.values().any(|g| *g > 0) {
                continue;
            }
            let mut hits = rank_chunks(kb, &snapshot, profile, text, 200)?;
            if let Some((r, rt)) = rerank
                && let Err(reason) = rerank_hits(rt, r, &snapshot, text, &mut hits)?
            {
                tracing::warn!(query = %qid, "re-ranking kept the hybrid order: {reason}");
                failures += 1;
            }
            let ranked = documents(&snapshot, &hits, 100)?;
            ndcg += ndcg_at(&ranked, judged, 10);
            recall += recall_at(&ranked, judged, 100);
            n += 1;
        }
        let d = n.max(1) as f64;
        let is_rerank = profile == Profile::LlmRerank;
        out.insert(
            profile.as_str().to_string(),
            ProfileScore {
                ndcg_at_10: (ndcg / d * 1e4).round() / 1e4,
                recall_at_100: (recall / d * 1e4).round() / 1e4,
                queries: n,
                reranker: rerank.map(|(r, _)| r.provider.model().to_string()),
                rerank_failures: rerank.map(|_| failures),
                scored_as: (is_rerank && rerank.is_none()).then(|| "hybrid_rrf".to_string()),
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(pairs: &[(&str, u32)]) -> HashMap<String, u32> {
        pairs.iter().map(|(d, g)| (d.to_string(), *g)).collect()
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ndcg_uses_graded_exponential_gains() {
        let j = judged(&[("a", 3), ("b", 1)]);
        assert!((ndcg_at(&ids(&["a", "b"]), &j, 10) - 1.0).abs() < 1e-12);
        // Swapped: (1/1 + 7/log2 3) / (7/1 + 1/log2 3).
        let swapped = (1.0 + 7.0 / 3f64.log2()) / (7.0 + 1.0 / 3f64.log2());
        assert!((ndcg_at(&ids(&["b", "a"]), &j, 10) - swapped).abs() < 1e-12);
        assert_eq!(ndcg_at(&ids(&["x"]), &j, 10), 0.0);
        // Beyond k counts for nothing.
        assert_eq!(ndcg_at(&ids(&["x", "a"]), &j, 1), 0.0);
    }

    #[test]
    fn recall_counts_relevant_found_within_k() {
        let j = judged(&[("a", 2), ("b", 1), ("c", 0)]);
        assert_eq!(recall_at(&ids(&["a", "c", "x"]), &j, 100), 0.5);
        assert_eq!(recall_at(&ids(&["x", "a", "b"]), &j, 2), 0.5);
    }

    #[test]
    fn a_beir_folder_loads_with_its_header_skipped() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("corpus.jsonl"),
            "{\"_id\": \"1\", \"title\": \"T\", \"text\": \"x\"}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("queries.jsonl"),
            "{\"_id\": \"q\", \"text\": \"x\"}\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("qrels")).unwrap();
        std::fs::write(
            dir.path().join("qrels/test.tsv"),
            "query-id\tcorpus-id\tscore\nq\t1\t2\n",
        )
        .unwrap();
        let c = load(dir.path()).unwrap();
        assert_eq!(c.corpus, [("1".into(), "T".into(), "x".into())]);
        assert_eq!(c.qrels["q"]["1"], 2);
    }
}
