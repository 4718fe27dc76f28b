//! Remote sources: the [`RemoteProvider`] trait, the arXiv provider, a per-provider rate
//! limit and TTL cache, and the `load_url` fetcher's address checks.
//!
//! Remote sources are URL access: the pipeline asks them only when the mode enables remote
//! sources **and** the sandbox allows URL access, and their tools have risk `network`.
//! HTTP and HTTPS go through [`crate::http`] (reqwest with rustls); the arXiv API is reached
//! over `https://export.arxiv.org`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{KbError, Result};

/// One result of a remote source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteResult {
    /// The provider's name.
    pub provider: String,
    /// Title.
    pub title: String,
    /// Where it is.
    pub url: String,
    /// A short excerpt (an abstract, a summary).
    pub snippet: String,
}

/// A searchable remote source (Wikipedia, arXiv, …).
#[async_trait::async_trait]
pub trait RemoteProvider: Send + Sync {
    /// Short name (`arxiv`); the tool is `query_<name>`.
    fn name(&self) -> &str;

    /// Up to `max_results` results for `query`.
    ///
    /// # Errors
    /// [`KbError::InvalidRequest`] saying what failed (unreachable, HTTP error, bad answer).
    async fn search(&self, query: &str, max_results: usize) -> Result<Vec<RemoteResult>>;
}

/// `[kb.remote]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RemoteConfig {
    /// Remote providers: `{ name = "arxiv", kind = "arxiv" }` (optionally `url`,
    /// `min_interval_seconds`, `cache_ttl_seconds`).
    pub providers: Vec<RemoteProviderConfig>,
    /// Names of the providers `query_remote_chain` asks, in order (empty: all).
    pub chain: Vec<String>,
    /// Let `load_url` fetch loopback and private addresses.
    pub allow_private_addresses: bool,
    /// Largest page `load_url` reads, in bytes.
    pub load_url_max_bytes: usize,
    /// Time limit of one `load_url` fetch, in seconds.
    pub load_url_timeout_seconds: f64,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            providers: Vec::new(),
            chain: Vec::new(),
            allow_private_addresses: false,
            load_url_max_bytes: 2 * 1024 * 1024,
            load_url_timeout_seconds: 20.0,
        }
    }
}

/// One configured remote provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteProviderConfig {
    /// Its name (tool `query_<name>`).
    pub name: String,
    /// Which implementation: `arxiv`.
    pub kind: String,
    /// Base URL (default for arxiv: `https://export.arxiv.org/api/query`).
    #[serde(default)]
    pub url: Option<String>,
    /// Least time between two calls, in seconds (arXiv asks for 3).
    #[serde(default = "default_interval")]
    pub min_interval_seconds: f64,
    /// How long a result is reused, in seconds.
    #[serde(default = "default_ttl")]
    pub cache_ttl_seconds: f64,
}

fn default_interval() -> f64 {
    3.0
}

fn default_ttl() -> f64 {
    3600.0
}

fn remote_err(message: impl Into<String>) -> KbError {
    KbError::InvalidRequest(message.into())
}

/// Build the configured providers, each behind its rate limit and cache.
///
/// # Errors
/// [`KbError::Config`] for an unknown kind or a bad URL.
pub fn build_providers(config: &RemoteConfig) -> Result<Vec<Arc<dyn RemoteProvider>>> {
    let mut out: Vec<Arc<dyn RemoteProvider>> = Vec::new();
    for p in &config.providers {
        let inner: Arc<dyn RemoteProvider> = match p.kind.as_str() {
            "arxiv" => Arc::new(Arxiv::new(&p.name, p.url.as_deref().unwrap_or(ARXIV_URL))?),
            other => {
                return Err(KbError::Config {
                    key: format!("kb.remote.providers.{}.kind", p.name),
                    message: format!("unknown kind '{other}'; this build has: arxiv"),
                });
            }
        };
        out.push(Arc::new(Limited::new(
            inner,
            Duration::from_secs_f64(p.min_interval_seconds.max(0.0)),
            Duration::from_secs_f64(p.cache_ttl_seconds.max(0.0)),
        )));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------

/// arXiv's public API.
pub const ARXIV_URL: &str = "https://export.arxiv.org/api/query";

/// The arXiv search API (Atom feed).
#[derive(Debug, Clone)]
pub struct Arxiv {
    name: String,
    url: String,
}

impl Arxiv {
    /// A provider named `name` at `url`.
    ///
    /// # Errors
    /// [`KbError::Config`] when the URL is not `http://` or `https://`.
    pub fn new(name: &str, url: &str) -> Result<Self> {
        crate::http::parse_url(url).map_err(|e| KbError::Config {
            key: format!("kb.remote.providers.{name}.url"),
            message: e.to_string(),
        })?;
        Ok(Arxiv {
            name: name.to_string(),
            url: url.to_string(),
        })
    }
}

/// The `title`, `id` and `summary` of each `<entry>` of an Atom feed (quick-xml: CDATA
/// sections, named and numeric character references; namespace prefixes ignored), each
/// with its white space collapsed.
///
/// # Errors
/// An [`AtomError`] saying what is wrong with the XML, when it does not parse.
fn atom_entries(xml: &str) -> std::result::Result<Vec<HashMap<&'static str, String>>, AtomError> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = Vec::new();
    // The entry being read, and the field of it whose text is being read.
    let mut entry: Option<HashMap<&'static str, String>> = None;
    let mut field: Option<(&'static str, String)> = None;
    loop {
        let event = reader.read_event().map_err(AtomError::NotXml)?;
        match event {
            Event::Start(e) => match e.local_name().as_ref() {
                b"entry" => entry = Some(HashMap::new()),
                name if entry.is_some() && field.is_none() => {
                    field = match name {
                        b"title" => Some(("title", String::new())),
                        b"id" => Some(("id", String::new())),
                        b"summary" => Some(("summary", String::new())),
                        _ => None,
                    };
                }
                _ => {}
            },
            Event::End(e) => match e.local_name().as_ref() {
                b"entry" => {
                    if let Some(done) = entry.take() {
                        out.push(done);
                    }
                    field = None;
                }
                name => {
                    if let (Some(m), Some((key, text))) = (entry.as_mut(), field.as_ref())
                        && key.as_bytes() == name
                    {
                        m.insert(*key, text.split_whitespace().collect::<Vec<_>>().join(" "));
                        field = None;
                    }
                }
            },
            Event::Text(t) => append(&mut field, &t.decode().map_err(AtomError::NotText)?),
            Event::CData(t) => append(&mut field, &t.decode().map_err(AtomError::NotText)?),
            Event::GeneralRef(r) if field.is_some() => {
                let name = r.decode().map_err(AtomError::NotText)?;
                let resolved = r.resolve_char_ref().map_err(AtomError::BadCharRef)?;
                match resolved {
                    Some(c) => append(&mut field, c.encode_utf8(&mut [0; 4])),
                    None => match quick_xml::escape::resolve_predefined_entity(&name) {
                        Some(s) => append(&mut field, s),
                        // An entity the feed never declared: kept as written.
                        None => append(&mut field, &format!("&{name};")),
                    },
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

/// Add `piece` to the text of the field being read, if one is.
fn append(field: &mut Option<(&'static str, String)>, piece: &str) {
    if let Some((_, text)) = field.as_mut() {
        text.push_str(piece);
    }
}

/// Why an Atom feed could not be read. The provider's answer is unusable: check its URL
/// (it must answer an Atom feed) or try again later.
#[derive(Debug, thiserror::Error)]
enum AtomError {
    /// The feed does not parse as XML.
    #[error("the Atom feed is not valid XML: {0}")]
    NotXml(quick_xml::Error),
    /// Some text of the feed is not in its declared encoding.
    #[error("the Atom feed is not valid text: {0}")]
    NotText(quick_xml::encoding::EncodingError),
    /// A numeric character reference names no character.
    #[error("the Atom feed has a bad character reference: {0}")]
    BadCharRef(quick_xml::Error),
}

impl Arxiv {
    /// The query URL: `search_query=all:<query>` with the query form-encoded (spaces as `+`,
    /// everything but letters, digits and `*-._` as `%XX` of its UTF-8 bytes).
    fn search_url(&self, query: &str, max_results: usize) -> String {
        let encoded: String = url::form_urlencoded::byte_serialize(query.as_bytes()).collect();
        format!(
            "{}?search_query=all:{encoded}&start=0&max_results={}",
            self.url,
            max_results.clamp(1, 50)
        )
    }
}

#[async_trait::async_trait]
impl RemoteProvider for Arxiv {
    fn name(&self) -> &str {
        &self.name
    }

    async fn search(&self, query: &str, max_results: usize) -> Result<Vec<RemoteResult>> {
        let url = self.search_url(query, max_results);
        // The configured provider URL is trusted configuration (it may be a local mirror).
        let fetched = crate::http::get(
            &url,
            crate::http::AddressPolicy::Any,
            Duration::from_secs(20),
            4 * 1024 * 1024,
        )
        .await
        .map_err(|m| remote_err(format!("{}: {m}", self.name)))?;
        if fetched.status != 200 {
            return Err(remote_err(format!(
                "{}: HTTP {}",
                self.name, fetched.status
            )));
        }
        let body = fetched.body;
        let xml = String::from_utf8_lossy(&body);
        let entries = atom_entries(&xml).map_err(|m| remote_err(format!("{}: {m}", self.name)))?;
        Ok(entries
            .into_iter()
            .take(max_results)
            .map(|e| RemoteResult {
                provider: self.name.clone(),
                title: e.get("title").cloned().unwrap_or_default(),
                url: e.get("id").cloned().unwrap_or_default(),
                snippet: crate::text::truncate_chars(
                    e.get("summary").map_or("", String::as_str),
                    600,
                ),
            })
            .collect())
    }
}

// ---------------------------------------------------------------------------------------------

type CacheKey = (String, usize);

/// A provider behind a minimum interval between calls and a TTL cache of results.
pub struct Limited {
    inner: Arc<dyn RemoteProvider>,
    min_interval: Duration,
    ttl: Duration,
    last_call: tokio::sync::Mutex<Option<Instant>>,
    cache: Mutex<HashMap<CacheKey, (Instant, Vec<RemoteResult>)>>,
}

impl std::fmt::Debug for Limited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limited")
            .field("provider", &self.inner.name())
            .finish_non_exhaustive()
    }
}

impl Limited {
    /// Wrap `inner`.
    pub fn new(inner: Arc<dyn RemoteProvider>, min_interval: Duration, ttl: Duration) -> Self {
        Limited {
            inner,
            min_interval,
            ttl,
            last_call: tokio::sync::Mutex::new(None),
            cache: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait::async_trait]
impl RemoteProvider for Limited {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn search(&self, query: &str, max_results: usize) -> Result<Vec<RemoteResult>> {
        let key = (query.to_string(), max_results);
        {
            let cache = match self.cache.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if let Some((at, hit)) = cache.get(&key)
                && at.elapsed() < self.ttl
            {
                return Ok(hit.clone());
            }
        }
        {
            let mut last = self.last_call.lock().await;
            if let Some(t) = *last {
                let wait = self.min_interval.saturating_sub(t.elapsed());
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
            }
            *last = Some(Instant::now());
        }
        let results = self.inner.search(query, max_results).await?;
        let mut cache = match self.cache.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        cache.insert(key, (Instant::now(), results.clone()));
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atom_entries_are_read() {
        let xml = "<feed><entry><id>http://arxiv.org/abs/1</id><title>Wing\n  flutter &amp; more</title><summary>About flutter.</summary></entry><entry><id>x2</id><title>T2</title></entry></feed>";
        let e = atom_entries(xml).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0]["title"], "Wing flutter & more");
        assert_eq!(e[0]["id"], "http://arxiv.org/abs/1");
        assert!(!e[1].contains_key("summary"));
    }

    #[test]
    fn atom_entries_read_cdata_numeric_references_and_prefixes() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:atom="http://www.w3.org/2005/Atom">
  <title>ArXiv Query: feed title, not an entry</title>
  <entry>
    <atom:id>http://arxiv.org/abs/2</atom:id>
    <title><![CDATA[Flutter <b>&</b> buffeting]]></title>
    <summary>Caf&#233; &#x2014; d&eacute;j&#224; vu, 3 &lt; 4</summary>
    <author><name>A. Person</name></author>
    <link title="pdf" href="http://arxiv.org/pdf/2"/>
  </entry>
</feed>"#;
        let e = atom_entries(xml).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0]["title"], "Flutter <b>&</b> buffeting");
        assert_eq!(e[0]["id"], "http://arxiv.org/abs/2");
        assert_eq!(e[0]["summary"], "Café — d&eacute;jà vu, 3 < 4");
        assert!(atom_entries("<feed><entry><title>x</entry></feed>").is_err());
    }

    #[test]
    fn the_query_is_form_encoded_into_the_url() {
        let a = Arxiv::new("arxiv", "https://example.org/api/query").unwrap();
        assert_eq!(
            a.search_url("wing & flap=2/é#x", 500),
            "https://example.org/api/query?search_query=all:wing+%26+flap%3D2%2F%C3%A9%23x\
             &start=0&max_results=50"
        );
    }
}
