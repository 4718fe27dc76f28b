//! Building the concrete parts a run is wired from: the provider. (A run's permission asker
//! is its interaction channel: see `interaction_wiring`.)

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use lsm_providers::{
    Provider, ProviderConfig, ProviderError, ProviderKind, ScriptedProvider, process_env,
};

use crate::agent_run::usage;
use crate::config::ResolvedLlm;

/// What the command line says about the provider; each overrides the configuration.
#[derive(Debug, Clone, Default)]
pub struct ProviderFlags {
    /// `--provider`.
    pub provider: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
}

/// A provider and what it talks to.
pub struct BuiltProvider {
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// The API base URL (`None` for a script).
    pub base_url: Option<String>,
}

/// The names `--provider` accepts, for messages.
pub const PROVIDER_NAMES: &str =
    "openai, openai-responses, anthropic, compatible or scripted:<file.jsonl>";

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
        let p = ScriptedProvider::from_file(&path).map_err(|e| usage(e.to_string()))?;
        return Ok(BuiltProvider {
            provider: Arc::new(p),
            base_url: None,
        });
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
            usage(format!(
                "no model configured for provider {kind}: set {} model in {source}, LSM_LLM_MODEL, or pass --model",
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
