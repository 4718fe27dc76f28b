//! The network: a quantized GGUF model run by candle on the CPU, and its chat format.
//!
//! Three architectures are supported, those of the small models `cargo xtask fetch-model`
//! knows: `qwen2` (Qwen2.5, ChatML turns), `llama` (SmolLM2, ChatML turns) and `gemma3`
//! (Gemma 3, `<start_of_turn>` turns, no system role: the system text opens the first user
//! turn).

use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_gemma3, quantized_llama, quantized_qwen2};

use super::native::{CALL_CLOSE, CALL_OPEN};
use super::requantize;
use super::tokenizer::GgufTokenizer;

/// The model file, or its tensors converted in memory ([`requantize::convert`]).
trait ReadSeek: std::io::Read + std::io::Seek {}
impl<T: std::io::Read + std::io::Seek> ReadSeek for T {}

/// How turns are written for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatFormat {
    /// `<|im_start|>role\n…<|im_end|>\n` (SmolLM2, Qwen2.5).
    ChatMl,
    /// `<start_of_turn>user\n…<end_of_turn>\n`, `model` for the assistant (Gemma).
    Gemma,
}

enum Net {
    Llama(Box<quantized_llama::ModelWeights>),
    Gemma3(Box<quantized_gemma3::ModelWeights>),
    Qwen2(Box<quantized_qwen2::ModelWeights>),
}

/// The most positions used with a Qwen2 model: candle computes its rotary tables for the
/// whole training context (32k for Qwen2.5), more than a local run ever fills on a CPU.
const QWEN2_MAX_POSITIONS: usize = 32_768;

/// How a model's prompts are written and its answers end: shared by the inference thread
/// and the caller (who estimates prompt sizes).
#[derive(Debug, Clone)]
pub struct Chat {
    /// The tokenizer read from the model file.
    pub tokenizer: Arc<GgufTokenizer>,
    /// How turns are written.
    pub format: ChatFormat,
    /// The token that ends the model's turn (also accepted: `tokenizer.eos`).
    pub end_of_turn: u32,
    /// The `<tool_call>` and `</tool_call>` tokens, when the model was trained to call tools
    /// with them (its chat template uses them): such a model is spoken to in that format
    /// (`native.rs`).
    pub tool_call: Option<(u32, u32)>,
}

/// A loaded model: network, chat format, context limit.
pub struct Weights {
    net: Net,
    /// Prompt format and tokenizer.
    pub chat: Chat,
    /// The most positions the network supports (its training context, and candle's limit).
    pub max_positions: usize,
}

/// Why a model file could not be loaded; reported as [`crate::ProviderError::ModelFile`].
/// Use a GGUF file of a supported architecture (`cargo xtask fetch-model` fetches one).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened.
    #[error("cannot open it: {0}")]
    Open(std::io::Error),
    /// The file is not GGUF.
    #[error("cannot load it: it is not a GGUF model file ({0})")]
    NotGguf(candle_core::Error),
    /// The file's tokenizer metadata is missing or unsupported.
    #[error(transparent)]
    Tokenizer(#[from] super::tokenizer::TokenizerError),
    /// Tensors without a SIMD kernel could not be converted.
    #[error(transparent)]
    Convert(#[from] requantize::ConvertError),
    /// candle could not build the network from the file.
    #[error("candle cannot load it: {0}")]
    Candle(candle_core::Error),
    /// The model's architecture is not one this provider runs.
    #[error("its architecture `{0}` is not supported (qwen2, llama and gemma3 are)")]
    Architecture(String),
    /// The thread pool for inference could not be started (out of resources).
    #[error("cannot start its threads: {0}")]
    Threads(rayon::ThreadPoolBuildError),
    /// Constrained decoding could not be prepared for the model's tokenizer.
    #[error("cannot prepare constrained decoding: {0}")]
    Grammars(super::constrain::GrammarError),
}

impl Weights {
    /// Read a GGUF file.
    ///
    /// # Errors
    /// A [`LoadError`] saying what is wrong with the file.
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        let mut file = std::fs::File::open(path).map_err(LoadError::Open)?;
        let mut content = gguf_file::Content::read(&mut file).map_err(LoadError::NotGguf)?;
        let arch = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        let trained = content
            .metadata
            .get(&format!("{arch}.context_length"))
            .and_then(|v| v.to_u32().ok())
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(2048);
        let tokenizer = GgufTokenizer::from_gguf(&content)?;
        let template_calls_tools = content
            .metadata
            .get("tokenizer.chat_template")
            .and_then(|v| v.to_string().ok())
            .is_some_and(|t| t.contains("<tool_call>"));
        let device = Device::Cpu;
        let converted = requantize::convert(&mut content, &mut file)?;
        let mut reader: Box<dyn ReadSeek> = match converted {
            Some(requantize::Converted {
                reader: memory,
                tensors,
            }) => {
                tracing::info!(
                    tensors,
                    "tensors without a SIMD kernel in candle converted to Q8_0"
                );
                Box::new(memory)
            }
            None => Box::new(file),
        };
        let (net, format, limit) = match arch.as_str() {
            "llama" => (
                Net::Llama(Box::new(
                    quantized_llama::ModelWeights::from_gguf(content, &mut reader, &device)
                        .map_err(LoadError::Candle)?,
                )),
                ChatFormat::ChatMl,
                quantized_llama::MAX_SEQ_LEN,
            ),
            "gemma3" => (
                Net::Gemma3(Box::new(
                    quantized_gemma3::ModelWeights::from_gguf(content, &mut reader, &device)
                        .map_err(LoadError::Candle)?,
                )),
                ChatFormat::Gemma,
                quantized_gemma3::MAX_SEQ_LEN,
            ),
            "qwen2" => (
                Net::Qwen2(Box::new(
                    quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, &device)
                        .map_err(LoadError::Candle)?,
                )),
                ChatFormat::ChatMl,
                QWEN2_MAX_POSITIONS,
            ),
            other => {
                return Err(LoadError::Architecture(other.to_string()));
            }
        };
        let end_of_turn = match format {
            ChatFormat::ChatMl => tokenizer.control("<|im_end|>"),
            ChatFormat::Gemma => tokenizer.control("<end_of_turn>"),
        }
        .unwrap_or(tokenizer.eos);
        let tool_call = match (
            format,
            tokenizer.special("<tool_call>"),
            tokenizer.special("</tool_call>"),
        ) {
            (ChatFormat::ChatMl, Some(open), Some(close)) if template_calls_tools => {
                Some((open, close))
            }
            _ => None,
        };
        Ok(Weights {
            net,
            chat: Chat {
                tokenizer: Arc::new(tokenizer),
                format,
                end_of_turn,
                tool_call,
            },
            max_positions: trained.min(limit),
        })
    }

    /// Run `tokens` at positions `pos..`; the logits of the last one. `pos == 0` starts a
    /// new sequence (the key-value cache is reset); otherwise `tokens` must be one token
    /// continuing the cached sequence.
    ///
    /// # Errors
    /// candle's error.
    pub fn forward(&mut self, tokens: &[u32], pos: usize) -> candle_core::Result<Vec<f32>> {
        let input = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
        let logits = match &mut self.net {
            Net::Llama(m) => m.forward(&input, pos)?,
            Net::Gemma3(m) => m.forward(&input, pos)?,
            Net::Qwen2(m) => m.forward(&input, pos)?,
        };
        logits
            .squeeze(0)?
            .to_dtype(candle_core::DType::F32)?
            .to_vec1()
    }
}

impl Chat {
    /// The prompt's tokens: `messages` (role, content) in the chat format, ending with the
    /// opening of the assistant's turn. Control tokens come only from here, never from text.
    pub fn render(&self, messages: &[(String, String)]) -> Vec<u32> {
        let t = &self.tokenizer;
        let mut out = Vec::new();
        if t.add_bos
            && let Some(bos) = t.bos
        {
            out.push(bos);
        }
        match self.format {
            ChatFormat::ChatMl => {
                let (start, end) = (t.control("<|im_start|>"), t.control("<|im_end|>"));
                let turn = |role: &str, content: &str, out: &mut Vec<u32>| {
                    out.extend(start);
                    self.encode_marked(&format!("{role}\n{content}"), out);
                    out.extend(end);
                    out.extend(t.encode("\n"));
                };
                for (role, content) in messages {
                    turn(role, content, &mut out);
                }
                out.extend(start);
                out.extend(t.encode("assistant\n"));
            }
            ChatFormat::Gemma => {
                let (start, end) = (t.control("<start_of_turn>"), t.control("<end_of_turn>"));
                let mut system = String::new();
                for (role, content) in messages {
                    if role == "system" {
                        system.push_str(content);
                        system.push_str("\n\n");
                        continue;
                    }
                    let role = if role == "assistant" { "model" } else { "user" };
                    let text = if role == "user" {
                        format!("{}{content}", std::mem::take(&mut system))
                    } else {
                        content.clone()
                    };
                    out.extend(start);
                    out.extend(t.encode(&format!("{role}\n{text}")));
                    out.extend(end);
                    out.extend(t.encode("\n"));
                }
                if !system.is_empty() {
                    out.extend(start);
                    out.extend(t.encode(&format!("user\n{}", system.trim_end())));
                    out.extend(end);
                    out.extend(t.encode("\n"));
                }
                out.extend(start);
                out.extend(t.encode("model\n"));
            }
        }
        out
    }

    /// `text`'s tokens, with [`CALL_OPEN`] and [`CALL_CLOSE`] written as the model's
    /// tool-call tokens when it has them (only the native format puts them in a turn).
    fn encode_marked(&self, text: &str, out: &mut Vec<u32>) {
        let Some((open, close)) = self.tool_call else {
            out.extend(self.tokenizer.encode(text));
            return;
        };
        let mut rest = text;
        while let Some(at) = rest.find([CALL_OPEN, CALL_CLOSE]) {
            out.extend(self.tokenizer.encode(&rest[..at]));
            let marker = rest[at..].chars().next().unwrap_or(CALL_OPEN);
            out.push(if marker == CALL_OPEN { open } else { close });
            rest = &rest[at + marker.len_utf8()..];
        }
        out.extend(self.tokenizer.encode(rest));
    }
}
