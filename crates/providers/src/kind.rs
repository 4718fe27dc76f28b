//! [`ProviderKind`]: the API flavour of a provider, its names and its defaults.

use serde::{Deserialize, Serialize};

/// The API flavour of a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ProviderKind {
    /// OpenAI Chat Completions (`/chat/completions`) at OpenAI.
    #[serde(rename = "openai")]
    OpenAi,
    /// OpenAI Responses (`/responses`): server-side conversation chaining.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Anthropic Messages (`/messages`).
    #[serde(rename = "anthropic")]
    Anthropic,
    /// Any server speaking the Chat Completions protocol (Ollama, vLLM, llama.cpp's server,
    /// LM Studio, OpenRouter): `base_url` required, key optional, no OpenAI-only options.
    #[serde(rename = "compatible")]
    Compatible,
}

impl ProviderKind {
    /// Every kind, in the order the CLI lists them.
    pub const ALL: [ProviderKind; 4] = [
        ProviderKind::OpenAi,
        ProviderKind::OpenAiResponses,
        ProviderKind::Anthropic,
        ProviderKind::Compatible,
    ];

    /// The name used in configuration and records.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiResponses => "openai-responses",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Compatible => "compatible",
        }
    }

    /// Parse a configuration name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The default API base URL (`None`: must be configured).
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses => {
                Some("https://api.openai.com/v1")
            }
            ProviderKind::Anthropic => Some("https://api.anthropic.com/v1"),
            ProviderKind::Compatible => None,
        }
    }

    /// The environment variable the key is read from by default (`None`: no key needed).
    pub fn default_api_key_env(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Compatible => None,
        }
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
