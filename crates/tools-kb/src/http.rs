//! HTTP and HTTPS for the knowledge base: remote sources, `load_url` and the `/embeddings`
//! endpoint all go through `reqwest` with rustls — the stack the LLM providers use.
//!
//! Two guarantees live here rather than in each caller:
//! - **Schemes**: only `http://` and `https://` URLs are fetched, never with credentials in
//!   the URL; anything else is refused before a connection is made.
//! - **Addresses** ([`AddressPolicy::PublicOnly`]): a URL whose host is, or resolves only to,
//!   a loopback, private, link-local or otherwise non-public address is refused. The check is
//!   made on the URL before connecting (for a clear message) *and* by the client's resolver on
//!   every connection, redirects included, so neither a redirect nor a DNS answer that changes
//!   between the check and the connection reaches such an address. Proxies from the
//!   environment are not used under this policy (a proxy would resolve the host itself).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Client, Method, Url};

/// Why a URL was refused or an HTTP exchange failed. Each variant says how to recover.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The text is not a URL. Give a full `http://` or `https://` URL.
    #[error("'{url}' is not a valid URL: {source}")]
    InvalidUrl {
        /// The text given.
        url: String,
        /// Why it does not parse.
        source: url::ParseError,
    },
    /// The URL's scheme is neither `http` nor `https`. Use an `http://` or `https://` URL.
    #[error("'{url}': the scheme '{scheme}' is refused; use an http:// or https:// URL")]
    Scheme {
        /// The URL.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// The URL carries a user name or password. Configure an API key instead.
    #[error("'{url}': credentials in URLs are refused; configure an API key instead")]
    Credentials {
        /// The URL.
        url: String,
    },
    /// The URL names no host. Add one.
    #[error("'{url}': no host")]
    NoHost {
        /// The URL.
        url: String,
    },
    /// Under [`AddressPolicy::PublicOnly`], the URL's host is or resolves to a non-public
    /// address. Use a public URL, or allow private addresses in the configuration.
    #[error(
        "'{url}' resolves to {ip}, a loopback or private address; refused (set \
         kb.remote.allow_private_addresses = true to allow it)"
    )]
    PrivateAddress {
        /// The URL.
        url: String,
        /// The address it is or resolves to.
        ip: IpAddr,
    },
    /// The host name could not be resolved. Check the name and the network.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// The host name.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// The host name resolved to no address at all. Check the name.
    #[error("cannot resolve {host}")]
    NoAddress {
        /// The host name.
        host: String,
    },
    /// The HTTP client (its TLS stack) could not be set up.
    #[error("cannot set up the HTTP client: {0}")]
    Client(String),
    /// No answer: no connection, a refused redirect, a timeout. Check the URL and that the
    /// server is reachable.
    #[error("cannot fetch '{url}': {message}")]
    Fetch {
        /// The URL.
        url: String,
        /// The error and its causes.
        message: String,
    },
    /// The answer's body could not be read to its end. Try again.
    #[error("reading '{url}' failed: {message}")]
    Read {
        /// The URL.
        url: String,
        /// The error and its causes.
        message: String,
    },
    /// The runtime that runs the exchange could not be started (out of resources).
    #[error("cannot start the HTTP runtime: {0}")]
    Runtime(std::io::Error),
    /// The thread that runs the exchange could not be started (out of resources).
    #[error("cannot start the HTTP thread: {0}")]
    Thread(std::io::Error),
    /// The thread that ran the exchange stopped before answering.
    #[error("the HTTP thread stopped unexpectedly")]
    ThreadStopped,
}

/// Most redirects followed by one fetch.
const MAX_REDIRECTS: usize = 5;

/// Which addresses a client may connect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressPolicy {
    /// Any address (configured endpoints: an embedding server, a provider's mirror).
    Any,
    /// Public addresses only (URLs an agent chose).
    PublicOnly,
}

/// One HTTP answer, its body cut at the caller's limit.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`, when the server sent one.
    pub content_type: Option<String>,
    /// The body, at most the limit given.
    pub body: Vec<u8>,
    /// Whether the body was longer than the limit and was cut.
    pub truncated: bool,
}

/// Whether `ip` is loopback, private, link-local or otherwise not on the public internet.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                // 100.64.0.0/10, carrier-grade NAT.
                || v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64
                // 0.0.0.0/8.
                || v4.octets()[0] == 0
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // fc00::/7, unique local.
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                // fe80::/10, link-local.
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_private(IpAddr::V4(v4)))
        }
    }
}

/// Parse `url` and check its scheme: `http` or `https`, no credentials, a host.
///
/// # Errors
/// [`HttpError::InvalidUrl`], [`HttpError::Scheme`], [`HttpError::Credentials`] or
/// [`HttpError::NoHost`], saying what is wrong and what to use instead.
pub fn parse_url(url: &str) -> Result<Url, HttpError> {
    let parsed = Url::parse(url).map_err(|source| HttpError::InvalidUrl {
        url: url.to_string(),
        source,
    })?;
    match parsed.scheme() {
        "http" | "https" => {}
        other => {
            return Err(HttpError::Scheme {
                url: url.to_string(),
                scheme: other.to_string(),
            });
        }
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(HttpError::Credentials {
            url: url.to_string(),
        });
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(HttpError::NoHost {
            url: url.to_string(),
        });
    }
    Ok(parsed)
}

fn refusal(url: &Url, ip: IpAddr) -> HttpError {
    HttpError::PrivateAddress {
        url: url.to_string(),
        ip,
    }
}

/// The host of `url` as an address, when it is one (`127.0.0.1`, `[::1]`).
fn literal_ip(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    }
}

/// A resolver that drops non-public addresses, and fails when none is left.
#[derive(Debug)]
struct PublicOnlyResolver;

impl Resolve for PublicOnlyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| !is_private(a.ip()))
                .collect();
            if public.is_empty() {
                let shown = found.first().map_or(String::new(), |a| a.ip().to_string());
                let message = format!(
                    "{host} resolves to {shown}, a loopback or private address; refused (set \
                     kb.remote.allow_private_addresses = true to allow it)"
                );
                return Err(
                    std::io::Error::new(std::io::ErrorKind::PermissionDenied, message).into(),
                );
            }
            let addrs: Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

/// A redirect's target is followed only when it is http(s) without credentials and, under
/// [`AddressPolicy::PublicOnly`], not a literal non-public address (host names are checked by
/// the resolver when the redirect connects).
///
/// # Errors
/// Why the redirect is refused.
fn check_redirect(next: &Url) -> Result<(), HttpError> {
    parse_url(next.as_str())?;
    match literal_ip(next) {
        Some(ip) if is_private(ip) => Err(refusal(next, ip)),
        _ => Ok(()),
    }
}

/// An HTTP client and the address policy it was built for (its resolver and redirect policy
/// enforce it; [`request`] also checks each URL against it before connecting).
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: Client,
    policy: AddressPolicy,
}

/// A client for `policy`, with `timeout` for the whole exchange.
///
/// # Errors
/// [`HttpError::Client`] when the TLS stack cannot be set up.
pub fn client(policy: AddressPolicy, timeout: Duration) -> Result<HttpClient, HttpError> {
    let mut builder = Client::builder()
        .user_agent(concat!("lsm/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .timeout(timeout);
    builder = match policy {
        AddressPolicy::Any => builder.redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS)),
        AddressPolicy::PublicOnly => builder
            .no_proxy()
            .dns_resolver(Arc::new(PublicOnlyResolver))
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
                }
                match check_redirect(attempt.url()) {
                    Ok(()) => attempt.follow(),
                    Err(refused) => attempt.error(refused),
                }
            })),
    };
    let client = builder
        .build()
        .map_err(|e| HttpError::Client(error_chain(&e)))?;
    Ok(HttpClient { client, policy })
}

/// An error and its causes, `a: b: c`, without repeats.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// Check `url` against `policy` before connecting, for a clear message: a literal address,
/// or a host that resolves to non-public addresses only, is refused.
async fn precheck(url: &Url, policy: AddressPolicy) -> Result<(), HttpError> {
    if policy == AddressPolicy::Any {
        return Ok(());
    }
    if let Some(ip) = literal_ip(url) {
        return if is_private(ip) {
            Err(refusal(url, ip))
        } else {
            Ok(())
        };
    }
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(80);
    let found: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|source| HttpError::Resolve {
            host: host.to_string(),
            source,
        })?
        .collect();
    match found.iter().find(|a| !is_private(a.ip())) {
        Some(_) => Ok(()),
        None => match found.first() {
            Some(a) => Err(refusal(url, a.ip())),
            None => Err(HttpError::NoAddress {
                host: host.to_string(),
            }),
        },
    }
}

/// One request: `method` to `url` with an optional JSON body and bearer token, the answer's
/// body read up to `max_bytes`.
///
/// # Errors
/// An [`HttpError`] saying what failed: a refused URL or address, no connection, a timeout.
pub async fn request(
    client: &HttpClient,
    method: Method,
    url: &str,
    json_body: Option<&serde_json::Value>,
    bearer: Option<&str>,
    max_bytes: usize,
) -> Result<Fetched, HttpError> {
    let parsed = parse_url(url)?;
    precheck(&parsed, client.policy).await?;
    let mut req = client.client.request(method, parsed.clone());
    if let Some(body) = json_body {
        req = req.json(body);
    }
    if let Some(token) = bearer {
        req = req.bearer_auth(token);
    }
    let mut resp = req.send().await.map_err(|e| HttpError::Fetch {
        url: parsed.to_string(),
        message: error_chain(&e),
    })?;
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = resp.chunk().await.map_err(|e| HttpError::Read {
        url: parsed.to_string(),
        message: error_chain(&e),
    })? {
        let room = max_bytes.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched {
        status,
        content_type,
        body,
        truncated,
    })
}

/// GET `url` with a fresh client for `policy`.
///
/// # Errors
/// As [`request`].
pub async fn get(
    url: &str,
    policy: AddressPolicy,
    timeout: Duration,
    max_bytes: usize,
) -> Result<Fetched, HttpError> {
    let client = client(policy, timeout)?;
    request(&client, Method::GET, url, None, None, max_bytes).await
}

/// Run `fut` to completion from synchronous code, whatever the caller's context: on a
/// thread of its own with a single-threaded runtime, so it neither needs nor disturbs the
/// caller's runtime (blocking inside one would panic). The caller's thread waits.
///
/// # Errors
/// The future's own error, or (converted from an [`HttpError`]) a message when the thread
/// or runtime cannot be started.
pub fn block_on<T, E, F>(make: impl FnOnce() -> F + Send) -> Result<T, E>
where
    F: std::future::Future<Output = Result<T, E>>,
    T: Send,
    E: From<HttpError> + Send,
{
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("lsm-kb-http".into())
            .spawn_scoped(s, move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(HttpError::Runtime)?;
                rt.block_on(make())
            })
            .map_err(HttpError::Thread)?;
        handle.join().map_err(|_| HttpError::ThreadStopped)?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_need_http_or_https_a_host_and_no_credentials() {
        assert!(parse_url("http://example.org:8080/a?x=1").is_ok());
        assert!(parse_url("https://example.org/").is_ok());
        assert!(
            parse_url("file:///etc/passwd")
                .unwrap_err()
                .to_string()
                .contains("scheme 'file' is refused")
        );
        assert!(parse_url("ftp://h/").is_err());
        assert!(
            parse_url("http://user:pw@h/")
                .unwrap_err()
                .to_string()
                .contains("credentials")
        );
        assert!(
            parse_url("not a url")
                .unwrap_err()
                .to_string()
                .contains("not a valid URL")
        );
    }

    #[test]
    fn private_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.5.5",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn redirects_to_other_schemes_or_literal_private_addresses_are_refused() {
        let url = |u: &str| Url::parse(u).unwrap();
        assert!(check_redirect(&url("https://93.184.216.34/next")).is_ok());
        assert!(check_redirect(&url("https://example.org/next")).is_ok());
        for bad in [
            "http://127.0.0.1/admin",
            "http://[::1]/",
            "http://169.254.169.254/latest/meta-data/",
            "file:///etc/passwd",
            "http://user:pw@example.org/",
        ] {
            assert!(check_redirect(&url(bad)).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn literal_and_resolved_loopback_are_refused_before_connecting() {
        for url in [
            "http://127.0.0.1:9/",
            "http://[::1]:9/",
            "http://localhost:9/",
        ] {
            let e = get(url, AddressPolicy::PublicOnly, Duration::from_secs(2), 10)
                .await
                .unwrap_err();
            assert!(matches!(e, HttpError::PrivateAddress { .. }), "{url}: {e}");
            assert!(e.to_string().contains("loopback or private"), "{url}: {e}");
        }
    }

    #[test]
    fn block_on_works_inside_and_outside_a_runtime() {
        let plain = block_on(|| async { Ok::<_, HttpError>(7) }).unwrap();
        assert_eq!(plain, 7);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let nested = rt.block_on(async { block_on(|| async { Ok::<_, HttpError>(8) }) });
        assert_eq!(nested.unwrap(), 8);
    }
}
