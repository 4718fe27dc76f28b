//! An OpenAI-compatible `/embeddings` endpoint as an [`Embedder`] (Ollama, vLLM, llama.cpp
//! server, …), spoken over plain HTTP/1.1 to `http://` URLs. HTTPS endpoints are not
//! supported by this build (put a local proxy in front of them).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::EmbedderConfig;
use crate::embed::{Embedder, normalize};
use crate::error::{KbError, Result};

/// Largest response accepted (bytes).
const MAX_RESPONSE: usize = 64 * 1024 * 1024;

/// An embedder behind an OpenAI-compatible HTTP endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    host: String,
    port: u16,
    base_path: String,
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

    /// An embedder for `model` at `url` (`http://host:port/base`).
    ///
    /// # Errors
    /// [`KbError::Config`] when the URL is not `http://`.
    pub fn new(
        url: &str,
        model: &str,
        dims: usize,
        api_key: Option<String>,
        batch_size: usize,
    ) -> Result<Self> {
        let bad = |m: &str| KbError::Config {
            key: "kb.embedder.url".into(),
            message: format!("'{url}': {m}"),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("only http:// endpoints are supported"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad("bad port"))?),
            None => (authority, 80),
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(OpenAiEmbedder {
            host: host.to_string(),
            port,
            base_path: format!("/{}", path.trim_end_matches('/')).replace("//", "/"),
            model: model.to_string(),
            dims,
            api_key,
            batch_size: batch_size.max(1),
            timeout: Duration::from_secs(120),
        })
    }

    fn err(&self, message: impl std::fmt::Display) -> KbError {
        KbError::Embedder {
            model: self.model.clone(),
            message: message.to_string(),
        }
    }

    fn post(&self, body: &Value) -> Result<Value> {
        let body = body.to_string();
        let path = if self.base_path == "/" {
            "/embeddings".to_string()
        } else {
            format!("{}/embeddings", self.base_path)
        };
        let addr = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| self.err(format!("cannot resolve {}: {e}", self.host)))?
            .next()
            .ok_or_else(|| self.err(format!("cannot resolve {}", self.host)))?;
        let mut stream =
            TcpStream::connect_timeout(&addr, Duration::from_secs(10)).map_err(|e| {
                self.err(format!(
                    "cannot connect to {addr}: {e}; is the server running?"
                ))
            })?;
        let _ = stream.set_read_timeout(Some(self.timeout));
        let _ = stream.set_write_timeout(Some(self.timeout));
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.host,
            self.port,
            body.len()
        );
        if let Some(key) = &self.api_key {
            request.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        request.push_str("\r\n");
        stream
            .write_all(request.as_bytes())
            .and_then(|()| stream.write_all(body.as_bytes()))
            .map_err(|e| self.err(format!("sending the request failed: {e}")))?;
        let mut raw = Vec::new();
        stream
            .take(MAX_RESPONSE as u64)
            .read_to_end(&mut raw)
            .map_err(|e| self.err(format!("reading the response failed: {e}")))?;
        let (status, body) = parse_response(&raw).map_err(|m| self.err(m))?;
        if !(200..300).contains(&status) {
            let text: String = String::from_utf8_lossy(&body).chars().take(300).collect();
            return Err(self.err(format!("the endpoint answered HTTP {status}: {text}")));
        }
        serde_json::from_slice(&body).map_err(|e| self.err(format!("the answer is not JSON: {e}")))
    }
}

/// Split an HTTP/1.1 response into status and body (Content-Length, chunked, or to close).
pub(crate) fn parse_response(raw: &[u8]) -> std::result::Result<(u16, Vec<u8>), String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no HTTP header in the response")?;
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let body = &raw[end + 4..];
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or("no HTTP status line")?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if !chunked {
        return Ok((status, body.to_vec()));
    }
    let mut out = Vec::new();
    let mut rest = body;
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunked body")?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]).to_string();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "bad chunk size")?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            break;
        }
        if rest.len() < size {
            return Err("truncated chunk".into());
        }
        out.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or(&[]);
    }
    Ok((status, out))
}

impl Embedder for OpenAiEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn dims(&self) -> usize {
        self.dims
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            let answer = self.post(&json!({"model": self.model, "input": batch}))?;
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
    fn responses_are_parsed_plain_and_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain).unwrap(), (200, b"{}".to_vec()));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n";
        assert_eq!(
            parse_response(chunked).unwrap(),
            (200, b"{\"a\":1}".to_vec())
        );
        assert!(parse_response(b"garbage").is_err());
    }

    #[test]
    fn only_http_urls_are_accepted() {
        assert!(OpenAiEmbedder::new("https://api.example/v1", "m", 3, None, 8).is_err());
        let e = OpenAiEmbedder::new("http://127.0.0.1:11434/v1", "m", 3, None, 8).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.base_path.as_str()),
            ("127.0.0.1", 11434, "/v1")
        );
    }

    #[test]
    fn a_loopback_endpoint_embeds_in_order() {
        use std::io::BufRead;
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
