//! [`BudgetedProvider`]: a provider whose every call passes a run's [`RunBudget`] — how tools
//! that call a model themselves (knowledge-base synthesis, re-ranking, `query_llm`) share the
//! run's ceiling. The budget itself, its ledger and the pure gate are lsm-run's
//! ([`lsm_run::budget`]).

use std::sync::Arc;

use lsm_providers::{
    CallObserver, LlmRequest, LlmResponse, NoObserver, Pricing, Provider, ProviderError,
};
use lsm_run::RunBudget;

/// A provider whose every call passes the run's budget: refused once the budget is spent
/// ([`ProviderError::BudgetExhausted`], no request made), `max_output_tokens` capped to what
/// is left, and the reported usage and cost charged afterwards (a failed call is charged its
/// prompt estimate). What the composition root hands to tools that call a model.
pub struct BudgetedProvider {
    inner: Arc<dyn Provider>,
    budget: RunBudget,
}

impl std::fmt::Debug for BudgetedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BudgetedProvider")
            .field("provider", &self.inner.name())
            .field("model", &self.inner.model())
            .field("budget", &self.budget)
            .finish()
    }
}

impl BudgetedProvider {
    /// `inner`, gated by and charged to `budget`.
    pub fn new(inner: Arc<dyn Provider>, budget: RunBudget) -> Self {
        BudgetedProvider { inner, budget }
    }

    /// The budget the calls are charged to.
    pub fn budget(&self) -> &RunBudget {
        &self.budget
    }
}

#[async_trait::async_trait]
impl Provider for BudgetedProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn context_window(&self) -> Option<u64> {
        self.inner.context_window()
    }

    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        self.complete_observed(request, &NoObserver).await
    }

    async fn complete_observed(
        &self,
        request: &LlmRequest,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        let estimate = self.inner.estimate_prompt_tokens(request);
        let permit = self.budget.begin(
            estimate,
            self.inner.pricing(),
            request.options.max_output_tokens,
        )?;
        let mut capped = request.clone();
        capped.options.max_output_tokens = Some(permit.max_output_tokens());
        let result = self.inner.complete_observed(&capped, observer).await;
        match &result {
            Ok(response) => {
                permit.charge(&response.usage);
            }
            Err(_) => {
                permit.charge_failed();
            }
        }
        result
    }

    fn estimate_prompt_tokens(&self, request: &LlmRequest) -> u64 {
        self.inner.estimate_prompt_tokens(request)
    }

    fn pricing(&self) -> Option<Pricing> {
        self.inner.pricing()
    }
}
