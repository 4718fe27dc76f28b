//! Knowledge-base settings (`[kb]` in `lsm.toml`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::embed::EmbedderConfig;
use crate::mode::ModeConfig;

/// The default index folder, relative to the working directory (or the config file's folder).
pub const DEFAULT_INDEX_DIR: &str = ".lsm/kb";

/// `[kb]`: where the index lives, what ingest reads, how retrieval and synthesis behave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KbConfig {
    /// The index folder.
    pub index_dir: PathBuf,
    /// Glob patterns a file must match to be ingested (empty: every supported file).
    pub include: Vec<String>,
    /// Glob patterns of files never ingested (checked after `.gitignore`).
    pub exclude: Vec<String>,
    /// Files larger than this are skipped and reported.
    pub max_file_bytes: u64,
    /// Target chunk size in characters.
    pub chunk_size: usize,
    /// Characters shared by consecutive chunks.
    pub chunk_overlap: usize,
    /// The embedder for dense retrieval.
    pub embedder: EmbedderConfig,
    /// The mode `lsm query` and the tools use when none is given.
    pub default_mode: String,
    /// Custom modes by name (built-ins: grounded, insight, hybrid).
    pub modes: BTreeMap<String, ModeConfig>,
    /// Retrieval tuning.
    pub retrieval: RetrievalSettings,
    /// Retrieval profiles agents may ask for (empty: all).
    pub allowed_profiles: Vec<String>,
    /// Token budget of the context block handed to the LLM.
    pub context_token_budget: usize,
    /// Upper bound on the answer's tokens.
    pub max_answer_tokens: u64,
    /// Remote sources and `load_url`.
    pub remote: crate::remote::RemoteConfig,
}

impl Default for KbConfig {
    fn default() -> Self {
        KbConfig {
            index_dir: PathBuf::from(DEFAULT_INDEX_DIR),
            include: Vec::new(),
            exclude: Vec::new(),
            max_file_bytes: 50 * 1024 * 1024,
            chunk_size: 1000,
            chunk_overlap: 150,
            embedder: EmbedderConfig::default(),
            default_mode: "grounded".into(),
            modes: BTreeMap::new(),
            retrieval: RetrievalSettings::default(),
            allowed_profiles: Vec::new(),
            context_token_budget: 6000,
            max_answer_tokens: 1024,
            remote: crate::remote::RemoteConfig::default(),
        }
    }
}

/// `[kb.retrieval]`: fusion and post-retrieval settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrievalSettings {
    /// Reciprocal-rank-fusion constant.
    pub rrf_k: f32,
    /// Weight of the dense ranking in `hybrid_rrf`.
    pub dense_weight: f32,
    /// Weight of the lexical ranking in `hybrid_rrf`.
    pub lexical_weight: f32,
    /// Candidates taken from each ranking before fusion and post-processing.
    pub candidates: usize,
    /// Most chunks of one file in a result (0: no cap).
    pub max_per_file: usize,
    /// Estimated Jaccard similarity (MinHash) above which a chunk is a near-duplicate of a
    /// better one and dropped.
    pub near_duplicate_threshold: f32,
    /// MMR trade-off between relevance (1.0) and diversity (0.0).
    pub mmr_lambda: f32,
    /// Candidates the LLM re-ranks in `llm_rerank`.
    pub rerank_candidates: usize,
}

impl Default for RetrievalSettings {
    fn default() -> Self {
        RetrievalSettings {
            rrf_k: 60.0,
            dense_weight: 0.7,
            lexical_weight: 0.3,
            candidates: 100,
            max_per_file: 3,
            near_duplicate_threshold: 0.8,
            mmr_lambda: 0.7,
            rerank_candidates: 20,
        }
    }
}
