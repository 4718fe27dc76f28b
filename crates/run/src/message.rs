//! The wire-neutral request and response types every provider speaks.
//!
//! A request *shares* its messages and tools with whoever made it (`Arc`): assembling the
//! next call over a long history costs one reference count per message, not a copy of it,
//! and a provider may remember what it derived from a message (its wire JSON, its token
//! count) for as long as the message lives.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

mod pricing;
mod progress;

pub use pricing::Pricing;
pub use progress::ProviderEvent;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions from the harness (system prompt, standing memory, compaction notes).
    System,
    /// The user's or agent's request.
    User,
    /// The model.
    Assistant,
    /// A tool result, answering one tool call by id.
    Tool,
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolCall {
    /// Provider-assigned id, echoed back with the result.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as parsed JSON (a provider that receives a JSON string parses it).
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Text content.
    pub content: String,
    /// Tool calls (assistant messages only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call this message answers (tool messages only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }
    /// An assistant message, with the tool calls it requested.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message {
            role: Role::Assistant,
            content: content.into(),
            tool_calls,
            tool_call_id: None,
        }
    }
    /// A tool result answering `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Tool name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of its arguments.
    pub parameters: serde_json::Value,
}

/// Per-call options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallOptions {
    /// Upper bound on generated tokens (the harness caps it to what is left of the budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Server-side conversation chaining (OpenAI Responses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    /// Stable key for the provider's prompt cache (`<agent>:<label>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    /// How long the provider should keep the cached prompt (OpenAI Responses
    /// `prompt_cache_retention`, e.g. `"24h"`). `None`: the provider's configured default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_retention: Option<String>,
}

/// Everything a provider needs for one call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    /// The conversation, system messages first; shared with the context it came from
    /// (serialized as plain messages).
    pub messages: Vec<Arc<Message>>,
    /// The tools offered for this call (may be empty); shared with the configuration.
    pub tools: Vec<Arc<ToolDefinition>>,
    /// Options.
    pub options: CallOptions,
}

/// Token usage reported by the provider for one call.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Usage {
    /// Prompt tokens (cached ones included).
    #[serde(default)]
    pub input_tokens: u64,
    /// Generated tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache (part of `input_tokens`).
    #[serde(default)]
    pub cached_tokens: u64,
    /// Prompt tokens written to the provider's cache by this call (part of `input_tokens`;
    /// Anthropic reports them, and bills them above the plain input price).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Input plus output: what counts against a token budget.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// What one call produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// The model's text (may be empty when it only calls tools).
    pub text: String,
    /// Requested tool calls (may be several: parallel calls).
    pub tool_calls: Vec<ToolCall>,
    /// Reported usage.
    pub usage: Usage,
    /// The server's response id, for chaining.
    pub response_id: Option<String>,
}
