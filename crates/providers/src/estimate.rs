//! Prompt-token estimates made before a call, for the harness's budget pre-check.
//!
//! OpenAI model families are counted with their own tokenizer (`tiktoken-rs`: `o200k_base`
//! for GPT-4o, GPT-4.1, GPT-5 and the o-series, `cl100k_base` for GPT-4 and GPT-3.5), plus a
//! small per-message and per-tool overhead. Every other model gets the conservative estimate
//! of one token per three bytes, which over-estimates every tokenizer we know of on English
//! text and code.

use tiktoken_rs::CoreBPE;
use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};

use crate::wire::WireCache;
use crate::{LlmRequest, Message, ToolDefinition};

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
        let units = request
            .messages
            .iter()
            .map(|m| self.message_units(m))
            .sum::<u64>()
            + request
                .tools
                .iter()
                .map(|t| self.tool_units(t))
                .sum::<u64>();
        self.total(units)
    }

    /// As [`Estimator::estimate`], with each message's and tool's count taken from `cache`
    /// when it was counted before (a tokenizer's count of a long history is costly; it is
    /// made once per message, not once per call).
    pub(crate) fn estimate_cached(&self, request: &LlmRequest, cache: &mut WireCache) -> u64 {
        // The messages this history shares with the last one estimated are summed already.
        let mut counts = std::mem::take(&mut cache.counts);
        let messages = counts.units(&request.messages, |m| {
            cache.tokens(m, || self.message_units(m))
        });
        cache.counts = counts;
        let units = messages
            + request
                .tools
                .iter()
                .map(|t| cache.tokens(t, || self.tool_units(t)))
                .sum::<u64>();
        self.total(units)
    }

    /// What one message adds: tokens with a tokenizer, bytes for the conservative estimate.
    fn message_units(&self, m: &Message) -> u64 {
        match self {
            Estimator::Conservative => {
                let calls: usize = m
                    .tool_calls
                    .iter()
                    .map(|c| c.name.len() + json_len(&c.arguments))
                    .sum();
                (m.content.len() + 4 + calls) as u64
            }
            Estimator::Tiktoken(t) => {
                let count = tokenizer_count(*t);
                let mut json = String::new();
                let mut total = PER_MESSAGE + count(&m.content);
                for c in &m.tool_calls {
                    json.clear();
                    let _ = write_json(&mut json, &c.arguments);
                    total += PER_MESSAGE + count(&c.name) + count(&json);
                }
                total
            }
        }
    }

    /// What one tool definition adds, in the same units as [`Estimator::message_units`].
    fn tool_units(&self, t: &ToolDefinition) -> u64 {
        match self {
            Estimator::Conservative => {
                (t.name.len() + t.description.len() + json_len(&t.parameters)) as u64
            }
            Estimator::Tiktoken(k) => {
                let count = tokenizer_count(*k);
                let mut json = String::new();
                let _ = write_json(&mut json, &t.parameters);
                PER_TOOL + count(&t.name) + count(&t.description) + count(&json)
            }
        }
    }

    fn total(&self, units: u64) -> u64 {
        match self {
            Estimator::Conservative => units.div_ceil(3),
            Estimator::Tiktoken(_) => PRIMING + units,
        }
    }
}

/// Counts the tokens of a text with `tokenizer`'s BPE.
fn tokenizer_count(tokenizer: Tokenizer) -> impl Fn(&str) -> u64 {
    let bpe: &CoreBPE = match tokenizer {
        Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        _ => tiktoken_rs::o200k_base_singleton(),
    };
    move |text| bpe.encode_ordinary(text).len() as u64
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
    Estimator::Conservative.estimate(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn request() -> LlmRequest {
        LlmRequest {
            messages: vec![
                Message::system("You are a careful assistant. Answer briefly.").into(),
                Message::user("Summarize the notes in notes.md into summary.md, please.").into(),
            ],
            tools: vec![
                ToolDefinition {
                    name: "read_file".into(),
                    description: "Read a text file.".into(),
                    parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
                }
                .into(),
            ],
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

    #[test]
    fn cached_estimates_equal_fresh_ones() {
        let r = request();
        for e in [
            Estimator::for_model("gpt-4o", true),
            Estimator::Conservative,
        ] {
            let mut cache = WireCache::default();
            let fresh = e.estimate(&r);
            assert_eq!(e.estimate_cached(&r, &mut cache), fresh);
            assert_eq!(e.estimate_cached(&r, &mut cache), fresh, "from the cache");
            // The history changes between calls: grown, edited in the middle, cut.
            let mut r = r.clone();
            let steps: [fn(&mut LlmRequest); 3] = [
                |r| r.messages.push(Arc::new(Message::user("one more line"))),
                |r| r.messages[1] = Arc::new(Message::user("an edited message, longer")),
                |r| r.messages.truncate(1),
            ];
            for step in steps {
                step(&mut r);
                assert_eq!(e.estimate_cached(&r, &mut cache), e.estimate(&r));
            }
        }
    }
}
