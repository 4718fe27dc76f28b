//! [`HttpProvider`]: one client for every HTTP API flavour (OpenAI Chat Completions, OpenAI
//! Responses, Anthropic Messages, OpenAI-compatible servers), sharing timeouts, retries with
//! backoff, error mapping, streaming and accounting. The flavour modules only build request
//! bodies and read responses.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;

use crate::answer::{StreamAssembler, StreamError, excerpt};
use crate::endpoint::HttpProvider;
use crate::kind::ProviderKind;
use crate::sse::{SseEvent, SseParser};
use crate::transport::{BodyFault, Reply, SendFault};
use crate::wire::{BodyShape, KeptBody, lock};
use crate::{
    CallObserver, LlmRequest, LlmResponse, Pricing, Provider, ProviderError, ProviderEvent, Usage,
    anthropic, openai_chat, openai_responses,
};

impl HttpProvider {
    /// The provider kind.
    pub fn kind(&self) -> ProviderKind {
        self.kind
    }

    /// The API base URL (without the endpoint path).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Whether calls stream their answers.
    pub fn streams(&self) -> bool {
        self.stream
    }

    /// How calls travel: `"direct"` (hyper's HTTP/1.1 connection, for a plain `http://`
    /// endpoint that no proxy covers) or `"reqwest"` (TLS, proxies, or
    /// [`HttpSettings::direct`] off).
    pub fn transport(&self) -> &'static str {
        self.transport.name()
    }

    /// The endpoint this provider posts to.
    pub fn endpoint(&self) -> &str {
        self.endpoint_url.as_str()
    }

    /// The JSON body this provider sends for `request`, serialized (what goes on the wire;
    /// also for inspection and benchmarks). `chained` uses `previous_response_id` where the
    /// API supports it.
    pub fn request_body(&self, request: &LlmRequest, chained: bool) -> Vec<u8> {
        self.body_on(request, chained, KeptBody::default()).bytes
    }

    /// The body of a call, built on the body the last call sent ([`KeptBody`]), and what to
    /// keep of it afterwards. Byte for byte what [`HttpProvider::request_body`] makes.
    fn call_body(&self, request: &LlmRequest) -> (Bytes, BodyShape) {
        let kept = std::mem::take(&mut *lock(&self.kept_body));
        self.body_on(request, true, kept).send()
    }

    /// The body for `request` in this provider's flavour, built on `kept`.
    fn body_on(&self, request: &LlmRequest, chained: bool, kept: KeptBody) -> KeptBody {
        match self.kind {
            ProviderKind::OpenAi | ProviderKind::Compatible => {
                openai_chat::body(self, request, self.stream, kept)
            }
            ProviderKind::OpenAiResponses => {
                openai_responses::body(self, request, self.stream, chained, kept)
            }
            ProviderKind::Anthropic => anthropic::body(self, request, self.stream, kept),
        }
    }

    /// Take a sent body back to build the next one on, when the HTTP client let go of it.
    fn keep_body(&self, body: Bytes, shape: BodyShape) {
        if let Some(kept) = KeptBody::reclaim(body, shape) {
            *lock(&self.kept_body) = kept;
        }
    }

    /// Read a non-streamed answer's body (what a call does with a 200 answer; public for
    /// benchmarks).
    ///
    /// # Errors
    /// [`ProviderError::MalformedResponse`] when the body is not JSON or not an answer of
    /// this API.
    pub fn parse_response(&self, body: &[u8]) -> Result<LlmResponse, ProviderError> {
        let not_json = |e: serde_json::Error| {
            self.malformed(format!(
                "the body is not JSON ({e}); it starts with {:?}",
                excerpt(&String::from_utf8_lossy(body), 200)
            ))
        };
        let parsed = match self.kind {
            ProviderKind::OpenAi | ProviderKind::Compatible => {
                match openai_chat::parse_bytes(body) {
                    Some(parsed) => parsed,
                    // An answer of an unusual shape: the general reader says what is wrong.
                    None => openai_chat::parse(&serde_json::from_slice(body).map_err(not_json)?),
                }
            }
            ProviderKind::OpenAiResponses => {
                openai_responses::parse(&serde_json::from_slice(body).map_err(not_json)?)
            }
            ProviderKind::Anthropic => {
                anthropic::parse(&serde_json::from_slice(body).map_err(not_json)?)
            }
        };
        parsed.map_err(|e| self.malformed(e.to_string()))
    }

    /// Post `body`, with retries, and read the answer.
    async fn post(
        &self,
        body: &Bytes,
        chained_from: Option<&str>,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        let attempts = AtomicU32::new(0);
        let s = &self.settings;
        let backoff = ExponentialBuilder::default()
            .with_min_delay(s.retry_base_delay)
            .with_max_delay(s.retry_max_delay)
            .with_factor(2.0)
            .with_jitter()
            .with_max_times(s.max_retries as usize);
        let max_delay = s.retry_max_delay;
        let result = (|| async {
            attempts.fetch_add(1, Ordering::SeqCst);
            // Scrubbed before anything sees it: the retry log line and event below, the
            // caller, and whatever it records or prints.
            self.attempt(body, chained_from, observer)
                .await
                .map_err(|e| self.without_key(e))
        })
        .retry(backoff)
        .sleep(tokio::time::sleep)
        .when(ProviderError::is_retryable)
        .adjust(|err: &ProviderError, dur: Option<Duration>| {
            // Honour the server's Retry-After (capped), but never wait less than the backoff.
            dur.map(|d| match err.retry_after() {
                Some(ra) => ra.max(d).min(max_delay),
                None => d,
            })
        })
        .notify(|err: &ProviderError, delay: Duration| {
            let attempt = attempts.load(Ordering::SeqCst);
            tracing::info!(provider = %self.kind, attempt, ?delay, "retrying: {err}");
            observer.on_event(ProviderEvent::Retry {
                attempt,
                delay,
                reason: err.to_string(),
            });
        })
        .await;
        result.map_err(|e| e.with_attempts(attempts.load(Ordering::SeqCst)))
    }

    /// One request and its answer.
    async fn attempt(
        &self,
        body: &Bytes,
        chained_from: Option<&str>,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        let url = self.endpoint_url.as_str();
        let reply = self
            .transport
            .post(body.clone())
            .await
            .map_err(|f| self.send_error(url, f))?;
        let status = reply.status();
        if status.is_redirection() {
            return Err(self.redirect_error(status.as_u16(), reply.headers(), url));
        }
        if !status.is_success() {
            let headers = reply.headers().clone();
            let text = reply.text().await;
            return Err(self.status_error(status.as_u16(), &headers, &text, url, chained_from));
        }
        if self.stream {
            self.read_stream(reply, url, observer).await
        } else {
            let bytes = reply.bytes().await.map_err(|f| self.body_error(url, f))?;
            self.parse_response(&bytes)
        }
    }

    async fn read_stream(
        &self,
        mut reply: Reply<'_>,
        url: &str,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        let mut assembler: Box<dyn StreamAssembler> = match self.kind {
            ProviderKind::OpenAi | ProviderKind::Compatible => {
                Box::new(openai_chat::Assembler::default())
            }
            ProviderKind::OpenAiResponses => Box::new(openai_responses::Assembler::default()),
            ProviderKind::Anthropic => Box::new(anthropic::Assembler::default()),
        };
        let mut parser = SseParser::default();
        let mut done = false;
        'read: while let Some(chunk) = reply.chunk().await.map_err(|f| self.body_error(url, f))? {
            for ev in parser.feed(&chunk) {
                if self.stream_event(&mut *assembler, &ev, observer)? {
                    done = true;
                    break 'read;
                }
            }
        }
        if !done {
            if let Some(ev) = parser.finish() {
                done = self.stream_event(&mut *assembler, &ev, observer)?;
            }
        }
        if !done {
            return Err(self.malformed(
                "the stream ended before the response was complete (truncated)".to_string(),
            ));
        }
        assembler
            .finish()
            .map_err(|e| self.malformed(e.to_string()))
    }

    fn stream_event(
        &self,
        assembler: &mut dyn StreamAssembler,
        ev: &SseEvent,
        observer: &dyn CallObserver,
    ) -> Result<bool, ProviderError> {
        assembler.event(ev, observer).map_err(|e| match e {
            StreamError::Malformed(m) => self.malformed(m),
            StreamError::Server(m) => ProviderError::Call {
                provider: self.kind.to_string(),
                message: format!("the server reported an error in the stream: {m}"),
            },
        })
    }

    /// `err` without this provider's key in its text (servers echo refused keys).
    fn without_key(&self, err: ProviderError) -> ProviderError {
        match &self.api_key {
            Some(key) => err.without_secret(key),
            None => err,
        }
    }

    fn malformed(&self, message: String) -> ProviderError {
        ProviderError::Malformed {
            provider: self.kind.to_string(),
            message,
        }
    }

    fn send_error(&self, url: &str, fault: SendFault) -> ProviderError {
        let provider = self.kind.to_string();
        let url = url.to_string();
        match fault {
            SendFault::ConnectTimeout => ProviderError::Timeout {
                provider,
                url,
                what: format!("no connection within {:?}", self.settings.connect_timeout),
                attempts: 1,
            },
            SendFault::AnswerTimeout => ProviderError::Timeout {
                provider,
                url,
                what: format!("no answer within {:?}", self.settings.read_timeout),
                attempts: 1,
            },
            SendFault::UnknownHost(message) => ProviderError::UnknownHost {
                provider,
                url,
                message,
            },
            SendFault::Connect(message) => ProviderError::Connect {
                provider,
                url,
                message,
                attempts: 1,
            },
        }
    }

    /// A 3xx answer. Redirects are not followed: the request carries the API key, and a
    /// base URL that moved should be corrected where it is configured, once.
    fn redirect_error(&self, status: u16, headers: &HeaderMap, url: &str) -> ProviderError {
        let to = headers
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("an address it did not give");
        ProviderError::Config {
            provider: self.kind.to_string(),
            message: format!(
                "{url} answered {status}, a redirect to {to}; lsm does not follow redirects \
                 (the request carries the API key): set base_url to the address the server \
                 names"
            ),
        }
    }

    fn body_error(&self, url: &str, fault: BodyFault) -> ProviderError {
        match fault {
            BodyFault::Stalled => ProviderError::Timeout {
                provider: self.kind.to_string(),
                url: url.to_string(),
                what: format!(
                    "the answer stalled for more than {:?}",
                    self.settings.read_timeout
                ),
                attempts: 1,
            },
            BodyFault::Cut(cause) => self.malformed(format!(
                "the body was cut off ({cause}); the connection closed before the response was complete"
            )),
        }
    }

    fn status_error(
        &self,
        status: u16,
        headers: &HeaderMap,
        text: &str,
        url: &str,
        chained_from: Option<&str>,
    ) -> ProviderError {
        let provider = self.kind.to_string();
        let (message, code) = server_message(status, text);
        if let Some(id) = chained_from
            && (status == 400 || status == 404)
            && (code.as_deref() == Some("previous_response_not_found")
                || (message.to_lowercase().contains("previous response")
                    && message.to_lowercase().contains("not found")))
        {
            return ProviderError::PreviousResponseNotFound {
                provider,
                response_id: id.to_string(),
                message,
            };
        }
        match status {
            400 => ProviderError::BadRequest { provider, message },
            401 | 403 => ProviderError::Auth {
                provider,
                status,
                env_var: match &self.api_key_env {
                    Some(var) => var.clone(),
                    None => "[llm] api_key_env (not set, so no key was sent)".to_string(),
                },
                message,
            },
            404 => ProviderError::NotFound {
                provider,
                model: self.model.clone(),
                url: url.to_string(),
                message,
            },
            _ => ProviderError::Status {
                provider,
                status,
                message,
                attempts: 1,
                retryable: status == 408 || status == 409 || status == 429 || status >= 500,
                retry_after_ms: retry_after_ms(headers),
            },
        }
    }

    fn fill_missing_usage(&self, request: &LlmRequest, response: &mut LlmResponse) {
        if response.usage == Usage::default() {
            // Some compatible servers report no usage: charge an estimate so budgets still bite.
            let answer = response.text.len()
                + response
                    .tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>();
            response.usage = Usage {
                input_tokens: self
                    .estimator
                    .estimate_cached(request, &mut lock(&self.wire)),
                output_tokens: (answer as u64).div_ceil(3),
                ..Usage::default()
            };
            tracing::warn!(provider = %self.kind, "the server reported no usage; charged an estimate");
        }
    }
}

/// The headers every call of a `kind` provider sends. The key's header is marked sensitive
/// (never shown by `Debug`, never indexed by HTTP/2's header compression).
pub(crate) fn request_headers(
    kind: ProviderKind,
    api_key: Option<&str>,
    stream: bool,
) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        reqwest::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    match kind {
        ProviderKind::Anthropic => {
            h.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
            if let Some(key) = api_key
                && let Ok(mut v) = HeaderValue::from_str(key)
            {
                v.set_sensitive(true);
                h.insert("x-api-key", v);
            }
        }
        _ => {
            if let Some(key) = api_key
                && let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {key}"))
            {
                v.set_sensitive(true);
                h.insert(reqwest::header::AUTHORIZATION, v);
            }
        }
    }
    if stream {
        h.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
    }
    h
}

/// The endpoint a `kind` provider posts to, under `base_url`.
pub(crate) fn endpoint_for(kind: ProviderKind, base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    match kind {
        ProviderKind::OpenAi | ProviderKind::Compatible => format!("{base}/chat/completions"),
        ProviderKind::OpenAiResponses => format!("{base}/responses"),
        ProviderKind::Anthropic => format!("{base}/messages"),
    }
}

#[async_trait::async_trait]
impl Provider for HttpProvider {
    fn name(&self) -> &str {
        self.kind.as_str()
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn context_window(&self) -> Option<u64> {
        crate::known_context_window(&self.model)
    }

    fn pricing(&self) -> Option<Pricing> {
        self.pricing
    }

    fn estimate_prompt_tokens(&self, request: &LlmRequest) -> u64 {
        self.estimator
            .estimate_cached(request, &mut lock(&self.wire))
    }

    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        self.complete_observed(request, &crate::NoObserver).await
    }

    async fn complete_observed(
        &self,
        request: &LlmRequest,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        let chained_from = match self.kind {
            ProviderKind::OpenAiResponses => request.options.previous_response_id.as_deref(),
            _ => None,
        };
        let (body, shape) = self.call_body(request);
        let posted = self.post(&body, chained_from, observer).await;
        self.keep_body(body, shape);
        let mut response = match posted {
            Err(ProviderError::PreviousResponseNotFound { message, .. }) => {
                // The server forgot the chain: say so, and repeat once with the full history.
                tracing::info!(provider = %self.kind, "previous response unknown; resending the full history: {message}");
                observer.on_event(ProviderEvent::ChainReset { reason: message });
                let full = Bytes::from(self.request_body(request, false));
                self.post(&full, None, observer).await?
            }
            other => other?,
        };
        self.fill_missing_usage(request, &mut response);
        Ok(response)
    }
}

/// The server's error message (and code) out of an error body: OpenAI and Anthropic both use
/// `{"error": {"message": ..., "code"/"type": ...}}`; anything else is shown as text.
fn server_message(status: u16, text: &str) -> (String, Option<String>) {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        let err = v.get("error").unwrap_or(&v);
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| err.as_str())
            .or_else(|| v.get("message").and_then(Value::as_str))
            .or_else(|| v.get("detail").and_then(Value::as_str));
        let code = err
            .get("code")
            .and_then(Value::as_str)
            .or_else(|| err.get("type").and_then(Value::as_str))
            .map(String::from);
        if let Some(m) = message {
            return (m.to_string(), code);
        }
    }
    let trimmed = text.trim();
    if trimmed.is_empty() {
        let reason = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no message");
        (format!("{reason} (empty body)"), None)
    } else {
        (excerpt(trimmed, 500), None)
    }
}

/// `retry-after-ms` (OpenAI) or `Retry-After` (seconds or an HTTP date), in milliseconds.
fn retry_after_ms(headers: &HeaderMap) -> Option<u64> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(ms as u64);
    }
    let value = get("retry-after")?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then_some((secs * 1000.0) as u64);
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let ms = (when.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_milliseconds();
    Some(u64::try_from(ms).unwrap_or(0))
}

#[cfg(test)]
mod tests;
