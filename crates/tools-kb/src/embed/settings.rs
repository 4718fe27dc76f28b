//! `[kb.embedder]`: which embedder computes dense vectors, and where the local model lives.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
            .join(super::LOCAL_MODEL_NAME),
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
                "embed::settings::tests::the_model_folder_follows_the_user_cache_folder",
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
