//! LLM providers behind one [`Provider`] trait.
//!
//! A provider makes exactly one model call: messages + tool definitions + [`CallOptions`] in,
//! an [`LlmResponse`] (text, tool calls, [`Usage`], response id) out. Conversation state,
//! budgets and tool execution belong to the harness, not here.
//!
//! This crate ships the [`ScriptedProvider`], which plays recorded responses and records every
//! request it receives — the provider every harness and CLI test runs on.
//!
//! # What this crate must never do
//!
//! - Execute a tool or decide on a budget: a provider reports usage, the harness enforces.
//! - Depend on any other `lsm-*` crate: only `lsm-harness` (and `lsm-tools-kb`, for synthesis
//!   inside a tool) depend on it, and agents can never name it (`cargo xtask check-layers`).
//! - Panic on bad input: a malformed script or a failed call is a [`ProviderError`].

mod scripted;
mod types;

pub use scripted::{ScriptedProvider, ScriptedResponse};
pub use types::*;

/// One model call. Implementations must be cheap to share (`Arc<dyn Provider>`).
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Short provider name for records (`"scripted"`, `"openai"`, …).
    fn name(&self) -> &str;

    /// The model this provider calls.
    fn model(&self) -> &str;

    /// Make one call.
    ///
    /// # Errors
    /// A [`ProviderError`] saying what failed and what to do about it.
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError>;

    /// A conservative estimate of the prompt tokens `request` will cost, used by the harness
    /// before the call. The default over-estimates: one token per three bytes of text.
    fn estimate_prompt_tokens(&self, request: &LlmRequest) -> u64 {
        estimate_tokens_conservatively(request)
    }
}

/// One token per three bytes of message text and tool definitions, rounded up: an
/// over-estimate for every tokenizer we know of on English text and code.
pub fn estimate_tokens_conservatively(request: &LlmRequest) -> u64 {
    let mut bytes: usize = 0;
    for m in &request.messages {
        bytes += m.content.len() + 4;
        for c in &m.tool_calls {
            bytes += c.name.len() + c.arguments.to_string().len();
        }
    }
    for t in &request.tools {
        bytes += t.name.len() + t.description.len() + t.parameters.to_string().len();
    }
    (bytes as u64).div_ceil(3)
}
