//! [`HttpProvider`]'s parts: its settings, its endpoint, and what it carries from one call to
//! the next. The calls themselves are in `http`, each flavour's body and answer in its own
//! module (`openai_chat`, `openai_responses`, `anthropic`); all of them build on this one.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::Pricing;
use crate::estimate::Estimator;
use crate::kind::ProviderKind;
use crate::transport::Transport;
use crate::wire::{KeptBody, WireCache};

/// Timeouts and retry policy of an HTTP provider.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    /// Time allowed to open a connection.
    pub connect_timeout: Duration,
    /// Time allowed between two reads of the answer (the whole answer of a long generation may
    /// take longer; only silence counts).
    pub read_timeout: Duration,
    /// Retries after the first attempt, on 429, 5xx, connection errors and timeouts.
    pub max_retries: u32,
    /// First backoff delay; each retry doubles it, plus random jitter.
    pub retry_base_delay: Duration,
    /// Upper bound of one wait, also of a server's `Retry-After`.
    pub retry_max_delay: Duration,
    /// Reach a plain `http://` endpoint that no proxy variable covers over hyper's HTTP/1.1
    /// connection directly, without reqwest's layers (the same exchange for less CPU; see
    /// the `transport` module). `false` sends every call through reqwest.
    pub direct: bool,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            max_retries: 4,
            retry_base_delay: Duration::from_millis(500),
            retry_max_delay: Duration::from_secs(30),
            direct: true,
        }
    }
}

/// A real model behind an HTTP API. Built by [`crate::ProviderConfig::build`].
pub struct HttpProvider {
    pub(crate) kind: ProviderKind,
    pub(crate) model: String,
    pub(crate) base_url: String,
    pub(crate) api_key: Option<String>,
    pub(crate) api_key_env: Option<String>,
    pub(crate) pricing: Option<Pricing>,
    pub(crate) stream: bool,
    pub(crate) prompt_cache_retention: Option<String>,
    pub(crate) settings: HttpSettings,
    pub(crate) estimator: Estimator,
    /// How calls reach the endpoint (reqwest, or hyper's connection for a plain `http://`
    /// endpoint), with the headers every call sends (key, API version, `Accept`), built once.
    pub(crate) transport: Transport,
    /// The endpoint, parsed once (not at every call).
    pub(crate) endpoint_url: reqwest::Url,
    /// Each message's and tool's wire JSON and token estimate, made once (see [`WireCache`]).
    pub(crate) wire: Mutex<WireCache>,
    /// The length of the last body built: the next one is allocated at once at about its
    /// size (one allocation, not a doubling series over a long history).
    pub(crate) last_body_len: AtomicUsize,
    /// The last body sent, given back by the HTTP client: the next call over the same
    /// history appends to it (see [`KeptBody`]). Empty while a call is in flight (and after
    /// a call that was cancelled); concurrent calls then make their bodies from nothing.
    pub(crate) kept_body: Mutex<KeptBody>,
}

impl HttpProvider {
    /// The capacity to allocate for the next body: the last body's length and some room.
    pub(crate) fn body_capacity(&self) -> usize {
        self.last_body_len.load(Ordering::Relaxed) + 4096
    }

    pub(crate) fn remember_body_len(&self, len: usize) {
        self.last_body_len.store(len, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for HttpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("HttpProvider")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key_env", &self.api_key_env)
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}
