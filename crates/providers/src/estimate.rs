//! Prompt-token estimates made before a call, for the harness's budget pre-check.
//!
//! OpenAI model families are counted with their own tokenizer (`tiktoken-rs`: `o200k_base`
//! for GPT-4o, GPT-4.1, GPT-5 and the o-series, `cl100k_base` for GPT-4 and GPT-3.5), plus a
//! small per-message and per-tool overhead. Every other model gets the conservative estimate
//! of one token per three bytes, which over-estimates every tokenizer we know of on English
//! text and code.

use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};

use crate::LlmRequest;

/// Tokens the chat format adds around each message (role, separators).
const PER_MESSAGE: u64 = 4;
/// Tokens the format adds around each tool definition.
const PER_TOOL: u64 = 8;
/// Tokens that prime the model's answer.
const PRIMING: u64 = 3;

/// How prompts of one model are counted.
#[derive(Clone, Copy)]
pub enum Estimator {
    /// An OpenAI tokenizer.
    Tiktoken(Tokenizer),
    /// One token per three bytes, rounded up.
    Conservative,
}

impl std::fmt::Debug for Estimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Estimator::Tiktoken(t) => write!(f, "Tiktoken({t:?})"),
            Estimator::Conservative => f.write_str("Conservative"),
        }
    }
}

impl Estimator {
    /// The estimator for `model`. `openai_family` says the model is served by OpenAI (or is an
    /// OpenAI model behind a compatible server): unknown names then fall back to `o200k_base`.
    /// Names tiktoken knows (`gpt-4o-mini`, `o3`, `gpt-3.5-turbo`, …) use their tokenizer
    /// wherever they are served; anything else is estimated conservatively.
    pub fn for_model(model: &str, openai_family: bool) -> Self {
        match get_tokenizer(model) {
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) => {
                Estimator::Tiktoken(Tokenizer::O200kBase)
            }
            Some(Tokenizer::Cl100kBase) => Estimator::Tiktoken(Tokenizer::Cl100kBase),
            Some(_) => Estimator::Conservative,
            None if openai_family => Estimator::Tiktoken(Tokenizer::O200kBase),
            None => Estimator::Conservative,
        }
    }

    /// The estimated prompt tokens of `request`.
    pub fn estimate(&self, request: &LlmRequest) -> u64 {
        match self {
            Estimator::Conservative => estimate_tokens_conservatively(request),
            Estimator::Tiktoken(t) => {
                let bpe: &CoreBPE = match t {
                    Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
                    _ => tiktoken_rs::o200k_base_singleton(),
                };
                count_with(|text| bpe.encode_ordinary(text).len() as u64, request)
            }
        }
    }
}

fn count_with(count: impl Fn(&str) -> u64, request: &LlmRequest) -> u64 {
    let mut total = PRIMING;
    // One buffer for every JSON text counted (arguments, schemas), not one per value.
    let mut json = String::new();
    let mut count_json = |v: &serde_json::Value| {
        json.clear();
        let _ = write_json(&mut json, v);
        count(&json)
    };
    for m in &request.messages {
        total += PER_MESSAGE + count(&m.content);
        for c in &m.tool_calls {
            total += PER_MESSAGE + count(&c.name) + count_json(&c.arguments);
        }
    }
    for t in &request.tools {
        total += PER_TOOL + count(&t.name) + count(&t.description) + count_json(&t.parameters);
    }
    total
}

/// `v`'s compact JSON text into `out` (what `to_string` gives, without a new allocation).
fn write_json(out: &mut String, v: &serde_json::Value) -> std::fmt::Result {
    use std::fmt::Write;
    write!(out, "{v}")
}

/// The length of `v`'s compact JSON text, counted without building it.
fn json_len(v: &serde_json::Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    let _ = serde_json::to_writer(&mut counter, v);
    counter.0
}

/// One token per three bytes of message text and tool definitions, rounded up: an
/// over-estimate for every tokenizer we know of on English text and code.
pub fn estimate_tokens_conservatively(request: &LlmRequest) -> u64 {
    let mut bytes: usize = 0;
    for m in &request.messages {
        bytes += m.content.len() + 4;
        for c in &m.tool_calls {
            bytes += c.name.len() + json_len(&c.arguments);
        }
    }
    for t in &request.tools {
        bytes += t.name.len() + t.description.len() + json_len(&t.parameters);
    }
    (bytes as u64).div_ceil(3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, ToolDefinition};
    use serde_json::json;

    fn request() -> LlmRequest {
        LlmRequest {
            messages: vec![
                Message::system("You are a careful assistant. Answer briefly."),
                Message::user("Summarize the notes in notes.md into summary.md, please."),
            ],
            tools: vec![ToolDefinition {
                name: "read_file".into(),
                description: "Read a text file.".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn openai_models_use_their_tokenizer() {
        assert!(matches!(
            Estimator::for_model("gpt-4o-mini", true),
            Estimator::Tiktoken(Tokenizer::O200kBase)
        ));
        assert!(matches!(
            Estimator::for_model("gpt-4", false),
            Estimator::Tiktoken(Tokenizer::Cl100kBase)
        ));
        assert!(matches!(
            Estimator::for_model("some-future-model", true),
            Estimator::Tiktoken(Tokenizer::O200kBase)
        ));
        assert!(matches!(
            Estimator::for_model("claude-sonnet-4-5", false),
            Estimator::Conservative
        ));
        assert!(matches!(
            Estimator::for_model("llama3.2", false),
            Estimator::Conservative
        ));
    }

    #[test]
    fn json_is_counted_as_its_compact_text() {
        let v = json!({"path": "a b.txt", "n": [1, 2.5, null], "s": "é\"q"});
        assert_eq!(json_len(&v), v.to_string().len());
        let mut out = String::from("stale");
        out.clear();
        write_json(&mut out, &v).unwrap();
        assert_eq!(out, v.to_string());
    }

    #[test]
    fn tokenizer_counts_are_exact_for_text_and_below_the_conservative_bound() {
        let bpe = tiktoken_rs::o200k_base_singleton();
        assert_eq!(bpe.encode_ordinary("hello world").len(), 2);
        let r = request();
        let exact = Estimator::for_model("gpt-4o", true).estimate(&r);
        let conservative = Estimator::Conservative.estimate(&r);
        assert!(exact > 20, "{exact}");
        assert!(exact < conservative, "{exact} vs {conservative}");
    }
}
