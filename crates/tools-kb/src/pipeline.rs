//! The query pipeline: `build_sources` → `synthesize_context` → `execute`, chained by `run`.
//!
//! - [`Pipeline::build_sources`]: resolve and check the mode, retrieve with its profile
//!   (filters applied inside retrieval), drop near-duplicates, optionally let the LLM re-rank,
//!   pick a diverse set with MMR under a per-file cap, keep the top `k`, and score relevance.
//!   Every stage is timed and counted in the [`RetrievalTrace`].
//! - [`Pipeline::synthesize_context`]: label the sources `[S1]`, `[S2]`, … and write the
//!   context block within the token budget.
//! - [`Pipeline::execute`]: ask the LLM (through the `Provider` trait) for an answer citing
//!   `[S#]`; citations are checked against the labels, unknown ones dropped and reported.
//!   When there is nothing relevant enough, or the LLM fails, the answer is a fallback that
//!   lists the closest excerpts.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use lsm_providers::{CallOptions, LlmRequest, Message, Provider};
use serde::{Deserialize, Serialize};

use crate::error::{KbError, Result};
use crate::kb::KnowledgeBase;
use crate::mode::{self, ModeConfig, ModePolicy, ModeSpec};
use crate::retrieve::{self, MmrItem, Profile};
use crate::store::{Filters, Hit, Snapshot, analyze};

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
    /// Why the answer is a fallback (no LLM answer), if it is.
    pub fallback: Option<String>,
    /// The conversation id.
    pub conversation_id: String,
    /// The provider's response id, for chaining the next query.
    pub response_id: Option<String>,
}

/// The pipeline over one knowledge base, with the provider that writes answers.
pub struct Pipeline {
    kb: Arc<KnowledgeBase>,
    provider: Option<Arc<dyn Provider>>,
    policy: ModePolicy,
    remote: Vec<Arc<dyn crate::remote::RemoteProvider>>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("kb", &self.kb)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// Milliseconds since `t`.
fn ms(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

/// Cut `s` to at most `n` characters, marking the cut.
pub fn truncate_chars(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n).collect();
    out.push('…');
    out
}

impl Pipeline {
    /// A pipeline over `kb`; `provider` writes answers (without one, every answer is the
    /// fallback); `policy` bounds what a composed mode may ask for.
    pub fn new(
        kb: Arc<KnowledgeBase>,
        provider: Option<Arc<dyn Provider>>,
        policy: ModePolicy,
    ) -> Self {
        Pipeline {
            kb,
            provider,
            policy,
            remote: Vec::new(),
        }
    }

    /// Remote sources the pipeline may ask when a mode enables them and the sandbox allows
    /// URL access.
    pub fn with_remote(mut self, remote: Vec<Arc<dyn crate::remote::RemoteProvider>>) -> Self {
        self.remote = remote;
        self
    }

    /// The remote sources.
    pub fn remote(&self) -> &[Arc<dyn crate::remote::RemoteProvider>] {
        &self.remote
    }

    /// The knowledge base.
    pub fn kb(&self) -> &Arc<KnowledgeBase> {
        &self.kb
    }

    /// The provider, if any.
    pub fn provider(&self) -> Option<&Arc<dyn Provider>> {
        self.provider.as_ref()
    }

    /// The mode policy.
    pub fn policy(&self) -> &ModePolicy {
        &self.policy
    }

    /// Resolve the request's mode and check it: a composed mode must pass the policy; a named
    /// mode's profile must be allowed (its remote sources are simply not used without URL
    /// access).
    ///
    /// # Errors
    /// [`KbError::InvalidRequest`] saying what is refused.
    pub fn resolve_mode(&self, spec: Option<&ModeSpec>) -> Result<ModeConfig> {
        let config = self.kb.config();
        let default = ModeSpec::Name(config.default_mode.clone());
        let spec = spec.unwrap_or(&default);
        let mode = mode::resolve(spec, &config.modes)?;
        match spec {
            ModeSpec::Config(_) => self.policy.validate(&mode)?,
            ModeSpec::Name(_) => {
                let mut checked = mode.clone();
                checked.remote_policy.enabled = false;
                self.policy.validate(&checked)?;
            }
        }
        Ok(mode)
    }

    /// Retrieve and post-process sources for `request`.
    ///
    /// # Errors
    /// [`KbError::InvalidRequest`] for a refused mode or an empty query; [`KbError::Index`] or
    /// [`KbError::Embedder`] when retrieval itself fails.
    pub async fn build_sources(&self, request: QueryRequest) -> Result<ContextPackage> {
        let started = Instant::now();
        if request.query.trim().is_empty() {
            return Err(KbError::InvalidRequest("the query is empty".into()));
        }
        let mode = self.resolve_mode(request.mode.as_ref())?;
        let profile = Profile::parse(&mode.retrieval_profile)?;
        let k = request.k.unwrap_or(mode.local_policy.k).clamp(1, 100);
        let settings = self.kb.config().retrieval.clone();
        let mut trace = RetrievalTrace {
            profile: profile.as_str().to_string(),
            effective_profile: profile.as_str().to_string(),
            embedder: self.kb.embedder().map(|e| e.model().to_string()),
            ..Default::default()
        };
        let mut remote_results: Vec<crate::remote::RemoteResult> = Vec::new();
        if mode.remote_policy.enabled {
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
                    match p
                        .search(&request.query, mode.remote_policy.max_results)
                        .await
                    {
                        Ok(r) => remote_results.extend(r),
                        Err(e) => trace.notes.push(format!("remote source {}: {e}", p.name())),
                    }
                }
                remote_results.truncate(mode.remote_policy.max_results);
                trace.stages.push(TraceStage {
                    stage: "remote".into(),
                    ms: ms(t),
                    input: asked,
                    output: remote_results.len(),
                    note: None,
                });
            }
        }
        let conversation_id = request
            .conversation_id
            .clone()
            .unwrap_or_else(|| format!("kb-{}", uuid::Uuid::new_v4().simple()));
        let mut package = ContextPackage {
            request: request.clone(),
            mode: mode.clone(),
            candidates: Vec::new(),
            remote_sources: Vec::new(),
            retrieval_trace: RetrievalTrace::default(),
            context_block: String::new(),
            source_labels: BTreeMap::new(),
            starting_prompt: request.starting_prompt.clone(),
            conversation_id,
            prior_response_id: request.prior_response_id.clone(),
            relevance: 0.0,
            below_min_relevance: true,
        };
        if !mode.local_policy.enabled {
            trace
                .notes
                .push("local retrieval disabled by the mode".into());
            trace.total_ms = ms(started);
            package.retrieval_trace = trace;
            return Ok(package);
        }

        let snapshot = self.kb.store().snapshot()?;
        let query_terms = analyze(&request.query);

        // The query vector, when the profile uses one and there is an embedder.
        let mut query_vec: Option<Vec<f32>> = None;
        if profile.uses_dense() {
            match (self.kb.embedder(), snapshot.dense()) {
                (Some(e), Some(_)) => {
                    let t = Instant::now();
                    let v = e.embed(&[request.query.as_str()])?;
                    query_vec = v.into_iter().next();
                    trace.stages.push(TraceStage {
                        stage: "embed_query".into(),
                        ms: ms(t),
                        input: 1,
                        output: usize::from(query_vec.is_some()),
                        note: None,
                    });
                }
                _ => {
                    trace.effective_profile = Profile::Lexical.as_str().to_string();
                    trace.notes.push(format!(
                        "{} needs an embedder and the index has none: fell back to lexical",
                        profile.as_str()
                    ));
                }
            }
        }

        // Retrieval.
        let pool = settings.candidates.max(k);
        let t = Instant::now();
        let lexical = if profile == Profile::DenseOnly && query_vec.is_some() {
            Vec::new()
        } else {
            snapshot.lexical(&request.query, &request.filters, pool)?
        };
        if !(profile == Profile::DenseOnly && query_vec.is_some()) {
            trace.stages.push(TraceStage {
                stage: "lexical".into(),
                ms: ms(t),
                input: pool,
                output: lexical.len(),
                note: (!request.filters.is_empty()).then(|| "filters applied".to_string()),
            });
        }
        let dense_hits: Vec<Hit> = match (&query_vec, snapshot.dense()) {
            (Some(v), Some(view)) => {
                let t = Instant::now();
                let hits = view.search(v, &request.filters, pool);
                trace.stages.push(TraceStage {
                    stage: "dense".into(),
                    ms: ms(t),
                    input: view.len(),
                    output: hits.len(),
                    note: (!request.filters.is_empty()).then(|| "filters applied".to_string()),
                });
                hits
            }
            _ => Vec::new(),
        };
        let fused: Vec<Hit> = if query_vec.is_none() {
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
            trace.stages.push(TraceStage {
                stage: "fuse_rrf".into(),
                ms: ms(t),
                input: dense_hits.len() + lexical.len(),
                output: f.len(),
                note: Some(format!(
                    "k={} dense_weight={} lexical_weight={}",
                    settings.rrf_k, settings.dense_weight, settings.lexical_weight
                )),
            });
            f
        };

        // Load the candidates and score their relevance. Post-processing looks at a few times
        // k: enough to dedupe, diversify and re-rank.
        let load = (3 * k).max(settings.rerank_candidates).max(20).min(pool);
        let t = Instant::now();
        let mut cands =
            load_candidates(&snapshot, &fused, load, query_vec.as_deref(), &query_terms)?;
        trace.stages.push(TraceStage {
            stage: "load".into(),
            ms: ms(t),
            input: fused.len().min(load),
            output: cands.len(),
            note: None,
        });

        // Near-duplicates.
        let t = Instant::now();
        let before = cands.len();
        let texts: Vec<&str> = cands.iter().map(|c| c.source.text.as_str()).collect();
        let keep = retrieve::near_duplicates_removed(&texts, settings.near_duplicate_threshold);
        let keep: HashSet<usize> = keep.into_iter().collect();
        let mut i = 0;
        cands.retain(|_| {
            let k = keep.contains(&i);
            i += 1;
            k
        });
        trace.stages.push(TraceStage {
            stage: "dedupe".into(),
            ms: ms(t),
            input: before,
            output: cands.len(),
            note: Some(format!(
                "MinHash threshold {}",
                settings.near_duplicate_threshold
            )),
        });

        // LLM re-ranking.
        if profile == Profile::LlmRerank {
            let t = Instant::now();
            let n = settings.rerank_candidates.min(cands.len());
            let note = self.llm_rerank(&request.query, &mut cands[..n]).await?;
            trace.stages.push(TraceStage {
                stage: "llm_rerank".into(),
                ms: ms(t),
                input: n,
                output: n,
                note: Some(note),
            });
        }

        // Relevance floor: keep what passes; when nothing does, keep the closest few for the
        // fallback answer.
        let min_rel = mode.local_policy.min_relevance;
        let best = cands
            .iter()
            .map(|c| c.source.relevance)
            .fold(0.0f32, f32::max);
        package.relevance = best;
        package.below_min_relevance = cands.is_empty() || best < min_rel;
        if !package.below_min_relevance {
            let before = cands.len();
            cands.retain(|c| c.source.relevance >= min_rel);
            trace.stages.push(TraceStage {
                stage: "min_relevance".into(),
                ms: 0.0,
                input: before,
                output: cands.len(),
                note: Some(format!("min_relevance {min_rel}")),
            });
        } else if !cands.is_empty() {
            trace.notes.push(format!(
                "best relevance {best:.3} is below the mode's min_relevance {min_rel}"
            ));
        }

        // MMR + per-file cap + top k.
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
        trace.stages.push(TraceStage {
            stage: "mmr".into(),
            ms: ms(t),
            input: before,
            output: chosen.len(),
            note: Some(format!(
                "lambda {} max_per_file {} k {k}",
                settings.mmr_lambda, settings.max_per_file
            )),
        });

        package.candidates = chosen
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                c.source.label = format!("S{}", i + 1);
                c.source
            })
            .collect();
        // Remote results follow the local sources, labelled and citable like them.
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
        trace.total_ms = ms(started);
        package.retrieval_trace = trace;
        Ok(package)
    }

    /// Ask the LLM to order `cands` by relevance; keeps the order on any failure. Returns a
    /// note for the trace.
    ///
    /// # Errors
    /// [`KbError::BudgetExhausted`] when the run's budget refused the call: the caller must
    /// hear of it, not get a quietly unranked list.
    async fn llm_rerank(&self, query: &str, cands: &mut [Candidate]) -> Result<String> {
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

    /// Label the sources and write the context block within the token budget.
    pub fn synthesize_context(&self, mut package: ContextPackage) -> ContextPackage {
        let budget_bytes = self.kb.config().context_token_budget.saturating_mul(3);
        let mut block = String::new();
        let mut labels = BTreeMap::new();
        for s in &package.candidates {
            let entry = format!("{}\n{}\n\n", source_header(s), s.text.trim());
            if !labels.is_empty() && block.len() + entry.len() > budget_bytes {
                break;
            }
            let entry = if entry.len() > budget_bytes {
                let cut: String = entry.chars().take(budget_bytes).collect();
                format!("{cut}\n\n")
            } else {
                entry
            };
            block.push_str(&entry);
            labels.insert(s.label.clone(), s.chunk_id.clone());
        }
        if labels.len() < package.candidates.len() {
            package.retrieval_trace.notes.push(format!(
                "context budget of {} tokens holds {} of {} sources",
                self.kb.config().context_token_budget,
                labels.len(),
                package.candidates.len()
            ));
        }
        package.context_block = block.trim_end().to_string();
        package.source_labels = labels;
        package
    }

    /// Answer `question` from a synthesized package. When there is nothing relevant enough,
    /// or the LLM fails, the answer is a fallback.
    ///
    /// # Errors
    /// [`KbError::BudgetExhausted`] when the run's budget refused the LLM call: no fallback
    /// answer, so the caller (the model, through the tool) learns the run can make no more.
    pub async fn execute(&self, question: &str, package: ContextPackage) -> Result<QueryResponse> {
        let fallback = |package: ContextPackage, reason: String| {
            let answer = fallback_answer(&package, &reason);
            QueryResponse {
                answer,
                conversation_id: package.conversation_id.clone(),
                package,
                citations: Vec::new(),
                invalid_citations: Vec::new(),
                fallback: Some(reason),
                response_id: None,
            }
        };
        if package.candidates.is_empty() && !package.mode.model_knowledge_policy.enabled {
            return Ok(fallback(
                package,
                "no_results: nothing in the knowledge base matched".into(),
            ));
        }
        if package.below_min_relevance && !package.candidates.is_empty() {
            let reason = format!(
                "low_relevance: the best source's relevance {:.3} is below the mode's minimum {}",
                package.relevance, package.mode.local_policy.min_relevance
            );
            return Ok(fallback(package, reason));
        }
        let Some(provider) = &self.provider else {
            return Ok(fallback(
                package,
                "no_llm: no LLM provider is configured".into(),
            ));
        };
        let request = LlmRequest {
            messages: synthesis_messages(question, &package),
            tools: Vec::new(),
            options: CallOptions {
                max_output_tokens: Some(self.kb.config().max_answer_tokens),
                previous_response_id: package.prior_response_id.clone(),
                prompt_cache_key: Some(format!("kb:{}", package.conversation_id)),
                ..Default::default()
            },
        };
        let response = match provider.complete(&request).await {
            Ok(r) if !r.text.trim().is_empty() => r,
            Ok(_) => {
                return Ok(fallback(
                    package,
                    "llm_empty: the LLM gave an empty answer".into(),
                ));
            }
            Err(e) if e.is_budget_exhausted() => {
                return Err(KbError::BudgetExhausted(e.to_string()));
            }
            Err(e) => return Ok(fallback(package, format!("llm_error: {e}"))),
        };
        let (answer, cited, invalid) = check_citations(&response.text, &package.source_labels);
        let citations = cited
            .iter()
            .filter_map(|label| {
                package
                    .candidates
                    .iter()
                    .find(|s| &s.label == label)
                    .map(|s| Citation {
                        label: s.label.clone(),
                        chunk_id: s.chunk_id.clone(),
                        path: s.path.clone(),
                        heading: s.heading.clone(),
                        chunk_index: s.chunk_index,
                    })
            })
            .collect();
        Ok(QueryResponse {
            answer,
            conversation_id: package.conversation_id.clone(),
            package,
            citations,
            invalid_citations: invalid,
            fallback: None,
            response_id: response.response_id,
        })
    }

    /// `build_sources` → `synthesize_context` → `execute`.
    ///
    /// # Errors
    /// As [`Pipeline::build_sources`] and [`Pipeline::execute`].
    pub async fn run(&self, request: QueryRequest) -> Result<QueryResponse> {
        let question = request.query.clone();
        let package = self.build_sources(request).await?;
        let package = self.synthesize_context(package);
        self.execute(&question, package).await
    }

    /// Re-read the sources of a package an agent hands back from the index, so an answer can
    /// only cite what is really there: unknown or stale chunk ids are dropped (and noted), and
    /// each source's text is the stored one.
    ///
    /// # Errors
    /// [`KbError::Index`] when the index cannot be read.
    pub fn refresh_package(&self, mut package: ContextPackage) -> Result<ContextPackage> {
        let snapshot = self.kb.store().snapshot()?;
        let mut kept = Vec::new();
        let mut dropped = 0;
        for s in package.candidates {
            match snapshot.find_chunk(&s.chunk_id)? {
                Some(addr) => {
                    let rec = snapshot.chunk(addr)?;
                    kept.push(Source {
                        text: rec.text.clone(),
                        path: rec.path.clone(),
                        heading: rec.heading(),
                        chunk_index: rec.chunk_index,
                        ext: rec.ext.clone(),
                        content_type: rec.content_type.clone(),
                        ..s
                    });
                }
                None => dropped += 1,
            }
        }
        for (i, s) in kept.iter_mut().enumerate() {
            s.label = format!("S{}", i + 1);
        }
        if dropped > 0 {
            package.retrieval_trace.notes.push(format!(
                "{dropped} source(s) of the given package are not in the index and were dropped"
            ));
        }
        package.candidates = kept;
        Ok(package)
    }
}

/// A candidate while post-processing.
#[derive(Debug, Clone)]
struct Candidate {
    source: Source,
    vector: Option<Vec<f32>>,
}

fn load_candidates(
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

/// `[S1] path (heading, chunk n)`.
pub fn source_header(s: &Source) -> String {
    if s.heading.is_empty() {
        format!("[{}] {} (chunk {})", s.label, s.path, s.chunk_index)
    } else {
        format!(
            "[{}] {} ({}, chunk {})",
            s.label, s.path, s.heading, s.chunk_index
        )
    }
}

fn synthesis_messages(question: &str, package: &ContextPackage) -> Vec<Message> {
    let mode = &package.mode;
    let mut system = String::from(
        "You answer questions from the user's own documents. The sources are numbered [S1], \
         [S2], …; cite the sources each statement rests on with their labels, e.g. [S1] or \
         [S1][S3]. Never cite a label that is not listed.",
    );
    match mode.synthesis_style.as_str() {
        "insight" => system.push_str(
            " Connect and compare what the sources say, point out patterns, tensions and gaps.",
        ),
        _ => system.push_str(
            " Say only what the sources support; if they do not answer the question, say so.",
        ),
    }
    if mode.model_knowledge_policy.enabled {
        if mode.model_knowledge_policy.require_label {
            system.push_str(
                " You may add your own knowledge, marking each such statement with [model knowledge].",
            );
        } else {
            system.push_str(" You may add your own knowledge.");
        }
    } else {
        system.push_str(" Do not add knowledge that is not in the sources.");
    }
    if let Some(extra) = mode
        .synthesis_instructions
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        system.push(' ');
        system.push_str(extra);
    }
    let mut messages = vec![Message::system(system)];
    if let Some(start) = package.starting_prompt.as_deref().filter(|s| !s.is_empty()) {
        messages.push(Message::system(start.to_string()));
    }
    let sources = if package.context_block.is_empty() {
        "(no sources were found)".to_string()
    } else {
        package.context_block.clone()
    };
    messages.push(Message::user(format!(
        "Question: {question}\n\nSources:\n{sources}"
    )));
    messages
}

/// Check the `[S#]` citations of `answer` against `labels`: returns the answer with unknown
/// labels removed, the valid labels in order of first use, and the unknown ones.
pub fn check_citations(
    answer: &str,
    labels: &BTreeMap<String, String>,
) -> (String, Vec<String>, Vec<String>) {
    let mut out = String::with_capacity(answer.len());
    let mut valid: Vec<String> = Vec::new();
    let mut invalid: Vec<String> = Vec::new();
    let mut rest = answer;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let inner = &after[..close];
        let parts: Vec<&str> = inner.split([',', ';']).map(str::trim).collect();
        let is_citation = !parts.is_empty()
            && parts.iter().all(|p| {
                p.len() > 1 && p.starts_with('S') && p[1..].chars().all(|c| c.is_ascii_digit())
            });
        if !is_citation {
            out.push('[');
            rest = after;
            continue;
        }
        let mut kept: Vec<&str> = Vec::new();
        for p in parts {
            if labels.contains_key(p) {
                kept.push(p);
                if !valid.iter().any(|v| v == p) {
                    valid.push(p.to_string());
                }
            } else if !invalid.iter().any(|v| v == p) {
                invalid.push(p.to_string());
            }
        }
        if !kept.is_empty() {
            out.push('[');
            out.push_str(&kept.join(", "));
            out.push(']');
        } else if out.ends_with(' ') && after[close + 1..].starts_with(['.', ',', ';', ' ']) {
            out.pop();
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    (out, valid, invalid)
}

/// The answer given without the LLM: why, then the closest excerpts.
pub fn fallback_answer(package: &ContextPackage, reason: &str) -> String {
    let mut s = match reason.split(':').next().unwrap_or("") {
        "no_results" => "No source in the knowledge base matches this question.".to_string(),
        "low_relevance" => format!(
            "No source is relevant enough to answer this question (best relevance {:.2}, the \
             mode asks for {}).",
            package.relevance, package.mode.local_policy.min_relevance
        ),
        "no_llm" => "No LLM provider is configured, so no answer was written.".to_string(),
        _ => format!("The LLM could not answer ({reason})."),
    };
    if !package.candidates.is_empty() {
        s.push_str(" The closest excerpts:\n");
        for c in package.candidates.iter().take(5) {
            s.push_str(&format!(
                "\n{}\n{}\n",
                source_header(c),
                truncate_chars(c.text.trim(), 300)
            ));
        }
    }
    s.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_to_unknown_labels_are_dropped_and_reported() {
        let labels: BTreeMap<String, String> = [("S1", "a"), ("S2", "b")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (text, valid, invalid) = check_citations(
            "Lift grows [S2]. Drag too [S9]. Both [S1, S7] matter [S2][S1]. See [note].",
            &labels,
        );
        assert_eq!(
            text,
            "Lift grows [S2]. Drag too. Both [S1] matter [S2][S1]. See [note]."
        );
        assert_eq!(valid, ["S2", "S1"]);
        assert_eq!(invalid, ["S9", "S7"]);
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate_chars("abcdef", 3), "abc…");
        assert_eq!(truncate_chars("abc", 3), "abc");
    }
}
