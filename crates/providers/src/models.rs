//! Where local model files are kept: the cache folder `cargo xtask fetch-model` fills, and
//! the default model the `local` provider uses when no `model_path` is configured.

use std::path::PathBuf;

/// The file name of the default local model (SmolLM2-135M-Instruct, 4-bit, Apache-2.0), as
/// `cargo xtask fetch-model` leaves it in [`model_cache_dir`].
pub const DEFAULT_LOCAL_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The environment variable that moves the model cache folder.
pub const MODEL_CACHE_ENV: &str = "LSM_MODEL_CACHE";

/// The model cache folder: `$LSM_MODEL_CACHE` if set, else `$XDG_CACHE_HOME/lsm/models`, else
/// `~/.cache/lsm/models` (`%LOCALAPPDATA%\lsm\models` on Windows). `None` when none of these
/// variables is set.
pub fn model_cache_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = var(MODEL_CACHE_ENV) {
        return Some(dir);
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Some(dir.join("lsm").join("models"));
    }
    if cfg!(windows)
        && let Some(dir) = var("LOCALAPPDATA")
    {
        return Some(dir.join("lsm").join("models"));
    }
    var("HOME").map(|home| home.join(".cache").join("lsm").join("models"))
}

/// Where the default local model is expected: [`DEFAULT_LOCAL_MODEL_FILE`] in
/// [`model_cache_dir`].
pub fn default_local_model_path() -> Option<PathBuf> {
    model_cache_dir().map(|dir| dir.join(DEFAULT_LOCAL_MODEL_FILE))
}
