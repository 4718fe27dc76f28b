//! How a call's bytes travel to the server and back: [`Transport`].
//!
//! A plain `http://` endpoint that no proxy covers (a model server on this machine or the
//! local network: Ollama, vLLM, llama.cpp, a test mock) is reached over hyper's HTTP/1.1
//! connection directly, kept open between calls ([`DirectHttp`]). Everything else — TLS,
//! proxies — goes through reqwest. The two differ only in cost: reqwest's layers over the
//! same hyper connection (its URL handling, redirect and proxy layers, header merging) cost
//! about 40–50 µs of CPU per exchange on the machine of docs/PERFORMANCE.md, which is a fifth
//! of what `lsm` spends on a call of an agent over a local server. What a call sends (method,
//! path, headers, body) and how its answer, errors and timeouts are reported are the same on
//! both (`tests/conformance.rs` runs its transport-sensitive cases over each).

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use reqwest::StatusCode;
use reqwest::header::{HOST, HeaderMap, HeaderValue, USER_AGENT};

/// The `User-Agent` of every call.
const AGENT: &str = concat!("lsm/", env!("CARGO_PKG_VERSION"));

/// Idle connections kept for reuse (more concurrent calls than this open and close their own).
const MAX_IDLE: usize = 64;

/// The proxy variables that route a plain `http://` call (reqwest reads the same ones).
const HTTP_PROXY_VARS: [&str; 4] = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"];

/// Whether a call to `url` may skip reqwest: a plain `http://` endpoint, and no proxy
/// variable in `env` (which would route it).
pub(crate) fn direct_applies(url: &reqwest::Url, env: &dyn Fn(&str) -> Option<String>) -> bool {
    url.scheme() == "http"
        && !HTTP_PROXY_VARS
            .iter()
            .any(|var| env(var).is_some_and(|v| !v.trim().is_empty()))
}

/// What sending a request ran into before an answer began.
#[derive(Debug)]
pub(crate) enum SendFault {
    /// No connection within the connect timeout.
    ConnectTimeout,
    /// The server accepted the request but sent no answer within the read timeout.
    AnswerTimeout,
    /// The host name did not resolve.
    UnknownHost(String),
    /// The connection failed or broke (refused, reset, closed before the answer).
    Connect(String),
}

/// What reading an answer's body ran into.
#[derive(Debug)]
pub(crate) enum BodyFault {
    /// The server was silent for longer than the read timeout.
    Stalled,
    /// The connection ended or failed before the body was complete.
    Cut(String),
}

/// The way calls of one provider reach its endpoint (see the module documentation).
pub(crate) enum Transport {
    /// reqwest: TLS, proxies.
    Reqwest {
        client: reqwest::Client,
        url: reqwest::Url,
        headers: HeaderMap,
    },
    /// hyper's HTTP/1.1 connection to a plain `http://` endpoint.
    Direct(DirectHttp),
}

impl Transport {
    /// The transport for `url`: [`Transport::Direct`] when `direct` and
    /// [`direct_applies`], reqwest otherwise. `headers` are sent with every call.
    ///
    /// # Errors
    /// reqwest's error when its client cannot be built (its TLS configuration).
    pub(crate) fn new(
        url: reqwest::Url,
        headers: HeaderMap,
        direct: bool,
        connect_timeout: Duration,
        read_timeout: Duration,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Transport, reqwest::Error> {
        if direct
            && direct_applies(&url, env)
            && let Some(d) = DirectHttp::new(&url, &headers, connect_timeout, read_timeout)
        {
            return Ok(Transport::Direct(d));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .read_timeout(read_timeout)
            .user_agent(AGENT)
            // A redirect is reported, not followed (`HttpProvider::redirect_error`).
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Transport::Reqwest {
            client,
            url,
            headers,
        })
    }

    /// Which transport this is: `"direct"` or `"reqwest"`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Transport::Reqwest { .. } => "reqwest",
            Transport::Direct(_) => "direct",
        }
    }

    /// POST `body` and wait for the answer's status and headers.
    pub(crate) async fn post(&self, body: Bytes) -> Result<Reply<'_>, SendFault> {
        match self {
            Transport::Reqwest {
                client,
                url,
                headers,
            } => client
                .post(url.clone())
                .headers(headers.clone())
                .body(body)
                .send()
                .await
                .map(Reply::Reqwest)
                .map_err(|e| send_fault(&e)),
            Transport::Direct(d) => d.post(body).await.map(Reply::Direct),
        }
    }
}

/// An answer whose status and headers have arrived; its body is read from it.
pub(crate) enum Reply<'t> {
    Reqwest(reqwest::Response),
    Direct(DirectReply<'t>),
}

impl Reply<'_> {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Reply::Reqwest(r) => r.status(),
            Reply::Direct(r) => r.response.status(),
        }
    }

    pub(crate) fn headers(&self) -> &HeaderMap {
        match self {
            Reply::Reqwest(r) => r.headers(),
            Reply::Direct(r) => r.response.headers(),
        }
    }

    /// The next piece of the body; `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, BodyFault> {
        match self {
            Reply::Reqwest(r) => r.chunk().await.map_err(|e| body_fault(&e)),
            Reply::Direct(r) => r.chunk().await,
        }
    }

    /// The whole body.
    pub(crate) async fn bytes(mut self) -> Result<Bytes, BodyFault> {
        if let Reply::Reqwest(r) = self {
            return r.bytes().await.map_err(|e| body_fault(&e));
        }
        let Some(first) = self.chunk().await? else {
            return Ok(Bytes::new());
        };
        let Some(second) = self.chunk().await? else {
            // The usual case for an answer of a few kilobytes: no copy.
            return Ok(first);
        };
        let mut all = Vec::with_capacity(first.len() + second.len() + 4096);
        all.extend_from_slice(&first);
        all.extend_from_slice(&second);
        while let Some(more) = self.chunk().await? {
            all.extend_from_slice(&more);
        }
        Ok(Bytes::from(all))
    }

    /// The body as text, as much of it as arrived (for an error answer).
    pub(crate) async fn text(self) -> String {
        match self.bytes().await {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(_) => String::new(),
        }
    }
}

/// A pool of HTTP/1.1 connections to one `http://` endpoint, made with hyper's client
/// connection (no reqwest layers). A connection goes back to the pool once an answer has been
/// read to its end; an answer dropped half-read closes its connection.
pub(crate) struct DirectHttp {
    /// `host:port` to resolve and connect to.
    address: String,
    /// The request target: the endpoint's path and query.
    target: hyper::Uri,
    /// The headers of every call, `Host` and `User-Agent` included.
    headers: HeaderMap,
    connect_timeout: Duration,
    read_timeout: Duration,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

impl DirectHttp {
    /// `None` when `url` cannot be sent this way (no host, a path hyper does not take).
    fn new(
        url: &reqwest::Url,
        headers: &HeaderMap,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> Option<DirectHttp> {
        // `host_str` keeps an IPv6 address's brackets, as both uses below want it.
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let target = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        let target = hyper::Uri::try_from(target).ok()?;
        let host_header = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let mut headers = headers.clone();
        headers.insert(HOST, HeaderValue::from_str(&host_header).ok()?);
        headers.insert(USER_AGENT, HeaderValue::from_static(AGENT));
        Some(DirectHttp {
            address: format!("{host}:{port}"),
            target,
            headers,
            connect_timeout,
            read_timeout,
            idle: Mutex::new(Vec::new()),
        })
    }

    async fn post(&self, body: Bytes) -> Result<DirectReply<'_>, SendFault> {
        let mut request = self.request(body.clone());
        // A kept connection the server has closed since is noticed here (the connection
        // task saw the end of the stream), in a race when the request cannot be written, or
        // — the server closing an idle connection just as the request went out — when the
        // connection ends or is reset before any answer. In each case the request goes out
        // on a new connection, at once: not a retry of the call (none is counted, none
        // waited for), the same resend a browser makes on a stale kept connection.
        while let Some(mut sender) = self.take_idle() {
            match tokio::time::timeout(self.read_timeout, sender.try_send_request(request)).await {
                Err(_) => return Err(SendFault::AnswerTimeout),
                Ok(Ok(response)) => return Ok(DirectReply::new(self, sender, response)),
                Ok(Err(mut e)) => match e.take_message() {
                    Some(unsent) => request = unsent,
                    None if closed_before_answering(e.error()) => {
                        tracing::debug!(
                            "a kept connection to {} closed before answering ({}); sending on a new one",
                            self.address,
                            chain(e.error())
                        );
                        // Once: a server that drops every request is not asked again and
                        // again on its other kept connections.
                        request = self.request(body);
                        break;
                    }
                    None => return Err(SendFault::Connect(chain(e.error()))),
                },
            }
        }
        let mut sender = self.connect().await?;
        match tokio::time::timeout(self.read_timeout, sender.send_request(request)).await {
            Err(_) => Err(SendFault::AnswerTimeout),
            Ok(Ok(response)) => Ok(DirectReply::new(self, sender, response)),
            Ok(Err(e)) => Err(SendFault::Connect(chain(&e))),
        }
    }

    fn request(&self, body: Bytes) -> hyper::Request<Full<Bytes>> {
        let mut request = hyper::Request::new(Full::new(body));
        *request.method_mut() = hyper::Method::POST;
        *request.uri_mut() = self.target.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }

    fn take_idle(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while let Some(sender) = idle.pop() {
            if sender.is_ready() {
                return Some(sender);
            }
        }
        None
    }

    fn give_back(&self, sender: SendRequest<Full<Bytes>>) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(sender);
        }
    }

    /// A new connection, its task spawned on the runtime.
    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, SendFault> {
        let open = async {
            let addresses: Vec<std::net::SocketAddr> = tokio::net::lookup_host(&self.address)
                .await
                .map_err(|e| {
                    SendFault::UnknownHost(format!(
                        "dns error: cannot resolve {}: {e}",
                        self.address
                    ))
                })?
                .collect();
            if addresses.is_empty() {
                return Err(SendFault::UnknownHost(format!(
                    "dns error: {} has no address",
                    self.address
                )));
            }
            let stream = tokio::net::TcpStream::connect(&addresses[..])
                .await
                .map_err(|e| {
                    SendFault::Connect(format!("tcp connect error to {}: {e}", self.address))
                })?;
            // One write per request already; no Nagle delay on the last segment.
            stream
                .set_nodelay(true)
                .map_err(|e| SendFault::Connect(format!("{}: {e}", self.address)))?;
            Ok(stream)
        };
        let stream = tokio::time::timeout(self.connect_timeout, open)
            .await
            .map_err(|_| SendFault::ConnectTimeout)??;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| SendFault::Connect(chain(&e)))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("HTTP connection ended: {e}");
            }
        });
        Ok(sender)
    }
}

/// An answer on a [`DirectHttp`] connection.
pub(crate) struct DirectReply<'t> {
    pool: &'t DirectHttp,
    response: hyper::Response<hyper::body::Incoming>,
    /// The connection, until the body has been read to its end (then it goes back to the
    /// pool).
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl<'t> DirectReply<'t> {
    fn new(
        pool: &'t DirectHttp,
        sender: SendRequest<Full<Bytes>>,
        response: hyper::Response<hyper::body::Incoming>,
    ) -> Self {
        DirectReply {
            pool,
            response,
            sender: Some(sender),
        }
    }

    async fn chunk(&mut self) -> Result<Option<Bytes>, BodyFault> {
        loop {
            let frame = tokio::time::timeout(self.pool.read_timeout, self.response.frame())
                .await
                .map_err(|_| BodyFault::Stalled)?;
            match frame {
                None => {
                    if let Some(sender) = self.sender.take() {
                        self.pool.give_back(sender);
                    }
                    return Ok(None);
                }
                Some(Err(e)) => return Err(BodyFault::Cut(chain(&e))),
                Some(Ok(frame)) => {
                    // Trailers carry nothing a model API uses.
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }
}

fn send_fault(e: &reqwest::Error) -> SendFault {
    if e.is_timeout() {
        if e.is_connect() {
            SendFault::ConnectTimeout
        } else {
            SendFault::AnswerTimeout
        }
    } else if is_dns_failure(e) {
        SendFault::UnknownHost(chain(e))
    } else {
        SendFault::Connect(chain(e))
    }
}

fn body_fault(e: &reqwest::Error) -> BodyFault {
    if e.is_timeout() {
        BodyFault::Stalled
    } else {
        BodyFault::Cut(chain(e))
    }
}

/// Whether `e` failed because the host name did not resolve: a connection error whose cause
/// is the resolver's (reqwest reports it as `dns error: …` in the error's source chain).
fn is_dns_failure(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.to_string().starts_with("dns error") {
            return true;
        }
        source = s.source();
    }
    false
}

/// An error and its causes, one after the other.
/// Whether `e`, from a request sent on a kept connection, says the connection ended (closed
/// or reset by the server) before an answer was complete: what a server's idle timeout
/// firing as the request goes out looks like from here.
fn closed_before_answering(e: &hyper::Error) -> bool {
    if e.is_incomplete_message() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::BrokenPipe
            );
        }
        source = s.source();
    }
    false
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn only_plain_http_without_a_proxy_goes_direct() {
        let none = |_: &str| None;
        assert!(direct_applies(
            &url("http://localhost:11434/v1/chat/completions"),
            &none
        ));
        assert!(direct_applies(&url("http://[::1]:8080/v1/messages"), &none));
        assert!(!direct_applies(
            &url("https://api.openai.com/v1/chat/completions"),
            &none
        ));
        for var in HTTP_PROXY_VARS {
            let proxy = |v: &str| (v == var).then(|| "http://127.0.0.1:3128".to_string());
            assert!(
                !direct_applies(&url("http://localhost:11434/v1/chat/completions"), &proxy),
                "{var}"
            );
        }
        // An empty variable routes nothing (as reqwest reads it).
        let empty = |v: &str| (v == "HTTP_PROXY").then(String::new);
        assert!(direct_applies(&url("http://localhost:11434/v1"), &empty));
    }

    #[test]
    fn the_direct_request_carries_host_agent_and_the_endpoint_path() {
        let mut h = HeaderMap::new();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        let d = DirectHttp::new(
            &url("http://[::1]:8080/v1/chat/completions?x=1"),
            &h,
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(d.address, "[::1]:8080");
        let r = d.request(Bytes::from_static(b"{}"));
        assert_eq!(r.method(), hyper::Method::POST);
        assert_eq!(r.uri(), "/v1/chat/completions?x=1");
        assert_eq!(r.headers()[HOST], "[::1]:8080");
        assert_eq!(r.headers()[USER_AGENT], AGENT);
        assert_eq!(r.headers()["content-type"], "application/json");
        let d = DirectHttp::new(
            &url("http://example.test/v1/messages"),
            &h,
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(d.address, "example.test:80");
        assert_eq!(d.request(Bytes::new()).headers()[HOST], "example.test");
    }

    /// A resolver that knows no host, as a network whose DNS has no answer.
    struct NoHosts;

    impl reqwest::dns::Resolve for NoHosts {
        fn resolve(&self, _name: reqwest::dns::Name) -> reqwest::dns::Resolving {
            Box::pin(async {
                Err::<reqwest::dns::Addrs, _>(Box::new(std::io::Error::other(
                    "failed to lookup address information",
                ))
                    as Box<dyn std::error::Error + Send + Sync>)
            })
        }
    }

    #[tokio::test]
    async fn a_dns_failure_is_recognised_and_a_refused_connection_is_not_one() {
        let client = reqwest::Client::builder()
            .dns_resolver(std::sync::Arc::new(NoHosts))
            .build()
            .unwrap();
        let e = client
            .get("http://api.nowhere.invalid/v1")
            .send()
            .await
            .unwrap_err();
        assert!(
            matches!(send_fault(&e), SendFault::UnknownHost(_)),
            "{}",
            chain(&e)
        );
        // A refused connection (nothing listens on a port we just released) is not DNS.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await
            .unwrap_err();
        assert!(
            matches!(send_fault(&e), SendFault::Connect(_)),
            "{}",
            chain(&e)
        );
        // The same over the direct connection.
        let d = DirectHttp::new(
            &url(&format!("http://127.0.0.1:{port}/v1")),
            &HeaderMap::new(),
            Duration::from_secs(5),
            Duration::from_secs(5),
        )
        .unwrap();
        let fault = d.post(Bytes::new()).await.err().unwrap();
        assert!(
            matches!(fault, SendFault::Connect(ref m) if m.contains("refused")),
            "{fault:?}"
        );
    }
}
