//! The stages of [`Pipeline::build_sources`], in order: remote sources, the query vector,
//! lexical and dense retrieval with their fusion, candidate loading with relevance,
//! near-duplicate removal, LLM re-ranking, the relevance floor, and MMR with the per-file cap.
//! Each records itself in the [`RetrievalTrace`].

use std::collections::HashSet;
use std::time::Instant;

use super::Pipeline;
use super::types::{ContextPackage, QueryRequest, RetrievalTrace, Source};
use crate::config::RetrievalSettings;
use crate::error::{KbError, Result};
use crate::kb::KnowledgeBase;
use crate::mode::ModeConfig;
use crate::remote::RemoteResult;
use crate::retrieve::{self, MmrItem, Profile};
use crate::store::{Hit, Snapshot};

impl Pipeline {
    /// Ask the remote sources when the mode enables them and the policy allows URL access;
    /// failures become notes.
    pub(super) async fn ask_remote(
        &self,
        query: &str,
        mode: &ModeConfig,
        trace: &mut RetrievalTrace,
    ) -> Vec<RemoteResult> {
        let mut remote_results: Vec<RemoteResult> = Vec::new();
        if !mode.remote_policy.enabled {
            return remote_results;
        }
        if !self.policy.allow_url_access {
            trace
                .notes
                .push("remote sources skipped: the sandbox does not allow URL access".into());
        } else if self.remote.is_empty() {
            trace.notes.push("remote sources: none configured".into());
        } else {
            let t = Instant::now();
            let wanted = &mode.remote_policy.remote_providers;
            let mut asked = 0;
            for p in &self.remote {
                if !wanted.is_empty() && !wanted.iter().any(|w| w == p.name()) {
                    continue;
                }
                asked += 1;
                match p.search(query, mode.remote_policy.max_results).await {
                    Ok(r) => remote_results.extend(r),
                    Err(e) => trace.notes.push(format!("remote source {}: {e}", p.name())),
                }
            }
            remote_results.truncate(mode.remote_policy.max_results);
            trace.record("remote", Some(t), asked, remote_results.len(), None);
        }
        remote_results
    }

    /// Ask the LLM to order `cands` by relevance; keeps the order on any failure. Returns a
    /// note for the trace.
    ///
    /// # Errors
    /// [`KbError::BudgetExhausted`] when the run's budget refused the call: the caller must
    /// hear of it, not get a quietly unranked list.
    pub(super) async fn llm_rerank(&self, query: &str, cands: &mut [Candidate]) -> Result<String> {
        let Some(provider) = &self.provider else {
            return Ok("no LLM provider: kept the hybrid order".into());
        };
        if cands.len() < 2 {
            return Ok("nothing to re-rank".into());
        }
        let passages: Vec<crate::rerank::Passage<'_>> = cands
            .iter()
            .map(|c| crate::rerank::Passage {
                heading: &c.source.heading,
                text: &c.source.text,
            })
            .collect();
        let (order, ranked) =
            match crate::rerank::rerank_order(provider.as_ref(), query, &passages).await {
                Ok(r) => r,
                Err(crate::rerank::RerankError::Llm(e)) if e.is_budget_exhausted() => {
                    return Err(KbError::BudgetExhausted(e.to_string()));
                }
                Err(reason) => return Ok(format!("{reason}: kept the hybrid order")),
            };
        let reordered: Vec<Candidate> = order.iter().map(|&i| cands[i].clone()).collect();
        let top = reordered.first().map_or(0.0, |c| c.source.score);
        for (slot, (rank, mut c)) in cands.iter_mut().zip(reordered.into_iter().enumerate()) {
            // Scores follow the new order so later stages keep it.
            c.source.score = top * (1.0 - rank as f32 / (2.0 * ranked.max(1) as f32));
            *slot = c;
        }
        Ok(format!("the LLM ranked {ranked} passages"))
    }
}

/// The query vector, when the profile uses one and there is an embedder; otherwise the
/// trace says the profile fell back to lexical.
pub(super) fn embed_query(
    kb: &KnowledgeBase,
    snapshot: &Snapshot,
    profile: Profile,
    query: &str,
    trace: &mut RetrievalTrace,
) -> Result<Option<Vec<f32>>> {
    if !profile.uses_dense() {
        return Ok(None);
    }
    match (kb.embedder(), snapshot.dense()) {
        (Some(e), Some(_)) => {
            let t = Instant::now();
            let v = e.embed(&[query])?;
            let query_vec = v.into_iter().next();
            trace.record(
                "embed_query",
                Some(t),
                1,
                usize::from(query_vec.is_some()),
                None,
            );
            Ok(query_vec)
        }
        _ => {
            trace.effective_profile = Profile::Lexical.as_str().to_string();
            trace.notes.push(format!(
                "{} needs an embedder and the index has none: fell back to lexical",
                profile.as_str()
            ));
            Ok(None)
        }
    }
}

/// Lexical and dense retrieval of `pool` candidates each (as the profile asks), fused with
/// weighted RRF for `hybrid_rrf`.
pub(super) fn retrieve(
    snapshot: &Snapshot,
    request: &QueryRequest,
    profile: Profile,
    query_vec: Option<&[f32]>,
    pool: usize,
    settings: &RetrievalSettings,
    trace: &mut RetrievalTrace,
) -> Result<Vec<Hit>> {
    let filtered = (!request.filters.is_empty()).then(|| "filters applied".to_string());
    let dense_alone = profile == Profile::DenseOnly && query_vec.is_some();
    let lexical = if dense_alone {
        Vec::new()
    } else {
        let t = Instant::now();
        let hits = snapshot.lexical(&request.query, &request.filters, pool)?;
        trace.record("lexical", Some(t), pool, hits.len(), filtered.clone());
        hits
    };
    let dense_hits: Vec<Hit> = match (query_vec, snapshot.dense()) {
        (Some(v), Some(view)) => {
            let t = Instant::now();
            let hits = view.search(v, &request.filters, pool);
            trace.record("dense", Some(t), view.len(), hits.len(), filtered);
            hits
        }
        _ => Vec::new(),
    };
    Ok(if query_vec.is_none() {
        lexical
    } else if profile == Profile::DenseOnly {
        dense_hits
    } else {
        let t = Instant::now();
        let f = retrieve::rrf(
            &[
                (&dense_hits, settings.dense_weight),
                (&lexical, settings.lexical_weight),
            ],
            settings.rrf_k,
        );
        trace.record(
            "fuse_rrf",
            Some(t),
            dense_hits.len() + lexical.len(),
            f.len(),
            Some(format!(
                "k={} dense_weight={} lexical_weight={}",
                settings.rrf_k, settings.dense_weight, settings.lexical_weight
            )),
        );
        f
    })
}

/// A candidate while post-processing.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    pub(super) source: Source,
    pub(super) vector: Option<Vec<f32>>,
}

pub(super) fn load_candidates(
    snapshot: &Snapshot,
    hits: &[Hit],
    limit: usize,
    query_vec: Option<&[f32]>,
    query_terms: &[String],
) -> Result<Vec<Candidate>> {
    let hits = &hits[..hits.len().min(limit)];
    let vectors: Vec<Option<Vec<f32>>> = hits
        .iter()
        .map(|h| {
            snapshot
                .dense()
                .and_then(|d| d.vector_of(h.addr))
                .map(<[f32]>::to_vec)
        })
        .collect();
    // Without a query vector, relevance is the share of query terms a chunk holds, read
    // from the postings rather than by re-analyzing the text.
    let coverage = if query_vec.is_some() && vectors.iter().all(Option::is_some) {
        Vec::new()
    } else {
        let addrs: Vec<tantivy::DocAddress> = hits.iter().map(|h| h.addr).collect();
        snapshot.term_matches(query_terms, &addrs)?
    };
    let mut out = Vec::with_capacity(hits.len());
    for (i, (hit, vector)) in hits.iter().zip(vectors).enumerate() {
        let rec = snapshot.chunk(hit.addr)?;
        let relevance = match (query_vec, vector.as_deref()) {
            (Some(q), Some(v)) => crate::store::dot(q, v).clamp(0.0, 1.0),
            _ if query_terms.is_empty() => 0.0,
            _ => coverage.get(i).copied().unwrap_or(0) as f32 / query_terms.len() as f32,
        };
        out.push(Candidate {
            source: Source {
                label: String::new(),
                heading: rec.heading(),
                chunk_id: rec.chunk_id,
                path: rec.path,
                ext: rec.ext,
                content_type: rec.content_type,
                chunk_index: rec.chunk_index,
                score: hit.score,
                relevance: (relevance * 1000.0).round() / 1000.0,
                text: rec.text,
            },
            vector,
        });
    }
    Ok(out)
}

/// Drop near-duplicates (MinHash), keeping the better-ranked of each pair.
pub(super) fn dedupe(cands: &mut Vec<Candidate>, threshold: f32, trace: &mut RetrievalTrace) {
    let t = Instant::now();
    let before = cands.len();
    let texts: Vec<&str> = cands.iter().map(|c| c.source.text.as_str()).collect();
    let keep = retrieve::near_duplicates_removed(&texts, threshold);
    let keep: HashSet<usize> = keep.into_iter().collect();
    let mut i = 0;
    cands.retain(|_| {
        let k = keep.contains(&i);
        i += 1;
        k
    });
    trace.record(
        "dedupe",
        Some(t),
        before,
        cands.len(),
        Some(format!("MinHash threshold {threshold}")),
    );
}

/// Relevance floor: keep what passes; when nothing does, keep the closest few for the
/// fallback answer. Sets the package's best relevance and whether it is below the floor.
pub(super) fn relevance_floor(
    cands: &mut Vec<Candidate>,
    min_rel: f32,
    package: &mut ContextPackage,
    trace: &mut RetrievalTrace,
) {
    let best = cands
        .iter()
        .map(|c| c.source.relevance)
        .fold(0.0f32, f32::max);
    package.relevance = best;
    package.below_min_relevance = cands.is_empty() || best < min_rel;
    if !package.below_min_relevance {
        let before = cands.len();
        cands.retain(|c| c.source.relevance >= min_rel);
        trace.record(
            "min_relevance",
            None,
            before,
            cands.len(),
            Some(format!("min_relevance {min_rel}")),
        );
    } else if !cands.is_empty() {
        trace.notes.push(format!(
            "best relevance {best:.3} is below the mode's min_relevance {min_rel}"
        ));
    }
}

/// MMR + per-file cap + top `k`.
pub(super) fn diversify(
    cands: Vec<Candidate>,
    k: usize,
    settings: &RetrievalSettings,
    trace: &mut RetrievalTrace,
) -> Vec<Candidate> {
    let t = Instant::now();
    let before = cands.len();
    let max_score = cands.iter().map(|c| c.source.score).fold(0.0f32, f32::max);
    let items: Vec<MmrItem<'_>> = cands
        .iter()
        .enumerate()
        .map(|(rank, c)| MmrItem {
            // Rank order matters more than raw score scales (BM25, cosine, RRF differ).
            relevance: if max_score > 0.0 {
                0.5 * (c.source.score / max_score) + 0.5 / (1.0 + rank as f32 * 0.1)
            } else {
                1.0 / (1.0 + rank as f32)
            },
            vector: c.vector.as_deref(),
            // Words only matter when there is no vector to compare.
            words: if c.vector.is_some() {
                HashSet::new()
            } else {
                c.source
                    .text
                    .split(|ch: char| !ch.is_alphanumeric())
                    .filter(|w| w.len() > 2)
                    .map(str::to_lowercase)
                    .collect()
            },
            file: c.source.path.as_str(),
        })
        .collect();
    let picked = retrieve::mmr(&items, k, settings.mmr_lambda, settings.max_per_file);
    drop(items);
    let mut slots: Vec<Option<Candidate>> = cands.into_iter().map(Some).collect();
    let chosen: Vec<Candidate> = picked.iter().filter_map(|&i| slots[i].take()).collect();
    trace.record(
        "mmr",
        Some(t),
        before,
        chosen.len(),
        Some(format!(
            "lambda {} max_per_file {} k {k}",
            settings.mmr_lambda, settings.max_per_file
        )),
    );
    chosen
}

/// Remote results follow the local sources, labelled and citable like them.
pub(super) fn append_remote(package: &mut ContextPackage, remote_results: &[RemoteResult]) {
    let first = package.candidates.len();
    for (i, r) in remote_results.iter().enumerate() {
        package.candidates.push(Source {
            label: format!("S{}", first + i + 1),
            chunk_id: format!("remote:{}:{}", r.provider, i + 1),
            path: r.url.clone(),
            ext: String::new(),
            content_type: "remote".into(),
            heading: r.title.clone(),
            chunk_index: 0,
            score: 0.0,
            relevance: 0.0,
            text: r.snippet.clone(),
        });
    }
    package.remote_sources = remote_results
        .iter()
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect();
}
