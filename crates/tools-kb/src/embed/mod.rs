//! Embedders: text → unit-length vectors for dense retrieval.
//!
//! - [`LocalMiniLm`] (`local.rs`): all-MiniLM-L6-v2 on the CPU, offline.
//! - [`OpenAiEmbedder`] (`openai.rs`): an OpenAI-compatible `/embeddings` endpoint.
//! - [`HashEmbedder`]: a deterministic bag of words, for tests and benchmarks.

mod local;
mod openai;
mod settings;

pub use local::{LOCAL_MAX_TOKENS, LOCAL_MODEL_DIMS, LOCAL_MODEL_NAME, LocalMiniLm};
pub use openai::OpenAiEmbedder;
pub use settings::{EmbedderConfig, EmbedderKind, default_model_dir};

/// `model (dims)`, as shown in messages and `lsm kb stats`.
pub use crate::store::describe;

use std::path::{Path, PathBuf};

#[cfg(doc)]
use crate::error::KbError;
use crate::error::Result;

/// Turns texts into vectors. Implementations are blocking (call them from a blocking thread)
/// and return unit-length vectors of [`Embedder::dims`] dimensions.
pub trait Embedder: Send + Sync {
    /// The model name recorded in the index.
    fn model(&self) -> &str;

    /// Vector dimensions.
    fn dims(&self) -> usize;

    /// One unit-length vector per text, in order.
    ///
    /// # Errors
    /// [`KbError::Embedder`] when the model fails on the input.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;

    /// As [`Embedder::embed`], telling `done` how many more texts are embedded as each
    /// group of them is (from any thread; the counts add up to `texts.len()` on success).
    /// By default one call at the end.
    ///
    /// # Errors
    /// As [`Embedder::embed`].
    fn embed_observed(
        &self,
        texts: &[&str],
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Vec<f32>>> {
        let vectors = self.embed(texts)?;
        done(texts.len());
        Ok(vectors)
    }
}

/// Scale `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The files the local model needs, in `dir`.
pub fn local_model_files(dir: &Path) -> [PathBuf; 3] {
    [
        dir.join("model.safetensors"),
        dir.join("tokenizer.json"),
        dir.join("config.json"),
    ]
}

/// Whether the local model's files are present in `dir`.
pub fn local_model_present(dir: &Path) -> bool {
    local_model_files(dir).iter().all(|p| p.is_file())
}

/// A deterministic bag-of-words embedder (each analyzed term hashed to one of `dims`
/// dimensions): no model, no quality worth the name. For tests and benchmarks only.
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    model: String,
    dims: usize,
}

impl HashEmbedder {
    /// An embedder of `dims` dimensions named `hash-<dims>`.
    pub fn new(dims: usize) -> Self {
        HashEmbedder {
            model: format!("hash-{dims}"),
            dims: dims.max(1),
        }
    }

    /// The same, under another model name (to test mismatch checks).
    pub fn named(model: &str, dims: usize) -> Self {
        HashEmbedder {
            model: model.to_string(),
            dims: dims.max(1),
        }
    }
}

impl Embedder for HashEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn dims(&self) -> usize {
        self.dims
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; self.dims];
                for term in crate::store::analyze(t) {
                    let h = term.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
                    });
                    v[(h % self.dims as u64) as usize] += 1.0;
                }
                normalize(&mut v);
                v
            })
            .collect())
    }
}
