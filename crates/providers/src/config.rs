//! [`ProviderConfig`]: which API, model and server to call, and how; [`ProviderConfig::build`]
//! turns it into a provider, reading the API key from the environment.

use std::sync::Arc;

use crate::endpoint::{HttpProvider, HttpSettings};
use crate::estimate::Estimator;
use crate::kind::ProviderKind;
use crate::strict_json::StrictJsonProvider;
use crate::{Pricing, Provider, ProviderError};

/// Everything needed to build an HTTP provider. Keys are never part of it: they come from the
/// environment variable it names.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// The API flavour.
    pub kind: ProviderKind,
    /// The model name, as the server knows it.
    pub model: String,
    /// The API base URL, e.g. `http://localhost:11434/v1` (default: the kind's own).
    pub base_url: Option<String>,
    /// The environment variable holding the key (default: `OPENAI_API_KEY` or
    /// `ANTHROPIC_API_KEY`; `compatible` needs none unless this is set).
    pub api_key_env: Option<String>,
    /// Native tool calling (`true`) or the strict-JSON protocol for models without it.
    pub function_calling: bool,
    /// Stream answers (SSE), forwarding text and tool-call progress as they arrive.
    pub stream: bool,
    /// Prices of the model, for cost accounting.
    pub pricing: Option<Pricing>,
    /// Default `prompt_cache_retention` (OpenAI Responses), e.g. `"24h"`.
    pub prompt_cache_retention: Option<String>,
    /// Timeouts and retries.
    pub http: HttpSettings,
}

impl ProviderConfig {
    /// A configuration with defaults for everything but the kind and model.
    pub fn new(kind: ProviderKind, model: impl Into<String>) -> Self {
        ProviderConfig {
            kind,
            model: model.into(),
            base_url: None,
            api_key_env: None,
            function_calling: true,
            stream: false,
            pricing: None,
            prompt_cache_retention: None,
            http: HttpSettings::default(),
        }
    }

    /// The HTTP client itself (native tool calling regardless of `function_calling`).
    ///
    /// # Errors
    /// [`ProviderError::Config`] for a missing model or base URL, [`ProviderError::MissingApiKey`]
    /// when the key's variable is unset for a provider that needs one.
    pub fn build_http(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HttpProvider, ProviderError> {
        let provider = self.kind.to_string();
        if self.model.trim().is_empty() {
            return Err(ProviderError::Config {
                provider,
                message: "no model configured; set [llm] model in lsm.toml, LSM_LLM_MODEL, or pass --model".into(),
            });
        }
        let base_url = match (&self.base_url, self.kind.default_base_url()) {
            (Some(u), _) if !u.trim().is_empty() => u.trim().trim_end_matches('/').to_string(),
            (_, Some(d)) => d.to_string(),
            _ => {
                return Err(ProviderError::Config {
                    provider,
                    message: "no base_url configured; a compatible provider needs one, e.g. http://localhost:11434/v1 for Ollama (set [llm] base_url, LSM_LLM_BASE_URL, or pass --base-url)".into(),
                });
            }
        };
        let parsed = reqwest::Url::parse(&base_url)
            .and_then(|_| reqwest::Url::parse(&crate::http::endpoint_for(self.kind, &base_url)));
        let Ok(endpoint_url) = parsed else {
            return Err(ProviderError::Config {
                provider,
                message: format!(
                    "base_url '{base_url}' is not a URL; write it like http://localhost:11434/v1"
                ),
            });
        };
        let key_env = self
            .api_key_env
            .clone()
            .or_else(|| self.kind.default_api_key_env().map(String::from));
        let api_key = match &key_env {
            None => None,
            Some(var) => match env(var).filter(|k| !k.trim().is_empty()) {
                Some(k) => Some(k.trim().to_string()),
                None => {
                    return Err(ProviderError::MissingApiKey {
                        provider,
                        env_var: var.clone(),
                    });
                }
            },
        };
        let openai_family = matches!(
            self.kind,
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses
        );
        let request_headers =
            crate::http::request_headers(self.kind, api_key.as_deref(), self.stream);
        let transport = crate::transport::Transport::new(
            endpoint_url.clone(),
            request_headers,
            self.http.direct,
            self.http.connect_timeout,
            self.http.read_timeout,
            env,
        )
        .map_err(|e| ProviderError::Config {
            provider: self.kind.to_string(),
            message: format!("cannot build the HTTP client: {e}"),
        })?;
        Ok(HttpProvider {
            kind: self.kind,
            model: self.model.clone(),
            base_url,
            api_key,
            api_key_env: key_env,
            pricing: self.pricing,
            stream: self.stream,
            prompt_cache_retention: self.prompt_cache_retention.clone(),
            settings: self.http.clone(),
            estimator: Estimator::for_model(&self.model, openai_family),
            transport,
            endpoint_url,
            wire: std::sync::Mutex::default(),
            last_body_len: std::sync::atomic::AtomicUsize::new(0),
            kept_body: std::sync::Mutex::default(),
        })
    }

    /// The provider to hand to the harness: the HTTP client, wrapped in the strict-JSON
    /// protocol when `function_calling` is off.
    ///
    /// # Errors
    /// As [`ProviderConfig::build_http`].
    pub fn build(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<dyn Provider>, ProviderError> {
        let http = self.build_http(env)?;
        if self.function_calling {
            Ok(Arc::new(http))
        } else {
            Ok(Arc::new(StrictJsonProvider::new(http)))
        }
    }
}

/// Read a variable from the process environment (what [`ProviderConfig::build`] is usually
/// given).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}
