//! LLM providers behind one [`Provider`] trait.
//!
//! A provider makes exactly one model call: messages + tool definitions + [`CallOptions`] in,
//! an [`LlmResponse`] (text, tool calls, [`Usage`], response id) out. Conversation state,
//! budgets and tool execution belong to the harness, not here.
//!
//! - [`HttpProvider`] (built from a [`ProviderConfig`]) speaks OpenAI Chat Completions, OpenAI
//!   Responses, Anthropic Messages, and any OpenAI-compatible server, with connect and read
//!   timeouts, retries with exponential backoff and jitter (honouring `Retry-After`), specific
//!   errors per failure, optional SSE streaming reported through a [`CallObserver`], and
//!   prompt-token estimates (`tiktoken-rs` for OpenAI models).
//! - [`StrictJsonProvider`] wraps any provider for models without function calling.
//! - `LocalProvider` (feature `local`) runs a GGUF model in-process with candle, answering
//!   in the strict-JSON protocol under a constraint built from [`decision_schema`] when tools
//!   are offered (every answer a valid tool call or `DONE`), in plain text otherwise.
//! - [`ScriptedProvider`] plays recorded responses and records every request it receives —
//!   the provider every harness and CLI test runs on.
//! - [`Pricing`] turns a call's usage into dollars.
//!
//! # What this crate must never do
//!
//! - Execute a tool or decide on a budget: a provider reports usage, the harness enforces.
//! - Depend on any other `lsm-*` crate: only `lsm-harness` (and `lsm-tools-kb`, for synthesis
//!   inside a tool) depend on it, and agents can never name it (`cargo xtask check-layers`).
//! - Read an API key from anywhere but the environment, or write one to a log.
//! - Panic on bad input: a malformed script, answer or stream is a [`ProviderError`].

mod answer;
mod anthropic;
mod config;
mod decision;
mod endpoint;
mod error;
mod estimate;
mod events;
mod http;
mod kind;
#[cfg(feature = "local")]
mod local;
mod models;
mod openai_chat;
mod openai_responses;
mod protocol_prompt;
mod scripted;
mod sse;
mod strict_json;
mod task_steps;
#[cfg(test)]
mod test_values;
mod transport;
mod windows;
mod wire;

pub use config::{ProviderConfig, process_env};
pub use decision::{
    DECISION_KEY_ORDER, DONE_ACTION, decision_schema, decision_schema_text, grammar_ready_schema,
};
pub use endpoint::{HttpProvider, HttpSettings};
pub use error::ProviderError;
pub use estimate::{Estimator, estimate_tokens_conservatively};
pub use events::{CallObserver, CollectingObserver, NoObserver, ProviderEvent};
pub use kind::ProviderKind;
#[cfg(feature = "local")]
pub use local::{LocalCallStats, LocalFinish, LocalProvider, LocalSettings};
pub use lsm_run::message::{
    CallOptions, LlmRequest, LlmResponse, Message, Pricing, Role, ToolCall, ToolDefinition, Usage,
};
pub use models::{
    DEFAULT_LOCAL_MODEL_FILE, MODEL_CACHE_ENV, default_local_model_path, model_cache_dir,
};
pub use protocol_prompt::{next_example, protocol_tool_list};
pub use scripted::{ScriptedProvider, ScriptedResponse, ScriptedToolCall};
pub use strict_json::{StrictJsonProvider, from_protocol_answer, to_protocol_request};
pub use windows::known_context_window;

/// One model call. Implementations must be cheap to share (`Arc<dyn Provider>`).
///
/// Only [`Provider::complete`] is required; the other methods have defaults that suit a
/// provider without prices, streaming or a tokenizer.
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

    /// Make one call, reporting progress (streamed text, tool-call progress, retries, a reset
    /// conversation chain) to `observer` as it happens. Dropping the returned future aborts the
    /// call (an HTTP request in flight is cancelled).
    ///
    /// # Errors
    /// As [`Provider::complete`].
    async fn complete_observed(
        &self,
        request: &LlmRequest,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        let _ = observer;
        self.complete(request).await
    }

    /// A conservative estimate of the prompt tokens `request` will cost, used by the harness
    /// before the call. The default over-estimates: one token per three bytes of text.
    fn estimate_prompt_tokens(&self, request: &LlmRequest) -> u64 {
        estimate_tokens_conservatively(request)
    }

    /// The model's prices, when configured: the harness turns usage into cost with them.
    fn pricing(&self) -> Option<Pricing> {
        None
    }

    /// How many tokens (prompt and answer together) the model accepts, when known: the
    /// harness compacts a context whose prompt would not fit. The default knows none.
    fn context_window(&self) -> Option<u64> {
        None
    }
}
