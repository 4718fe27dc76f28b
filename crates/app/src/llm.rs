//! One tiny call to a configured model (`lsm llm ping`, `lsm init`): its figures, or the
//! precise reason it failed.

use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use lsm_phase::LlmTier;
use lsm_providers::{CallOptions, LlmRequest, LlmResponse, Message, ProviderError};

use crate::config::Config;
use crate::wiring::{self, ProviderFlags, RetryNotice};

/// The request of a ping: a system line asking for one word, and `ping`.
pub fn ping_request() -> LlmRequest {
    LlmRequest {
        messages: vec![
            Message::system("This is a connectivity check. Reply with the single word: pong")
                .into(),
            Message::user("ping").into(),
        ],
        tools: Vec::new(),
        options: CallOptions {
            max_output_tokens: Some(16),
            ..CallOptions::default()
        },
    }
}

/// How a ping went.
#[derive(Debug)]
pub struct Ping {
    /// The provider's name.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The API base URL (`None` for a script or a local model).
    pub base_url: Option<String>,
    /// How long the call took, retries included.
    pub latency_ms: u128,
    /// The answer, or why there is none.
    pub result: Result<LlmResponse, ProviderError>,
    /// What the answer cost, when the model's prices are configured.
    pub cost_usd: Option<f64>,
}

/// Ping the model of `tier` under `config` and `flags`; each retry is told to `on_retry`.
///
/// # Errors
/// A usage error when the provider cannot be built (the call's own failure is in
/// [`Ping::result`]).
pub async fn ping(
    config: &Config,
    flags: &ProviderFlags,
    tier: LlmTier,
    on_retry: RetryNotice,
) -> Result<Ping> {
    let cwd = std::env::current_dir()?;
    let llm = config.llm.resolve(tier)?;
    let built = wiring::build_provider(&llm, flags, &cwd, &config.source_name())?;
    let p = wiring::announcing(Arc::clone(&built.provider), llm.http.max_retries, on_retry);
    let started = Instant::now();
    let result = p.complete(&ping_request()).await;
    let latency_ms = started.elapsed().as_millis();
    let cost_usd = match (&result, p.pricing()) {
        (Ok(r), Some(pricing)) => Some(pricing.cost(&r.usage)),
        _ => None,
    };
    Ok(Ping {
        provider: p.name().to_string(),
        model: p.model().to_string(),
        base_url: built.base_url,
        latency_ms,
        result,
        cost_usd,
    })
}
