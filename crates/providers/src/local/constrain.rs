//! Constrained decoding with llguidance: which tokens may come next so that the answer stays
//! inside a JSON schema (the decision schema of `crate::decision`).
//!
//! The schema is compiled with fixed separators (`", "` and `": "`, no other whitespace), the
//! layout the prompt's example shows, and in the property order the schema text lists
//! (action first, see `DECISION_KEY_ORDER`).

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Constraint, ParserFactory};
use serde_json::{Value, json};

use super::tokenizer::GgufTokenizer;

/// llguidance's view of the model's tokenizer.
struct Env {
    trie: TokTrie,
    tokenizer: Arc<GgufTokenizer>,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.tokenizer.encode(&String::from_utf8_lossy(s))
    }
}

/// Why constrained decoding could not be prepared, or a schema not compiled into a
/// grammar. The messages are llguidance's (or the JSON parser's); simplify the schema.
#[derive(Debug, thiserror::Error)]
pub enum GrammarError {
    /// The vocabulary is larger than llguidance supports.
    #[error("{0}")]
    Vocabulary(std::num::TryFromIntError),
    /// llguidance refused the tokenizer.
    #[error("{0}")]
    Factory(String),
    /// The schema text is not JSON.
    #[error("{0}")]
    SchemaNotJson(serde_json::Error),
    /// llguidance could not compile the schema.
    #[error("{0}")]
    Compile(String),
}

/// Compiles decision schemas into per-call constraints for one model.
pub struct Grammars {
    factory: ParserFactory,
}

impl Grammars {
    /// Build the token trie once per model. `end` is the token that ends an answer.
    ///
    /// # Errors
    /// [`GrammarError::Vocabulary`] or [`GrammarError::Factory`], with llguidance's message.
    pub fn new(tokenizer: Arc<GgufTokenizer>, end: u32) -> Result<Self, GrammarError> {
        let vocab = u32::try_from(tokenizer.vocab_size()).map_err(GrammarError::Vocabulary)?;
        let mut info = TokRxInfo::new(vocab, end);
        info.tok_bos = tokenizer.bos;
        info.tok_end_of_turn = Some(end);
        let trie = TokTrie::from(&info, tokenizer.token_bytes());
        let env: TokEnv = Arc::new(Env { trie, tokenizer });
        let mut factory =
            ParserFactory::new_simple(&env).map_err(|e| GrammarError::Factory(e.to_string()))?;
        factory.quiet();
        Ok(Grammars { factory })
    }

    /// A fresh constraint for an answer valid under `schema_text` (JSON schema text).
    ///
    /// # Errors
    /// [`GrammarError::SchemaNotJson`] or [`GrammarError::Compile`] when the schema cannot be
    /// compiled.
    pub fn constraint(&self, schema_text: &str) -> Result<Constraint, GrammarError> {
        let mut schema: Value =
            serde_json::from_str(schema_text).map_err(GrammarError::SchemaNotJson)?;
        if let Value::Object(map) = &mut schema {
            map.insert(
                "x-guidance".into(),
                json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}),
            );
        }
        let parser = self
            .factory
            .create_parser(TopLevelGrammar::from_json_schema(schema))
            .map_err(|e| GrammarError::Compile(e.to_string()))?;
        Ok(Constraint::new(parser))
    }
}
