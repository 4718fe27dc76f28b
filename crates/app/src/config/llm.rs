//! `[llm]`: one set of LLM settings ([`LlmSettings`]), given once for every tier in `[llm]`
//! and changed per tier in `[llm.quick]`, `[llm.normal]`, `[llm.complex]`; and the settings
//! one run uses ([`ResolvedLlm`]): the tier's over `[llm]`'s.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::time::Duration;

use crate::error::Result;
use lsm_phase::LlmTier;
use lsm_providers::{HttpSettings, Pricing};
use serde::{Deserialize, Serialize};

use crate::error::usage as config_error;

/// The settings of one LLM: what `[llm]` gives every tier and a tier table may change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmSettings {
    /// `openai`, `openai-responses`, `anthropic`, `compatible`, `local`, or
    /// `scripted:<file.jsonl>`.
    pub provider: Option<String>,
    /// The model name, as the server knows it.
    pub model: Option<String>,
    /// The GGUF file the `local` provider loads.
    pub model_path: Option<PathBuf>,
    /// The `local` provider's context window in tokens.
    pub context_size: Option<u32>,
    /// The API base URL.
    pub base_url: Option<String>,
    /// The environment variable holding the key.
    pub api_key_env: Option<String>,
    /// Native tool calling (default) or the strict-JSON protocol.
    pub function_calling: Option<bool>,
    /// Stream answers (SSE).
    pub stream: Option<bool>,
    /// OpenAI `prompt_cache_retention` (`"in_memory"`, `"24h"`).
    pub prompt_cache_retention: Option<String>,
    /// Connect timeout.
    pub connect_timeout_seconds: Option<f64>,
    /// Read timeout (silence between two reads).
    pub read_timeout_seconds: Option<f64>,
    /// Retries after the first attempt.
    pub max_retries: Option<u32>,
    /// First backoff delay.
    pub retry_base_delay_ms: Option<u64>,
    /// Longest single wait, also for `Retry-After`.
    pub retry_max_delay_seconds: Option<f64>,
    /// The model's context window in tokens (compaction measures prompts against it).
    pub context_window: Option<u64>,
    /// Reach a plain `http://` address over hyper's HTTP/1.1 connection directly (`true`,
    /// the default) or through reqwest, as `https://` addresses are.
    pub direct_http: Option<bool>,
}

impl LlmSettings {
    /// These settings over `base`: each one given here wins, the others are `base`'s.
    #[must_use]
    pub fn over(&self, base: &LlmSettings) -> LlmSettings {
        LlmSettings {
            provider: self.provider.clone().or_else(|| base.provider.clone()),
            model: self.model.clone().or_else(|| base.model.clone()),
            model_path: self.model_path.clone().or_else(|| base.model_path.clone()),
            context_size: self.context_size.or(base.context_size),
            base_url: self.base_url.clone().or_else(|| base.base_url.clone()),
            api_key_env: self
                .api_key_env
                .clone()
                .or_else(|| base.api_key_env.clone()),
            function_calling: self.function_calling.or(base.function_calling),
            stream: self.stream.or(base.stream),
            prompt_cache_retention: self
                .prompt_cache_retention
                .clone()
                .or_else(|| base.prompt_cache_retention.clone()),
            connect_timeout_seconds: self
                .connect_timeout_seconds
                .or(base.connect_timeout_seconds),
            read_timeout_seconds: self.read_timeout_seconds.or(base.read_timeout_seconds),
            max_retries: self.max_retries.or(base.max_retries),
            retry_base_delay_ms: self.retry_base_delay_ms.or(base.retry_base_delay_ms),
            retry_max_delay_seconds: self
                .retry_max_delay_seconds
                .or(base.retry_max_delay_seconds),
            context_window: self.context_window.or(base.context_window),
            direct_http: self.direct_http.or(base.direct_http),
        }
    }

    /// Timeouts and retries, the provider's defaults where none is given.
    ///
    /// # Errors
    /// A duration that is not a positive number of seconds, named with `section`.
    pub fn http(&self, section: &str) -> Result<HttpSettings> {
        let d = HttpSettings::default();
        Ok(HttpSettings {
            connect_timeout: seconds(
                self.connect_timeout_seconds,
                d.connect_timeout,
                "connect_timeout_seconds",
                section,
            )?,
            read_timeout: seconds(
                self.read_timeout_seconds,
                d.read_timeout,
                "read_timeout_seconds",
                section,
            )?,
            max_retries: self.max_retries.unwrap_or(d.max_retries),
            retry_base_delay: self
                .retry_base_delay_ms
                .map_or(d.retry_base_delay, Duration::from_millis),
            retry_max_delay: seconds(
                self.retry_max_delay_seconds,
                d.retry_max_delay,
                "retry_max_delay_seconds",
                section,
            )?,
            direct: self.direct_http.unwrap_or(d.direct),
        })
    }
}

/// `[llm]`: the settings of every tier, the pricing table, and the tiers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// The settings every tier starts from.
    #[serde(flatten)]
    pub settings: LlmSettings,
    /// Prices per model name.
    pub pricing: BTreeMap<String, Pricing>,
    /// `[llm.context_windows]`: context windows per model name, over the built-in table.
    pub context_windows: BTreeMap<String, u64>,
    /// `[llm.quick]`.
    pub quick: Option<TierConfig>,
    /// `[llm.normal]`.
    pub normal: Option<TierConfig>,
    /// `[llm.complex]`.
    pub complex: Option<TierConfig>,
}

impl Deref for LlmConfig {
    type Target = LlmSettings;
    fn deref(&self) -> &LlmSettings {
        &self.settings
    }
}

impl DerefMut for LlmConfig {
    fn deref_mut(&mut self) -> &mut LlmSettings {
        &mut self.settings
    }
}

/// `[llm.quick]`, `[llm.normal]`, `[llm.complex]`: what a tier changes from `[llm]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TierConfig {
    /// The settings this tier changes.
    #[serde(flatten)]
    pub settings: LlmSettings,
    /// The prices of this tier's model.
    pub pricing: Option<Pricing>,
}

impl Deref for TierConfig {
    type Target = LlmSettings;
    fn deref(&self) -> &LlmSettings {
        &self.settings
    }
}

impl DerefMut for TierConfig {
    fn deref_mut(&mut self) -> &mut LlmSettings {
        &mut self.settings
    }
}

/// The LLM settings one run uses: `[llm]`, overridden by the agent's tier.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedLlm {
    /// Where these settings came from, for messages (`[llm.normal]`, `[llm]`).
    pub section: String,
    /// The tier's settings over `[llm]`'s.
    pub settings: LlmSettings,
    /// Native tool calling (default on).
    pub function_calling: bool,
    /// Streaming (default off).
    pub stream: bool,
    /// Timeouts and retries.
    pub http: HttpSettings,
    /// The tier's own price, for its own model.
    tier_pricing: Option<(Option<String>, Pricing)>,
    /// The `[llm.pricing]` table.
    table: BTreeMap<String, Pricing>,
    /// The `[llm.context_windows]` table.
    windows: BTreeMap<String, u64>,
}

impl Deref for ResolvedLlm {
    type Target = LlmSettings;
    fn deref(&self) -> &LlmSettings {
        &self.settings
    }
}

impl ResolvedLlm {
    /// The prices of `model`: the tier's `pricing` when `model` is the tier's model, else the
    /// `[llm.pricing]` entry for it.
    pub fn pricing_for(&self, model: &str) -> Option<Pricing> {
        if let Some((tier_model, p)) = &self.tier_pricing
            && tier_model.as_deref().is_none_or(|m| m == model)
        {
            return Some(*p);
        }
        self.table.get(model).copied()
    }

    /// The context window configured for `model`: the tier's (or `[llm]`'s)
    /// `context_window`, else the local provider's `context_size`, else its
    /// `[llm.context_windows]` entry. `None`: the provider's own table decides.
    pub fn context_window_for(&self, model: &str) -> Option<u64> {
        self.settings
            .context_window
            .or(self.settings.context_size.map(u64::from))
            .or_else(|| self.windows.get(model).copied())
    }
}

fn seconds(value: Option<f64>, default: Duration, key: &str, section: &str) -> Result<Duration> {
    match value {
        None => Ok(default),
        Some(v) if v.is_finite() && v > 0.0 => Ok(Duration::from_secs_f64(v)),
        Some(v) => Err(config_error(format!(
            "{section} {key} = {v} must be a positive number of seconds"
        ))),
    }
}

impl LlmConfig {
    /// The tier's table, if configured.
    pub fn tier(&self, tier: LlmTier) -> Option<&TierConfig> {
        match tier {
            LlmTier::Quick => self.quick.as_ref(),
            LlmTier::Normal => self.normal.as_ref(),
            LlmTier::Complex => self.complex.as_ref(),
        }
    }

    /// `[llm]` with the tier's settings on top.
    pub fn resolve(&self, tier: LlmTier) -> Result<ResolvedLlm> {
        let empty = TierConfig::default();
        let t = self.tier(tier).unwrap_or(&empty);
        let section = if self.tier(tier).is_some() {
            format!("[llm.{}]", tier_name(tier))
        } else {
            "[llm]".to_string()
        };
        let settings = t.settings.over(&self.settings);
        Ok(ResolvedLlm {
            http: settings.http(&section)?,
            function_calling: settings.function_calling.unwrap_or(true),
            stream: settings.stream.unwrap_or(false),
            tier_pricing: t.pricing.map(|p| (settings.model.clone(), p)),
            table: self.pricing.clone(),
            windows: self.context_windows.clone(),
            section,
            settings,
        })
    }
}

/// The configuration name of a tier.
pub fn tier_name(tier: LlmTier) -> &'static str {
    match tier {
        LlmTier::Quick => "quick",
        LlmTier::Normal => "normal",
        LlmTier::Complex => "complex",
    }
}
