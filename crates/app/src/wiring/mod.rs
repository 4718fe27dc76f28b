//! Building the concrete parts a run is wired from: the provider (here), the interaction
//! channel that is a run's permission asker ([`interaction`]), the knowledge base
//! ([`kb`]), MCP servers ([`mcp`]), memory ([`memory`]), and a run's whole harness factory
//! ([`run`]).

use std::path::Path;
use std::sync::Arc;

use crate::error::Result;
use lsm_providers::{
    Provider, ProviderConfig, ProviderError, ProviderKind, ScriptedProvider, process_env,
};

use crate::config::ResolvedLlm;
use crate::error::usage;

pub mod interaction;
pub mod kb;
pub mod mcp;
pub mod memory;
pub mod memory_pg;
mod notice;
pub mod run;

pub use notice::{Retry, RetryNotice, announcing};

/// What the command line says about the provider (`--provider`, `--model`, `--base-url`,
/// flattened into each command that takes them); each overrides the configuration (the
/// tier's settings: so they are not a layer of it).
#[derive(
    Debug, Clone, Default, PartialEq, Eq, clap::Args, serde::Serialize, serde::Deserialize,
)]
#[serde(default)]
pub struct ProviderFlags {
    /// The LLM provider: openai | openai-responses | anthropic | compatible | local |
    /// scripted:<file.jsonl> (plays a recorded script). Default: [llm] provider of the tier.
    #[arg(long, value_name = "SPEC")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,

    /// The model, as the provider names it (default: [llm] model of the tier); for the local
    /// provider, the GGUF file to load (default: [llm] model_path).
    #[arg(long, value_name = "NAME")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,

    /// The API base URL, e.g. http://localhost:11434/v1 for Ollama (default: [llm] base_url
    /// of the tier).
    #[arg(long, value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,

    /// A script continues after this many responses (a resumed run's model calls so far).
    #[arg(skip)]
    #[serde(skip)]
    pub script_start: usize,

    /// Whether the command has a `--model` flag (messages suggest it only then): set when
    /// the flags come from the command line.
    #[arg(skip = true)]
    #[serde(skip)]
    pub model_flag: bool,
}

/// Test-only: a scripted provider appends the number of every response it serves to this
/// file (how the crash tests check that no response is served twice across processes); when
/// it names a folder, each script gets its own log there, `<script name>.served`.
pub const SERVED_LOG_ENV: &str = "LSM_TEST_SCRIPTED_SERVED_LOG";

/// A provider and what it talks to.
pub struct BuiltProvider {
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// The API base URL (`None` for a script).
    pub base_url: Option<String>,
}

/// The names `--provider` accepts, for messages.
pub const PROVIDER_NAMES: &str =
    "openai, openai-responses, anthropic, compatible, local or scripted:<file.jsonl>";

/// The provider spec of the in-process model (feature `local`).
pub const LOCAL_PROVIDER: &str = "local";

/// Whether `provider` names an HTTP provider (`openai`, `anthropic`, `compatible`, …): one
/// that needs a model and a key.
pub fn is_http_provider(provider: &str) -> bool {
    ProviderKind::parse(provider).is_some()
}

/// Build the provider from the resolved `[llm]` settings and the flags. `scripted:<file>` is
/// relative to the working directory; keys come only from the environment. `source` names
/// the configuration file for messages.
pub fn build_provider(
    llm: &ResolvedLlm,
    flags: &ProviderFlags,
    cwd: &Path,
    source: &str,
) -> Result<BuiltProvider> {
    let spec = flags
        .provider
        .clone()
        .or_else(|| llm.provider.clone())
        .ok_or_else(|| {
            usage(format!(
                "no LLM provider configured: pass --provider ({PROVIDER_NAMES}) or set [llm] provider in lsm.toml"
            ))
        })?;
    if let Some(file) = spec.strip_prefix("scripted:")
        && !file.is_empty()
    {
        let path = cwd.join(file);
        let mut p = ScriptedProvider::from_file(&path)
            .map_err(|e| usage(e.to_string()))?
            .starting_at(flags.script_start);
        if let Some(log) = std::env::var_os(SERVED_LOG_ENV) {
            // A folder: one log per script (`<script name>.served`), for tests of many runs.
            let log = std::path::PathBuf::from(log);
            let log = match (log.is_dir(), path.file_name()) {
                (true, Some(name)) => log.join(format!("{}.served", name.to_string_lossy())),
                _ => log,
            };
            p = p.with_served_log(log);
        }
        return Ok(BuiltProvider {
            provider: Arc::new(p),
            base_url: None,
        });
    }
    if spec == LOCAL_PROVIDER {
        return build_local(llm, flags, source);
    }
    let Some(kind) = ProviderKind::parse(&spec) else {
        return Err(usage(format!(
            "unknown provider '{spec}' (from --provider, LSM_LLM_PROVIDER or {} provider in {source}): use {PROVIDER_NAMES}",
            llm.section
        )));
    };
    let model = flags
        .model
        .clone()
        .or_else(|| llm.model.clone())
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| {
            let flag = if flags.model_flag {
                ", or pass --model NAME"
            } else {
                ""
            };
            usage(format!(
                "no model configured for provider {kind}: set {} model in {source}, or LSM_LLM_MODEL, or -c llm.model=NAME{flag}",
                llm.section
            ))
        })?;
    let config = ProviderConfig {
        kind,
        pricing: llm.pricing_for(&model),
        model,
        base_url: flags.base_url.clone().or_else(|| llm.base_url.clone()),
        api_key_env: llm.api_key_env.clone(),
        function_calling: llm.function_calling,
        stream: llm.stream,
        prompt_cache_retention: llm.prompt_cache_retention.clone(),
        http: llm.http.clone(),
    };
    let http = config.build_http(&process_env).map_err(|e| match e {
        ProviderError::Config { .. } => {
            usage(format!("{e} (settings from {} in {source})", llm.section))
        }
        other => usage(other.to_string()),
    })?;
    let base_url = Some(http.base_url().to_string());
    let provider: Arc<dyn Provider> = if config.function_calling {
        Arc::new(http)
    } else {
        Arc::new(lsm_providers::StrictJsonProvider::new(http))
    };
    Ok(BuiltProvider { provider, base_url })
}

/// The GGUF file the local provider loads: `--model`, else `model_path` of the tier or
/// `[llm]`, else the default model in the model cache folder (where `cargo xtask
/// fetch-model` puts it).
#[cfg(feature = "local")]
fn local_model_path(
    llm: &ResolvedLlm,
    flags: &ProviderFlags,
    source: &str,
) -> Result<std::path::PathBuf> {
    let path = flags
        .model
        .as_ref()
        .map(std::path::PathBuf::from)
        .or_else(|| llm.model_path.clone())
        .or_else(lsm_providers::default_local_model_path)
        .ok_or_else(|| {
            usage(format!(
                "no model file for the local provider: set {} model_path in {source} (or LSM_LLM_MODEL_PATH, or pass --model <file.gguf>)",
                llm.section
            ))
        })?;
    if !path.is_file() {
        return Err(usage(format!(
            "the local provider's model file {} does not exist: run `cargo xtask fetch-model` to download the default model, or set {} model_path in {source} (or --model <file.gguf>)",
            path.display(),
            llm.section
        )));
    }
    Ok(path)
}

#[cfg(feature = "local")]
fn build_local(llm: &ResolvedLlm, flags: &ProviderFlags, source: &str) -> Result<BuiltProvider> {
    let path = local_model_path(llm, flags, source)?;
    let settings = lsm_providers::LocalSettings {
        context_size: llm.context_size,
        ..lsm_providers::LocalSettings::default()
    };
    let provider = lsm_providers::LocalProvider::load(&path, settings)
        .map_err(|e| usage(format!("{e} (settings from {} in {source})", llm.section)))?;
    Ok(BuiltProvider {
        provider: Arc::new(provider),
        base_url: None,
    })
}

#[cfg(not(feature = "local"))]
fn build_local(llm: &ResolvedLlm, flags: &ProviderFlags, source: &str) -> Result<BuiltProvider> {
    let _ = (llm, flags, source);
    Err(usage(format!(
        "this lsm was built without the local provider: build it with `{LOCAL_BUILD}` (pure Rust: nothing to install), or run `cargo xtask demo`"
    )))
}

/// How to build `lsm` with the local provider.
#[cfg(not(feature = "local"))]
const LOCAL_BUILD: &str = "cargo build --release -p lsm-cli --features local";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LlmConfig, LlmSettings};
    use lsm_phase::LlmTier;

    fn local_llm(model_path: Option<&str>) -> ResolvedLlm {
        let config = LlmConfig {
            settings: LlmSettings {
                provider: Some(LOCAL_PROVIDER.into()),
                model_path: model_path.map(Into::into),
                ..LlmSettings::default()
            },
            ..LlmConfig::default()
        };
        config.resolve(LlmTier::Normal).unwrap()
    }

    fn build_error(llm: &ResolvedLlm, flags: &ProviderFlags) -> crate::error::AppError {
        match build_provider(llm, flags, Path::new("."), "lsm.toml") {
            Ok(_) => panic!("the provider was built"),
            Err(e) => e,
        }
    }

    #[cfg(not(feature = "local"))]
    #[test]
    fn local_in_a_build_without_the_feature_is_a_usage_error_saying_how_to_build_it() {
        let e = build_error(&local_llm(Some("/m.gguf")), &ProviderFlags::default());
        assert!(crate::error::is_usage(&e), "exit code 2: {e}");
        let text = e.to_string();
        assert!(text.contains("built without the local provider"), "{text}");
        assert!(
            text.contains("--features local") && text.contains("cargo xtask demo"),
            "{text}"
        );
    }

    #[cfg(feature = "local")]
    #[test]
    fn a_missing_local_model_file_is_a_usage_error_naming_fetch_model() {
        let flags = ProviderFlags {
            model: Some("/nonexistent/model.gguf".into()),
            ..ProviderFlags::default()
        };
        let e = build_error(&local_llm(Some("/elsewhere.gguf")), &flags);
        assert!(crate::error::is_usage(&e), "exit code 2: {e}");
        let text = e.to_string();
        assert!(
            text.contains("/nonexistent/model.gguf") && text.contains("cargo xtask fetch-model"),
            "--model wins over model_path: {text}"
        );
        let e = build_error(
            &local_llm(Some("/elsewhere.gguf")),
            &ProviderFlags::default(),
        );
        assert!(e.to_string().contains("/elsewhere.gguf"), "{e}");
    }

    #[test]
    fn the_provider_names_include_local() {
        assert!(PROVIDER_NAMES.contains("local"));
        let llm = LlmConfig {
            settings: LlmSettings {
                provider: Some("llama".into()),
                ..LlmSettings::default()
            },
            ..LlmConfig::default()
        }
        .resolve(LlmTier::Normal)
        .unwrap();
        let e = build_error(&llm, &ProviderFlags::default());
        assert!(e.to_string().contains("local"), "{e}");
    }
}

#[cfg(test)]
mod message_tests {
    use super::*;
    use crate::config::{LlmConfig, LlmSettings};
    use lsm_phase::LlmTier;

    #[test]
    fn a_missing_model_suggests_only_flags_the_command_has() {
        let llm = LlmConfig {
            settings: LlmSettings {
                provider: Some("openai".into()),
                ..LlmSettings::default()
            },
            ..LlmConfig::default()
        }
        .resolve(LlmTier::Normal)
        .unwrap();
        let error = |model_flag| {
            let flags = ProviderFlags {
                model_flag,
                ..ProviderFlags::default()
            };
            match build_provider(&llm, &flags, Path::new("."), "/p/lsm.toml") {
                Ok(_) => panic!("built"),
                Err(e) => e.to_string(),
            }
        };
        let without = error(false);
        assert!(!without.contains("--model"), "{without}");
        assert!(
            without.contains("-c llm.model=NAME") && without.contains("/p/lsm.toml"),
            "{without}"
        );
        assert!(error(true).contains("--model NAME"));
    }
}
