//! Knowledge-base settings (`[kb]` in `lsm.toml`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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

/// Which embedder computes dense vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbedderKind {
    /// The local model when its files are present; otherwise none. An existing index keeps
    /// the embedder it was built with.
    Auto,
    /// No dense vectors: lexical retrieval only.
    None,
    /// all-MiniLM-L6-v2 run locally (`cargo xtask fetch-model`).
    Local,
    /// An OpenAI-compatible `/embeddings` endpoint (Ollama, vLLM, OpenAI).
    Openai,
}

/// `[kb.embedder]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbedderConfig {
    /// Which embedder.
    pub kind: EmbedderKind,
    /// Folder of the local model (`model.safetensors`, `tokenizer.json`, `config.json`).
    /// Default: `~/.cache/lsm/models/all-MiniLM-L6-v2`.
    pub model_dir: Option<PathBuf>,
    /// Base URL of an OpenAI-compatible API (`http://127.0.0.1:11434/v1`).
    pub url: Option<String>,
    /// Model name sent to the endpoint.
    pub model: Option<String>,
    /// Vector dimensions the endpoint returns.
    pub dims: Option<usize>,
    /// Environment variable holding the endpoint's API key (never the key itself).
    pub api_key_env: Option<String>,
    /// Texts per embedding call.
    pub batch_size: usize,
}

impl Default for EmbedderConfig {
    fn default() -> Self {
        EmbedderConfig {
            kind: EmbedderKind::Auto,
            model_dir: None,
            url: None,
            model: None,
            dims: None,
            api_key_env: None,
            batch_size: 32,
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

/// The local model's default folder: `lsm/models/all-MiniLM-L6-v2` in the user's cache
/// folder — `$XDG_CACHE_HOME` (when absolute) else `~/.cache` on Linux and macOS,
/// `%LOCALAPPDATA%` on Windows (`etcetera`'s base strategy), where `cargo xtask fetch-model`
/// puts it. `None` when there is no home folder.
pub fn default_model_dir() -> Option<PathBuf> {
    use etcetera::BaseStrategy;
    let cache = etcetera::choose_base_strategy().ok()?.cache_dir();
    Some(
        cache
            .join("lsm")
            .join("models")
            .join(crate::embed::LOCAL_MODEL_NAME),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_model_folder_follows_the_user_cache_folder() {
        // The lookup reads the process environment: each case runs this test again in a
        // child process with the environment set, which checks the answer.
        const WANT: &str = "LSM_TEST_MODEL_DIR_WANT";
        if let Some(want) = std::env::var_os(WANT) {
            assert_eq!(default_model_dir().map(PathBuf::into_os_string), Some(want));
            return;
        }
        let case = |env: &[(&str, &str)], want: &str| {
            lsm_test_support::process::rerun_test_with_env(
                "config::tests::the_model_folder_follows_the_user_cache_folder",
                "XDG_CACHE_HOME",
                env,
                WANT,
                want,
            );
        };
        let model = "lsm/models/all-MiniLM-L6-v2";
        case(
            &[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")],
            &format!("/c/{model}"),
        );
        case(&[("HOME", "/h")], &format!("/h/.cache/{model}"));
        // A relative XDG_CACHE_HOME is no base folder (the XDG specification): ignored.
        case(
            &[("XDG_CACHE_HOME", "relative"), ("HOME", "/h")],
            &format!("/h/.cache/{model}"),
        );
    }
}
