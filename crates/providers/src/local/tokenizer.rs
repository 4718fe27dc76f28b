//! The model's tokenizer, read from the GGUF file itself (no `tokenizer.json` is needed).
//!
//! Two kinds exist in the models we run:
//! - `gpt2`: byte-level BPE with merges (SmolLM2, Qwen2.5). Built as a `tokenizers` BPE model
//!   with the pre-tokenizer the file names in `tokenizer.ggml.pre`: Qwen2's split pattern for
//!   `qwen2`, otherwise GPT-2's byte-level pattern with digits split one by one (as SmolLM2's
//!   own tokenizer does).
//! - `llama`: SentencePiece BPE, merges implied by token scores, with byte fallback (Gemma 3).
//!   Implemented here: adjacent pieces are merged highest score first, and a piece that is not
//!   in the vocabulary becomes its UTF-8 bytes (`<0xNN>` tokens).
//!
//! Control tokens (`<|im_start|>`, `<start_of_turn>`, ...) are never produced from text: the
//! chat template inserts them by id, so a user's text that spells one out stays plain text.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use candle_core::quantized::gguf_file::{Content, Value};

/// GGUF token types (`tokenizer.ggml.token_type`).
const TYPE_CONTROL: i32 = 3;
/// A token added to the vocabulary by the model's makers (Qwen2.5's `<tool_call>`).
const TYPE_USER_DEFINED: i32 = 4;
/// A padding slot of the vocabulary, never trained (Qwen2.5 has 271): never generated.
const TYPE_UNUSED: i32 = 5;
const TYPE_BYTE: i32 = 6;

/// Qwen2's pre-tokenizer pattern (its `tokenizer.json`): contractions, letters with at most
/// one leading non-letter, single digits, punctuation runs, newlines, other whitespace.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The piece SentencePiece writes for a space.
const SPM_SPACE: char = '\u{2581}';

/// A tokenizer error: the file lacks or mangles what is needed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TokenizerError(pub String);

fn err(message: impl Into<String>) -> TokenizerError {
    TokenizerError(message.into())
}

enum Encoder {
    Bpe(Box<tokenizers::Tokenizer>),
    Spm(Box<Spm>),
}

/// The tokenizer of one GGUF model.
pub struct GgufTokenizer {
    encoder: Encoder,
    /// Each token's bytes as text; control tokens start with 0xFF (llguidance's marker).
    token_bytes: Vec<Vec<u8>>,
    /// Control tokens by their text.
    control: HashMap<String, u32>,
    /// User-defined tokens by their text (never produced from text either).
    user_defined: HashMap<String, u32>,
    /// Beginning of sequence.
    pub bos: Option<u32>,
    /// End of sequence.
    pub eos: u32,
    /// Whether a prompt starts with `bos`.
    pub add_bos: bool,
}

impl std::fmt::Debug for GgufTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufTokenizer")
            .field("vocab", &self.token_bytes.len())
            .finish_non_exhaustive()
    }
}

fn meta<'a>(content: &'a Content, key: &str) -> Result<&'a Value, TokenizerError> {
    content
        .metadata
        .get(key)
        .ok_or_else(|| err(format!("the model file has no `{key}`")))
}

fn strings(content: &Content, key: &str) -> Result<Vec<String>, TokenizerError> {
    meta(content, key)?
        .to_vec()
        .map_err(|e| err(format!("`{key}`: {e}")))?
        .iter()
        .map(|v| {
            v.to_string()
                .cloned()
                .map_err(|e| err(format!("`{key}`: {e}")))
        })
        .collect()
}

fn opt_u32(content: &Content, key: &str) -> Option<u32> {
    content.metadata.get(key).and_then(|v| v.to_u32().ok())
}

impl GgufTokenizer {
    /// Read the tokenizer from the GGUF metadata.
    ///
    /// # Errors
    /// When the metadata is missing or of an unsupported kind.
    pub fn from_gguf(content: &Content) -> Result<Self, TokenizerError> {
        let kind = meta(content, "tokenizer.ggml.model")?
            .to_string()
            .map_err(|e| err(e.to_string()))?
            .clone();
        let tokens = strings(content, "tokenizer.ggml.tokens")?;
        let types: Vec<i32> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|e| err(e.to_string()))?
                .iter()
                .map(|t| t.to_i32().unwrap_or(1))
                .collect(),
            None => vec![1; tokens.len()],
        };
        let eos = opt_u32(content, "tokenizer.ggml.eos_token_id")
            .ok_or_else(|| err("the model file names no end-of-sequence token"))?;
        let bos = opt_u32(content, "tokenizer.ggml.bos_token_id");
        let add_bos = content
            .metadata
            .get("tokenizer.ggml.add_bos_token")
            .and_then(|v| v.to_bool().ok())
            .unwrap_or(false);
        let of_type = |wanted: i32| -> HashMap<String, u32> {
            tokens
                .iter()
                .zip(&types)
                .enumerate()
                .filter(|(_, (_, t))| **t == wanted)
                .filter_map(|(i, (s, _))| u32::try_from(i).ok().map(|i| (s.clone(), i)))
                .collect()
        };
        let control = of_type(TYPE_CONTROL);
        let user_defined = of_type(TYPE_USER_DEFINED);
        let (encoder, token_bytes) = match kind.as_str() {
            "gpt2" => {
                let merges = strings(content, "tokenizer.ggml.merges")?;
                let bytes = byte_level_bytes(&tokens, &types);
                let pre = content
                    .metadata
                    .get("tokenizer.ggml.pre")
                    .and_then(|v| v.to_string().ok())
                    .map_or("default", String::as_str);
                (Encoder::Bpe(Box::new(bpe(&tokens, &merges, pre)?)), bytes)
            }
            "llama" => {
                let scores: Vec<f32> = meta(content, "tokenizer.ggml.scores")?
                    .to_vec()
                    .map_err(|e| err(e.to_string()))?
                    .iter()
                    .map(|s| s.to_f32().unwrap_or(0.0))
                    .collect();
                let add_space_prefix = content
                    .metadata
                    .get("tokenizer.ggml.add_space_prefix")
                    .and_then(|v| v.to_bool().ok())
                    .unwrap_or(true);
                let bytes = spm_bytes(&tokens, &types);
                (
                    Encoder::Spm(Box::new(Spm::new(
                        &tokens,
                        &types,
                        scores,
                        add_space_prefix,
                    ))),
                    bytes,
                )
            }
            other => {
                return Err(err(format!(
                    "tokenizer kind `{other}` is not supported (gpt2 and llama are)"
                )));
            }
        };
        Ok(GgufTokenizer {
            encoder,
            token_bytes,
            control,
            user_defined,
            bos,
            eos,
            add_bos,
        })
    }

    /// Tokens of plain text (never a control token).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        if text.is_empty() {
            return Vec::new();
        }
        match &self.encoder {
            Encoder::Bpe(t) => t
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .unwrap_or_default(),
            Encoder::Spm(s) => s.encode(text),
        }
    }

    /// The id of a control token, by its text.
    pub fn control(&self, text: &str) -> Option<u32> {
        self.control.get(text).copied()
    }

    /// The id of a control or user-defined token (`<tool_call>`), by its text.
    pub fn special(&self, text: &str) -> Option<u32> {
        self.control(text)
            .or_else(|| self.user_defined.get(text).copied())
    }

    /// Every token's bytes (control tokens marked with a leading 0xFF).
    pub fn token_bytes(&self) -> &[Vec<u8>] {
        &self.token_bytes
    }

    /// The vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.token_bytes.len()
    }

    /// Whether `token` is a control token (it ends generation when sampled freely).
    pub fn is_control(&self, token: u32) -> bool {
        self.bytes_of(token).first() == Some(&0xFF)
    }

    /// The bytes `token` stands for in text (nothing for a control token).
    pub fn bytes_of(&self, token: u32) -> &[u8] {
        usize::try_from(token)
            .ok()
            .and_then(|i| self.token_bytes.get(i))
            .map_or(&[], Vec::as_slice)
    }

    /// The text bytes of `token` (empty for a control token).
    pub fn text_bytes_of(&self, token: u32) -> &[u8] {
        let b = self.bytes_of(token);
        if b.first() == Some(&0xFF) { &[] } else { b }
    }
}

/// The byte-level BPE tokenizer of a `gpt2` GGUF.
fn bpe(
    tokens: &[String],
    merges: &[String],
    pre: &str,
) -> Result<tokenizers::Tokenizer, TokenizerError> {
    use tokenizers::models::bpe::{BPE, Vocab};
    use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
    use tokenizers::pre_tokenizers::{byte_level::ByteLevel, digits::Digits, sequence::Sequence};
    use tokenizers::tokenizer::SplitDelimiterBehavior;
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .filter_map(|(i, t)| u32::try_from(i).ok().map(|i| (t.clone(), i)))
        .collect();
    let merges: Vec<(String, String)> = merges
        .iter()
        .filter_map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
        })
        .collect();
    let model = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| err(format!("the BPE vocabulary is unusable: {e}")))?;
    let mut tokenizer = tokenizers::Tokenizer::new(model);
    let steps = if pre == "qwen2" {
        let split = Split::new(
            SplitPattern::Regex(QWEN2_SPLIT.into()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| err(format!("the qwen2 pre-tokenizer pattern: {e}")))?;
        // The pattern has split the text already: byte-level mapping only.
        vec![split.into(), ByteLevel::new(false, false, false).into()]
    } else {
        vec![
            Digits::new(true).into(),
            ByteLevel::new(false, true, true).into(),
        ]
    };
    tokenizer.with_pre_tokenizer(Some(Sequence::new(steps)));
    Ok(tokenizer)
}

/// GPT-2's map from the printable characters byte-level BPE writes back to bytes.
fn byte_level_decoder() -> HashMap<char, u8> {
    let mut printable: Vec<u8> = (b'!'..=b'~').collect();
    printable.extend(0xA1..=0xAC);
    printable.extend(0xAE..=0xFF);
    let mut map: HashMap<char, u8> = printable
        .iter()
        .filter_map(|&b| char::from_u32(u32::from(b)).map(|c| (c, b)))
        .collect();
    let mut n = 0u32;
    for b in 0u8..=255 {
        if !printable.contains(&b) {
            if let Some(c) = char::from_u32(256 + n) {
                map.insert(c, b);
            }
            n += 1;
        }
    }
    map
}

fn marked(text: &str) -> Vec<u8> {
    let mut v = vec![0xFF];
    v.extend_from_slice(text.as_bytes());
    v
}

fn byte_level_bytes(tokens: &[String], types: &[i32]) -> Vec<Vec<u8>> {
    let decoder = byte_level_decoder();
    tokens
        .iter()
        .zip(types.iter().chain(std::iter::repeat(&1)))
        .map(|(t, ty)| {
            if *ty == TYPE_CONTROL || *ty == TYPE_UNUSED {
                return marked(t);
            }
            match t.chars().map(|c| decoder.get(&c).copied()).collect() {
                Some(bytes) => bytes,
                None => t.as_bytes().to_vec(),
            }
        })
        .collect()
}

/// `<0xNN>` → NN.
fn byte_token(t: &str) -> Option<u8> {
    let hex = t.strip_prefix("<0x")?.strip_suffix('>')?;
    u8::from_str_radix(hex, 16).ok()
}

fn spm_bytes(tokens: &[String], types: &[i32]) -> Vec<Vec<u8>> {
    tokens
        .iter()
        .zip(types.iter().chain(std::iter::repeat(&1)))
        .map(|(t, ty)| match *ty {
            TYPE_CONTROL => marked(t),
            TYPE_BYTE => byte_token(t).map_or_else(|| marked(t), |b| vec![b]),
            _ => t.replace(SPM_SPACE, " ").into_bytes(),
        })
        .collect()
}

/// SentencePiece BPE over token scores, with byte fallback.
struct Spm {
    pieces: HashMap<String, (u32, f32)>,
    bytes: [Option<u32>; 256],
    unk: u32,
    add_space_prefix: bool,
}

/// A candidate merge of two adjacent symbols, ordered by score then position.
#[derive(PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    len: usize,
}

impl Eq for Bigram {}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// One symbol of the text being merged: a byte range, linked to its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

impl Spm {
    fn new(tokens: &[String], types: &[i32], scores: Vec<f32>, add_space_prefix: bool) -> Self {
        let mut pieces = HashMap::with_capacity(tokens.len());
        let mut bytes = [None; 256];
        let mut unk = 0;
        for (i, t) in tokens.iter().enumerate() {
            let Ok(id) = u32::try_from(i) else { break };
            let ty = types.get(i).copied().unwrap_or(1);
            match ty {
                TYPE_CONTROL => {}
                TYPE_BYTE => {
                    if let Some(b) = byte_token(t) {
                        bytes[usize::from(b)] = Some(id);
                    }
                }
                2 => unk = id,
                _ => {
                    pieces.insert(t.clone(), (id, scores.get(i).copied().unwrap_or(0.0)));
                }
            }
        }
        Spm {
            pieces,
            bytes,
            unk,
            add_space_prefix,
        }
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        let mut s = String::with_capacity(text.len() + 3);
        if self.add_space_prefix {
            s.push(SPM_SPACE);
        }
        for c in text.chars() {
            s.push(if c == ' ' { SPM_SPACE } else { c });
        }
        let mut symbols: Vec<Symbol> = s
            .char_indices()
            .enumerate()
            .map(|(i, (start, c))| Symbol {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: None,
            })
            .collect();
        let n = symbols.len();
        for (i, sym) in symbols.iter_mut().enumerate() {
            sym.next = (i + 1 < n).then_some(i + 1);
        }
        let mut queue = BinaryHeap::new();
        let try_push = |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: usize| {
            let Some(right) = symbols[left].next else {
                return;
            };
            let start = symbols[left].start;
            let len = symbols[left].len + symbols[right].len;
            if let Some((_, score)) = s.get(start..start + len).and_then(|p| self.pieces.get(p)) {
                queue.push(Bigram {
                    score: *score,
                    left,
                    len,
                });
            }
        };
        for i in 0..n.saturating_sub(1) {
            try_push(&mut queue, &symbols, i);
        }
        while let Some(b) = queue.pop() {
            let left = b.left;
            // Stale: either side changed since this candidate was queued.
            let Some(right) = symbols[left].next else {
                continue;
            };
            if symbols[left].len == 0 || symbols[left].len + symbols[right].len != b.len {
                continue;
            }
            symbols[left].len = b.len;
            symbols[right].len = 0;
            symbols[left].next = symbols[right].next;
            if let Some(next) = symbols[right].next {
                symbols[next].prev = Some(left);
            }
            if let Some(prev) = symbols[left].prev {
                try_push(&mut queue, &symbols, prev);
            }
            try_push(&mut queue, &symbols, left);
        }
        let mut out = Vec::new();
        let mut at = (n > 0).then_some(0);
        while let Some(i) = at {
            let sym = symbols[i];
            let piece = &s[sym.start..sym.start + sym.len];
            match self.pieces.get(piece) {
                Some((id, _)) => out.push(*id),
                None => out.extend(
                    piece
                        .bytes()
                        .map(|b| self.bytes[usize::from(b)].unwrap_or(self.unk)),
                ),
            }
            at = sym.next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spm(vocab: &[(&str, f32)]) -> Spm {
        let mut tokens: Vec<String> = vec!["<unk>".into()];
        let mut types = vec![2];
        let mut scores = vec![0.0];
        for b in 0u8..=255 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(TYPE_BYTE);
            scores.push(0.0);
        }
        for (t, s) in vocab {
            tokens.push((*t).into());
            types.push(1);
            scores.push(*s);
        }
        Spm::new(&tokens, &types, scores, false)
    }

    #[test]
    fn spm_merges_by_score_and_falls_back_to_bytes() {
        let t = spm(&[
            ("a", -1.0),
            ("b", -1.0),
            ("ab", -2.0),
            ("▁", -1.0),
            ("▁ab", -0.5),
        ]);
        let id = |p: &str| t.pieces[p].0;
        assert_eq!(t.encode("ab"), [id("ab")]);
        assert_eq!(t.encode(" ab"), [id("▁ab")]);
        // "é" is not in the vocabulary: its two UTF-8 bytes.
        assert_eq!(t.encode("aé"), [id("a"), 1 + 0xC3, 1 + 0xA9]);
    }

    #[test]
    fn byte_level_maps_every_byte_back() {
        let d = byte_level_decoder();
        assert_eq!(d.len(), 256);
        assert_eq!(d[&'Ġ'], b' ');
        assert_eq!(d[&'Ċ'], b'\n');
        assert_eq!(d[&'a'], b'a');
    }
}
