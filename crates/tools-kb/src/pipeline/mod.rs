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

mod citations;
mod prompt;
mod stages;
mod types;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use lsm_providers::{CallOptions, LlmRequest, Provider};

pub use citations::check_citations;
pub use prompt::{fallback_answer, source_header};
pub use types::{
    Citation, ContextPackage, MAX_SOURCE_CHARS, QueryRequest, QueryResponse, RetrievalTrace,
    Source, TraceStage,
};

use crate::blocking::off_runtime;
use crate::error::{KbError, Result};
use crate::kb::KnowledgeBase;
use crate::mode::{self, ModeConfig, ModePolicy, ModeSpec};
use crate::retrieve::Profile;
use crate::store::analyze;
use prompt::synthesis_messages;
use types::ms;

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
        let remote_results = self.ask_remote(&request.query, &mode, &mut trace).await;
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

        // Retrieval reads the index and embeds the query: blocking work, off the runtime.
        let kb = Arc::clone(&self.kb);
        let query = request.clone();
        let (mut cands, mut trace) = off_runtime(move || -> Result<_> {
            let snapshot = kb.store().snapshot()?;
            let query_terms = analyze(&query.query);
            let query_vec = stages::embed_query(&kb, &snapshot, profile, &query.query, &mut trace)?;
            let pool = settings.candidates.max(k);
            let fused = stages::retrieve(
                &snapshot,
                &query,
                profile,
                query_vec.as_deref(),
                pool,
                &settings,
                &mut trace,
            )?;
            // Load the candidates and score their relevance. Post-processing looks at a few
            // times k: enough to dedupe, diversify and re-rank.
            let load = (3 * k).max(settings.rerank_candidates).max(20).min(pool);
            let t = Instant::now();
            let mut cands = stages::load_candidates(
                &snapshot,
                &fused,
                load,
                query_vec.as_deref(),
                &query_terms,
            )?;
            trace.record("load", Some(t), fused.len().min(load), cands.len(), None);
            stages::dedupe(&mut cands, settings.near_duplicate_threshold, &mut trace);
            Ok((cands, trace))
        })
        .await?;
        let settings = &self.kb.config().retrieval;
        if profile == Profile::LlmRerank {
            let t = Instant::now();
            let n = settings.rerank_candidates.min(cands.len());
            let note = self.llm_rerank(&request.query, &mut cands[..n]).await?;
            trace.record("llm_rerank", Some(t), n, n, Some(note));
        }
        stages::relevance_floor(
            &mut cands,
            mode.local_policy.min_relevance,
            &mut package,
            &mut trace,
        );
        let chosen = stages::diversify(cands, k, settings, &mut trace);
        package.candidates = chosen
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                c.source.label = format!("S{}", i + 1);
                c.source
            })
            .collect();
        stages::append_remote(&mut package, &remote_results);
        trace.total_ms = ms(started);
        package.retrieval_trace = trace;
        Ok(package)
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
                citations_attributed: false,
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
            messages: synthesis_messages(question, &package)
                .into_iter()
                .map(std::sync::Arc::new)
                .collect(),
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
        let (answer, mut cited, invalid) = check_citations(&response.text, &package.source_labels);
        let attributed = cited.is_empty() && invalid.is_empty();
        if attributed {
            let given: Vec<&Source> = package
                .candidates
                .iter()
                .filter(|s| package.source_labels.contains_key(&s.label))
                .collect();
            cited = citations::attribute(&answer, &given);
        }
        let citations_attributed = attributed && !cited.is_empty();
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
            citations_attributed,
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
