//! An OpenAI-compatible `/embeddings` endpoint as an [`Embedder`] (Ollama, vLLM, llama.cpp
//! server, OpenAI, …), over `http://` or `https://` through [`crate::http`].

use std::time::Duration;

use serde_json::{Value, json};

use super::settings::EmbedderConfig;
use super::{Embedder, normalize};
use crate::error::{KbError, Result};
use crate::http::AddressPolicy;

/// Largest response accepted (bytes).
const MAX_RESPONSE: usize = 64 * 1024 * 1024;

/// Why posting a batch to the endpoint failed; wrapped in [`KbError::Embedder`].
#[derive(Debug, thiserror::Error)]
enum PostError {
    /// The HTTP client or the thread running it could not be set up.
    #[error(transparent)]
    Setup(#[from] crate::http::HttpError),
    /// The endpoint could not be reached or refused the URL. Check `kb.embedder.url` and that
    /// the server is running.
    #[error("{0}; is the server running?")]
    Unreachable(crate::http::HttpError),
    /// The endpoint answered an error status; `text` is the start of its body. Check the
    /// model name and the API key.
    #[error("the endpoint answered HTTP {status}: {text}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The first 300 characters of the body.
        text: String,
    },
    /// The endpoint's answer is not JSON: it is not an `/embeddings` endpoint.
    #[error("the answer is not JSON: {0}")]
    NotJson(serde_json::Error),
}

/// An embedder behind an OpenAI-compatible HTTP endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    /// `<base>/embeddings`.
    endpoint: String,
    model: String,
    dims: usize,
    api_key: Option<String>,
    batch_size: usize,
    timeout: Duration,
}

impl OpenAiEmbedder {
    /// From `[kb.embedder]` (`url`, `model`, `dims`, `api_key_env`).
    ///
    /// # Errors
    /// [`KbError::Config`] naming the missing or invalid key.
    pub fn from_config(config: &EmbedderConfig) -> Result<Self> {
        let missing = |key: &str| KbError::Config {
            key: format!("kb.embedder.{key}"),
            message: "required when kind = \"openai\"".into(),
        };
        let url = config.url.as_deref().ok_or_else(|| missing("url"))?;
        let model = config.model.clone().ok_or_else(|| missing("model"))?;
        let dims = config.dims.ok_or_else(|| missing("dims"))?;
        let api_key = config
            .api_key_env
            .as_deref()
            .and_then(|v| std::env::var(v).ok())
            .filter(|k| !k.is_empty());
        Self::new(url, &model, dims, api_key, config.batch_size)
    }

    /// An embedder for `model` at `url` (`http(s)://host:port/base`; requests go to
    /// `<base>/embeddings`).
    ///
    /// # Errors
    /// [`KbError::Config`] when the URL is not `http://` or `https://`.
    pub fn new(
        url: &str,
        model: &str,
        dims: usize,
        api_key: Option<String>,
        batch_size: usize,
    ) -> Result<Self> {
        let base = crate::http::parse_url(url).map_err(|e| KbError::Config {
            key: "kb.embedder.url".into(),
            message: e.to_string(),
        })?;
        let endpoint = format!("{}/embeddings", base.as_str().trim_end_matches('/'));
        Ok(OpenAiEmbedder {
            endpoint,
            model: model.to_string(),
            dims,
            api_key,
            batch_size: batch_size.max(1),
            timeout: Duration::from_secs(120),
        })
    }

    /// Where requests go: `<base>/embeddings`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn err(&self, message: impl std::fmt::Display) -> KbError {
        KbError::Embedder {
            model: self.model.clone(),
            message: message.to_string(),
        }
    }

    /// POST every batch over one connection; the JSON answers in order.
    ///
    /// # Errors
    /// [`KbError::Embedder`] with the [`PostError`] that stopped the batches.
    fn post_all(&self, bodies: Vec<Value>) -> Result<Vec<Value>> {
        let answers = crate::http::block_on(|| async move {
            let client = crate::http::client(AddressPolicy::Any, self.timeout)?;
            let mut answers = Vec::with_capacity(bodies.len());
            for body in &bodies {
                let fetched = crate::http::request(
                    &client,
                    reqwest::Method::POST,
                    &self.endpoint,
                    Some(body),
                    self.api_key.as_deref(),
                    MAX_RESPONSE,
                )
                .await
                .map_err(PostError::Unreachable)?;
                if !(200..300).contains(&fetched.status) {
                    let text: String = String::from_utf8_lossy(&fetched.body)
                        .chars()
                        .take(300)
                        .collect();
                    return Err(PostError::Status {
                        status: fetched.status,
                        text,
                    });
                }
                let answer: Value =
                    serde_json::from_slice(&fetched.body).map_err(PostError::NotJson)?;
                answers.push(answer);
            }
            Ok(answers)
        });
        answers.map_err(|m| self.err(m))
    }
}

impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn dims(&self) -> usize {
        self.dims
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let batches: Vec<&[&str]> = texts.chunks(self.batch_size).collect();
        let bodies = batches
            .iter()
            .map(|batch| json!({"model": self.model, "input": batch}))
            .collect();
        let answers = self.post_all(bodies)?;
        let mut out = Vec::with_capacity(texts.len());
        for (batch, answer) in batches.iter().zip(&answers) {
            let data = answer
                .get("data")
                .and_then(Value::as_array)
                .ok_or_else(|| self.err("the answer has no `data` array"))?;
            let mut rows: Vec<(usize, Vec<f32>)> = Vec::with_capacity(data.len());
            for (i, item) in data.iter().enumerate() {
                let index = item
                    .get("index")
                    .and_then(Value::as_u64)
                    .map_or(i, |n| n as usize);
                let mut v: Vec<f32> = item
                    .get("embedding")
                    .and_then(Value::as_array)
                    .ok_or_else(|| self.err("an item has no `embedding`"))?
                    .iter()
                    .map(|x| x.as_f64().unwrap_or(0.0) as f32)
                    .collect();
                if v.len() != self.dims {
                    return Err(self.err(format!(
                        "the endpoint returned {} dimensions, kb.embedder.dims is {}",
                        v.len(),
                        self.dims
                    )));
                }
                normalize(&mut v);
                rows.push((index, v));
            }
            if rows.len() != batch.len() {
                return Err(self.err(format!(
                    "asked for {} embeddings, got {}",
                    batch.len(),
                    rows.len()
                )));
            }
            rows.sort_by_key(|(i, _)| *i);
            out.extend(rows.into_iter().map(|(_, v)| v));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_and_https_urls_are_accepted_and_others_refused() {
        let e = OpenAiEmbedder::new("https://api.example/v1/", "m", 3, None, 8).unwrap();
        assert_eq!(e.endpoint(), "https://api.example/v1/embeddings");
        let e = OpenAiEmbedder::new("http://127.0.0.1:11434/v1", "m", 3, None, 8).unwrap();
        assert_eq!(e.endpoint(), "http://127.0.0.1:11434/v1/embeddings");
        let err = OpenAiEmbedder::new("ftp://h/v1", "m", 3, None, 8).unwrap_err();
        assert!(err.to_string().contains("kb.embedder.url"), "{err}");
    }

    #[test]
    fn a_loopback_endpoint_embeds_in_order() {
        use std::io::{BufRead, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut reader = std::io::BufReader::new(s.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            let req: Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(req["model"], "m");
            let answer = json!({"data": [
                {"index": 1, "embedding": [0.0, 2.0]},
                {"index": 0, "embedding": [3.0, 0.0]}
            ]})
            .to_string();
            write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{answer}",
                answer.len()
            )
            .unwrap();
        });
        let e =
            OpenAiEmbedder::new(&format!("http://127.0.0.1:{port}/v1"), "m", 2, None, 8).unwrap();
        let v = e.embed(&["a", "b"]).unwrap();
        server.join().unwrap();
        assert_eq!(v, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    }
}
