//! [`RunUsage`]: what a run's model calls spent, as its budget, its events and its summary
//! count it.

use serde::{Deserialize, Serialize};

use crate::message::Usage;

/// Token accounting of a run: every LLM call charged to its [`crate::RunBudget`], the
/// harness's own and those made inside tools. Visible to the harness's owner (the CLI,
/// tests), never to an agent: it is not part of any phase result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunUsage {
    /// Input + output tokens.
    pub tokens_used: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_creation_tokens: u64,
    /// LLM calls charged (the harness's own and those made inside tools).
    pub llm_calls: u64,
    /// What the calls cost in US dollars (`None` while the provider has no prices).
    pub cost_usd: Option<f64>,
}

impl RunUsage {
    /// Add another run's usage to this one.
    pub fn absorb(&mut self, other: &RunUsage) {
        self.tokens_used = self.tokens_used.saturating_add(other.tokens_used);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
        self.cache_creation_tokens = self
            .cache_creation_tokens
            .saturating_add(other.cache_creation_tokens);
        self.llm_calls = self.llm_calls.saturating_add(other.llm_calls);
        if let Some(c) = other.cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
        }
    }

    /// This usage less `other` (never below zero), e.g. what was spent since `other`.
    pub fn minus(&self, other: &RunUsage) -> RunUsage {
        RunUsage {
            tokens_used: self.tokens_used.saturating_sub(other.tokens_used),
            input_tokens: self.input_tokens.saturating_sub(other.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(other.output_tokens),
            cached_tokens: self.cached_tokens.saturating_sub(other.cached_tokens),
            cache_creation_tokens: self
                .cache_creation_tokens
                .saturating_sub(other.cache_creation_tokens),
            llm_calls: self.llm_calls.saturating_sub(other.llm_calls),
            cost_usd: match (self.cost_usd, other.cost_usd) {
                (Some(a), Some(b)) => Some((a - b).max(0.0)),
                (a, None) => a,
                (None, Some(_)) => None,
            },
        }
    }

    /// Add `calls` calls that used `usage` and cost `cost`.
    pub fn add(&mut self, usage: &Usage, calls: u64, cost: Option<f64>) {
        self.tokens_used = self.tokens_used.saturating_add(usage.total());
        self.input_tokens = self.input_tokens.saturating_add(usage.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(usage.output_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(usage.cached_tokens);
        self.cache_creation_tokens = self
            .cache_creation_tokens
            .saturating_add(usage.cache_creation_tokens);
        self.llm_calls = self.llm_calls.saturating_add(calls);
        if let Some(c) = cost {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
        }
    }
}
