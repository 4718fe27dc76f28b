//! Retries told to the front end for model calls made outside a run (`lsm query`, `lsm llm
//! ping`, the knowledge-base tools of `lsm mcp serve`), which have no progress printer: a
//! person waiting on a 429 is told `429 from openai, retry 2/4 in 2 s` instead of silence.

use std::sync::Arc;

use lsm_providers::{
    CallObserver, LlmRequest, LlmResponse, Pricing, Provider, ProviderError, ProviderEvent,
};

/// One retry of a model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// What failed (`429 from openai`, …).
    pub reason: String,
    /// The attempt about to be made (from 1).
    pub attempt: u32,
    /// How long until it is made.
    pub delay_ms: u64,
    /// How many retries a call gets.
    pub max_retries: u32,
}

/// Where a front end takes retries.
pub type RetryNotice = Arc<dyn Fn(Retry) + Send + Sync>;

/// `inner`, each of whose retries is told to `notice`.
pub fn announcing(
    inner: Arc<dyn Provider>,
    max_retries: u32,
    notice: RetryNotice,
) -> Arc<dyn Provider> {
    Arc::new(Announcing {
        inner,
        max_retries,
        notice,
    })
}

struct Announcing {
    inner: Arc<dyn Provider>,
    max_retries: u32,
    notice: RetryNotice,
}

impl CallObserver for Announcing {
    fn on_event(&self, event: ProviderEvent) {
        if let ProviderEvent::Retry {
            attempt,
            delay,
            reason,
        } = event
        {
            (self.notice)(Retry {
                reason,
                attempt,
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                max_retries: self.max_retries,
            });
        }
    }
}

#[async_trait::async_trait]
impl Provider for Announcing {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        self.inner.complete_observed(request, self).await
    }
    async fn complete_observed(
        &self,
        request: &LlmRequest,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        self.inner.complete_observed(request, observer).await
    }
    fn estimate_prompt_tokens(&self, request: &LlmRequest) -> u64 {
        self.inner.estimate_prompt_tokens(request)
    }
    fn pricing(&self) -> Option<Pricing> {
        self.inner.pricing()
    }
}
