//! [`Pricing`]: what a model's tokens cost, and the cost of one call's [`Usage`].

use serde::{Deserialize, Serialize};

use super::Usage;

/// A model's prices in US dollars per million tokens, as the provider publishes them.
///
/// `cached_input` defaults to `input` (no cache discount known) and `cache_write` to `input`
/// (Anthropic bills cache writes at 1.25× input; say so here to account for it).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    /// Uncached prompt tokens, USD per 1M.
    pub input: f64,
    /// Generated tokens, USD per 1M.
    pub output: f64,
    /// Prompt tokens served from the cache, USD per 1M (default: `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
    /// Prompt tokens written to the cache, USD per 1M (default: `input`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

const PER: f64 = 1_000_000.0;

impl Pricing {
    /// The cost of one call in US dollars. `usage.input_tokens` includes the cached and
    /// cache-written tokens; each part is billed at its own price.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_tokens.min(usage.input_tokens);
        let written = usage
            .cache_creation_tokens
            .min(usage.input_tokens.saturating_sub(cached));
        let plain = usage.input_tokens.saturating_sub(cached + written);
        (plain as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + written as f64 * self.cache_write.unwrap_or(self.input)
            + usage.output_tokens as f64 * self.output)
            / PER
    }

    /// The cost of `tokens` uncached prompt tokens.
    pub fn input_cost(&self, tokens: u64) -> f64 {
        tokens as f64 * self.input / PER
    }

    /// How many output tokens `dollars` buy (rounded down; `u64::MAX` when output is free).
    pub fn output_tokens_for(&self, dollars: f64) -> u64 {
        if self.output <= 0.0 {
            return u64::MAX;
        }
        let n = (dollars.max(0.0) * PER / self.output).floor();
        if n >= u64::MAX as f64 {
            u64::MAX
        } else {
            n as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_of_the_prompt_is_billed_at_its_own_price() {
        let p = Pricing {
            input: 3.0,
            output: 15.0,
            cached_input: Some(0.3),
            cache_write: Some(3.75),
        };
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cached_tokens: 500_000,
            cache_creation_tokens: 200_000,
        };
        // 300k plain × 3 + 500k cached × 0.3 + 200k written × 3.75 + 100k out × 15
        let expected = 0.9 + 0.15 + 0.75 + 1.5;
        assert!((p.cost(&u) - expected).abs() < 1e-9, "{}", p.cost(&u));
    }

    #[test]
    fn unknown_cache_prices_fall_back_to_input() {
        let p = Pricing {
            input: 1.0,
            output: 2.0,
            ..Default::default()
        };
        let u = Usage {
            input_tokens: 1000,
            output_tokens: 1000,
            cached_tokens: 400,
            ..Default::default()
        };
        assert!((p.cost(&u) - 0.003).abs() < 1e-12);
        assert_eq!(p.output_tokens_for(0.002), 1000);
        assert_eq!(Pricing::default().output_tokens_for(1.0), u64::MAX);
    }
}
