//! Retries announced on stderr for commands without a run's progress printer (`lsm query`,
//! `lsm llm ping`, the knowledge-base tools' own calls): a person waiting on a 429 sees
//! `429 from openai, retry 2/4 in 2 s` at the default log level instead of silence.

use std::sync::Arc;

use lsm_providers::{
    CallObserver, LlmRequest, LlmResponse, Pricing, Provider, ProviderError, ProviderEvent,
};

use crate::progress::retry_line;

/// `inner`, whose plain calls announce their retries on stderr. Observed calls (a run's
/// harness, whose progress printer shows the retries itself) pass through untouched.
pub fn announcing(inner: Arc<dyn Provider>, max_retries: u32) -> Arc<dyn Provider> {
    Arc::new(Announcing { inner, max_retries })
}

struct Announcing {
    inner: Arc<dyn Provider>,
    max_retries: u32,
}

impl CallObserver for Announcing {
    fn on_event(&self, event: ProviderEvent) {
        if let ProviderEvent::Retry {
            attempt,
            delay,
            reason,
        } = event
        {
            let millis = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            eprintln!(
                "{}",
                crate::secrets::clean(&retry_line(
                    &reason,
                    attempt,
                    millis,
                    Some(self.max_retries)
                ))
            );
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
