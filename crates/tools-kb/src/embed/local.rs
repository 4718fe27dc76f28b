//! [`LocalMiniLm`] runs all-MiniLM-L6-v2 (a 6-layer BERT, 384 dimensions) on the CPU with
//! `candle`, from the `model.safetensors` + `tokenizer.json` that `cargo xtask fetch-model`
//! puts in `~/.cache/lsm/models/all-MiniLM-L6-v2`. It works offline. The shipped
//! `tokenizer.json` pads every input to 128 tokens and truncates there: padding is switched off
//! and the truncation raised to the model's 256 tokens.
//!
//! Throughput: the texts are tokenized once, sorted by token count and cut into batches of
//! similar length under a token budget (each batch padded to its own longest input, so
//! little is padding, and its activations stay small enough for the caches); the batches run
//! on every core at once (rayon), each forward pass on one core. Inside the pass the scale
//! of the attention scores is folded into the queries and the softmax is candle's fused
//! last-dimension one: the (batch, heads, tokens, tokens) score tensor, the largest of the
//! pass, is written once and read once.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};
use rayon::prelude::*;
use tokenizers::{Tokenizer, TruncationParams};

use super::{Embedder, local_model_files};
use crate::error::{KbError, Result};

/// The local model's name, as recorded in an index.
pub const LOCAL_MODEL_NAME: &str = "all-MiniLM-L6-v2";
/// The local model's dimensions.
pub const LOCAL_MODEL_DIMS: usize = 384;
/// The local model's input limit in tokens (sentence-transformers' `max_seq_length`).
pub const LOCAL_MAX_TOKENS: usize = 256;

/// Most tokens (inputs × padded length) in one forward pass. Small batches keep a pass's
/// activations (the widest: tokens × 1536 floats, 3 MB) in the caches: on Cranfield
/// abstracts 512 took the least CPU time of 256…4096 (`perf stat` task-clock: 512 and 256
/// alike, 2048 11 % more, 4096 27 % more).
const BATCH_TOKENS: usize = 512;

/// all-MiniLM-L6-v2 on the CPU.
pub struct LocalMiniLm {
    tokenizer: Tokenizer,
    model: Bert,
    device: Device,
    batch_size: usize,
}

impl std::fmt::Debug for LocalMiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalMiniLm").finish_non_exhaustive()
    }
}

fn embed_err(message: impl std::fmt::Display) -> KbError {
    KbError::Embedder {
        model: LOCAL_MODEL_NAME.into(),
        message: message.to_string(),
    }
}

impl LocalMiniLm {
    /// Load the model from `dir`.
    ///
    /// # Errors
    /// [`KbError::Embedder`] naming the missing file and `cargo xtask fetch-model` when the
    /// files are absent, or what is wrong with them.
    pub fn load(dir: &Path, batch_size: usize) -> Result<Self> {
        let [weights, tokenizer_path, _config] = local_model_files(dir);
        for f in local_model_files(dir) {
            if !f.is_file() {
                return Err(embed_err(format!(
                    "{} is missing; run `cargo xtask fetch-model` to download the model, \
                     or set [kb.embedder] kind = \"none\" for lexical retrieval only",
                    f.display()
                )));
            }
        }
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| embed_err(format!("{}: {e}", tokenizer_path.display())))?;
        // Each batch is padded to its own longest input below.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: LOCAL_MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| embed_err(format!("cannot set truncation: {e}")))?;
        let device = Device::Cpu;
        let tensors = candle_core::safetensors::load(&weights, &device)
            .map_err(|e| embed_err(format!("{}: {e}", weights.display())))?;
        let model = Bert::load(tensors, &device).map_err(|e| {
            embed_err(format!(
                "{} does not hold all-MiniLM-L6-v2 weights: {e}; run `cargo xtask fetch-model` again",
                weights.display()
            ))
        })?;
        Ok(LocalMiniLm {
            tokenizer,
            model,
            device,
            batch_size: batch_size.max(1),
        })
    }

    /// Token ids of each text (truncated at [`LOCAL_MAX_TOKENS`], no padding).
    fn tokenize(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| embed_err(format!("tokenizing failed: {e}")))?;
        Ok(encodings.iter().map(|e| e.get_ids().to_vec()).collect())
    }

    /// One forward pass over `inputs` (token ids), padded to the longest: unit-length mean
    /// poolings over the real tokens.
    fn embed_batch(&self, inputs: &[&[u32]]) -> Result<Vec<Vec<f32>>> {
        let len = inputs.iter().map(|i| i.len()).max().unwrap_or(0).max(1);
        let mut ids = vec![0u32; inputs.len() * len];
        let mut mask = vec![0f32; inputs.len() * len];
        for (row, input) in inputs.iter().enumerate() {
            ids[row * len..row * len + input.len()].copy_from_slice(input);
            mask[row * len..row * len + input.len()].fill(1.0);
        }
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::from_vec(ids, (inputs.len(), len), &self.device)?;
            let mask = Tensor::from_vec(mask, (inputs.len(), len), &self.device)?;
            let hidden = self.model.forward(&ids, &mask)?; // (b, t, h)
            // Mean over the real tokens only (the attention mask), then unit length.
            let m = mask.unsqueeze(2)?; // (b, t, 1)
            let summed = hidden.broadcast_mul(&m)?.sum(1)?; // (b, h)
            let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?; // (b, 1)
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        run().map_err(embed_err)
    }
}

/// Batches of indices into `lengths` (token counts): sorted by length, at most `max_inputs`
/// inputs and `budget` padded tokens (inputs × the longest) each; an input longer than the
/// budget is a batch of its own.
fn batches(lengths: &[usize], max_inputs: usize, budget: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    order.sort_by_key(|&i| lengths[i]);
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for i in order {
        // Sorted ascending: this input is the batch's longest so far.
        let padded = (current.len() + 1) * lengths[i];
        if !current.is_empty() && (current.len() >= max_inputs || padded > budget) {
            out.push(std::mem::take(&mut current));
        }
        current.push(i);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

impl Embedder for LocalMiniLm {
    fn model(&self) -> &str {
        LOCAL_MODEL_NAME
    }

    fn dims(&self) -> usize {
        LOCAL_MODEL_DIMS
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.embed_observed(texts, &|_| {})
    }

    fn embed_observed(
        &self,
        texts: &[&str],
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Vec<f32>>> {
        let tokens = self.tokenize(texts)?;
        let lengths: Vec<usize> = tokens.iter().map(Vec::len).collect();
        let batches = batches(&lengths, self.batch_size, BATCH_TOKENS);
        // Batches in parallel, each on one core; results in input order.
        let results: Vec<Result<Vec<Vec<f32>>>> = batches
            .par_iter()
            .map(|batch| {
                let inputs: Vec<&[u32]> = batch.iter().map(|&i| tokens[i].as_slice()).collect();
                let vectors = self.embed_batch(&inputs);
                if vectors.is_ok() {
                    done(batch.len());
                }
                vectors
            })
            .collect();
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (batch, vectors) in batches.iter().zip(results) {
            for (&i, v) in batch.iter().zip(vectors?) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

/// The BERT encoder of all-MiniLM-L6-v2 (post-layer-norm, GELU, absolute positions).
struct Bert {
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
    layers: Vec<BertLayer>,
    heads: usize,
}

struct BertLayer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: LayerNorm,
}

const HIDDEN: usize = 384;
const INTERMEDIATE: usize = 1536;
const LAYERS: usize = 6;
const HEADS: usize = 12;
const VOCAB: usize = 30522;
const POSITIONS: usize = 512;
const EPS: f64 = 1e-12;

impl Bert {
    fn load(tensors: HashMap<String, Tensor>, device: &Device) -> candle_core::Result<Self> {
        let vb = VarBuilder::from_tensors(tensors, DType::F32, device);
        let e = vb.pp("embeddings");
        let norm = |vb: VarBuilder| candle_nn::layer_norm(HIDDEN, EPS, vb);
        let word = candle_nn::embedding(VOCAB, HIDDEN, e.pp("word_embeddings"))?;
        let position = candle_nn::embedding(POSITIONS, HIDDEN, e.pp("position_embeddings"))?;
        let token_type = candle_nn::embedding(2, HIDDEN, e.pp("token_type_embeddings"))?;
        let emb_norm = norm(e.pp("LayerNorm"))?;
        let mut layers = Vec::with_capacity(LAYERS);
        for i in 0..LAYERS {
            let l = vb.pp(format!("encoder.layer.{i}"));
            let a = l.pp("attention");
            layers.push(BertLayer {
                query: candle_nn::linear(HIDDEN, HIDDEN, a.pp("self.query"))?,
                key: candle_nn::linear(HIDDEN, HIDDEN, a.pp("self.key"))?,
                value: candle_nn::linear(HIDDEN, HIDDEN, a.pp("self.value"))?,
                attn_out: candle_nn::linear(HIDDEN, HIDDEN, a.pp("output.dense"))?,
                attn_norm: norm(a.pp("output.LayerNorm"))?,
                intermediate: candle_nn::linear(HIDDEN, INTERMEDIATE, l.pp("intermediate.dense"))?,
                output: candle_nn::linear(INTERMEDIATE, HIDDEN, l.pp("output.dense"))?,
                out_norm: norm(l.pp("output.LayerNorm"))?,
            });
        }
        Ok(Bert {
            word,
            position,
            token_type,
            norm: emb_norm,
            layers,
            heads: HEADS,
        })
    }

    /// `ids`, `mask`: (batch, tokens). Returns the last hidden states (batch, tokens, hidden).
    fn forward(&self, ids: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let positions = Tensor::arange(0u32, t as u32, ids.device())?;
        let types = Tensor::zeros((b, t), DType::U32, ids.device())?;
        let x = self
            .word
            .forward(ids)?
            .broadcast_add(&self.position.forward(&positions)?)?
            .add(&self.token_type.forward(&types)?)?;
        let mut x = self.norm.forward(&x)?;
        // 0 for real tokens, a large negative number for padding: (b, 1, 1, t).
        let bias = ((mask.ones_like()? - mask)? * -1e4f64)?
            .unsqueeze(1)?
            .unsqueeze(1)?;
        let head_dim = HIDDEN / self.heads;
        let scale = 1.0 / (head_dim as f64).sqrt();
        for layer in &self.layers {
            let split = |y: Tensor| -> candle_core::Result<Tensor> {
                y.reshape((b, t, self.heads, head_dim))?
                    .transpose(1, 2)?
                    .contiguous()
            };
            // The scale on the queries (b, t, h) rather than on the scores (b, heads, t, t).
            let q = split((layer.query.forward(&x)? * scale)?)?;
            let k = split(layer.key.forward(&x)?)?;
            let v = split(layer.value.forward(&x)?)?;
            let scores = q.matmul(&k.t()?)?.broadcast_add(&bias)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let ctx = probs
                .matmul(&v)?
                .transpose(1, 2)?
                .contiguous()?
                .reshape((b, t, HIDDEN))?;
            let attn = layer
                .attn_norm
                .forward(&(layer.attn_out.forward(&ctx)? + &x)?)?;
            let inter = layer.intermediate.forward(&attn)?.gelu_erf()?;
            x = layer
                .out_norm
                .forward(&(layer.output.forward(&inter)? + &attn)?)?;
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_group_similar_lengths_within_the_budget() {
        let lengths = [300, 5, 120, 7, 130, 6, 250, 128, 8, 9];
        let got = batches(&lengths, 3, 512);
        // Every input exactly once.
        let mut all: Vec<usize> = got.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..lengths.len()).collect::<Vec<_>>());
        for b in &got {
            let longest = b.iter().map(|&i| lengths[i]).max().unwrap();
            assert!(b.len() <= 3, "{b:?}");
            assert!(b.len() == 1 || b.len() * longest <= 512, "{b:?}");
        }
        // Shortest first, in order of length.
        let flat: Vec<usize> = got.iter().flatten().map(|&i| lengths[i]).collect();
        assert!(flat.windows(2).all(|w| w[0] <= w[1]), "{flat:?}");
        assert_eq!(
            got.iter().map(Vec::len).collect::<Vec<_>>(),
            [3, 3, 2, 1, 1]
        );
    }
}
