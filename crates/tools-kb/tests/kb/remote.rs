//! Remote sources against loopback servers: the arXiv provider, its cache, the gating by mode
//! and URL access, and the network tools.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lsm_sandbox::{Sandbox, SandboxConfig, ToolRegistry};
use lsm_tools_kb::remote::{Arxiv, Limited, RemoteProvider, RemoteResult};
use lsm_tools_kb::{ModePolicy, ModeSpec, Pipeline, QueryRequest, tools};
use serde_json::json;

use super::Fixture;

/// Serves `body` with `content_type` to every request; counts the requests.
fn serve(body: &'static str, content_type: &'static str) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(s.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (format!("http://127.0.0.1:{port}"), hits)
}

const FEED: &str = "<?xml version=\"1.0\"?><feed><entry><id>http://arxiv.org/abs/2101.00001</id><title>Panel flutter at supersonic speeds</title><summary>We study the aeroelastic stability of panels.</summary></entry><entry><id>http://arxiv.org/abs/2101.00002</id><title>Second paper</title><summary>More.</summary></entry></feed>";

#[tokio::test]
async fn the_arxiv_provider_reads_a_loopback_feed_and_caches_results() {
    let (base, hits) = serve(FEED, "application/atom+xml");
    let arxiv: Arc<dyn RemoteProvider> =
        Arc::new(Arxiv::new("arxiv", &format!("{base}/api/query")).unwrap());
    let limited = Limited::new(
        arxiv,
        std::time::Duration::from_millis(1),
        std::time::Duration::from_secs(60),
    );
    let r = limited.search("panel flutter", 5).await.unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].title, "Panel flutter at supersonic speeds");
    assert_eq!(r[0].url, "http://arxiv.org/abs/2101.00001");
    assert_eq!(r[0].provider, "arxiv");
    let again = limited.search("panel flutter", 5).await.unwrap();
    assert_eq!(again, r);
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "the second call came from the cache"
    );
    limited.search("other", 5).await.unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

/// Counts its calls; answers one result.
struct Counting(AtomicUsize);

#[async_trait::async_trait]
impl RemoteProvider for Counting {
    fn name(&self) -> &str {
        "fake"
    }
    async fn search(&self, query: &str, _max: usize) -> lsm_tools_kb::Result<Vec<RemoteResult>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(vec![RemoteResult {
            provider: "fake".into(),
            title: format!("About {query}"),
            url: "http://example.org/x".into(),
            snippet: "remote text".into(),
        }])
    }
}

#[tokio::test]
async fn remote_sources_are_used_only_when_the_mode_and_url_access_allow_them() {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(None);
    f.ingest(&kb);
    let fake = Arc::new(Counting(AtomicUsize::new(0)));
    let request = |mode: &str| QueryRequest {
        query: "wing flutter".into(),
        mode: Some(ModeSpec::Name(mode.into())),
        ..Default::default()
    };
    // URL access off: an insight query does not reach the remote source.
    let closed = Pipeline::new(Arc::clone(&kb), None, ModePolicy::new(&[], false))
        .with_remote(vec![fake.clone() as Arc<dyn RemoteProvider>]);
    let pkg = closed.build_sources(request("insight")).await.unwrap();
    assert!(pkg.remote_sources.is_empty());
    assert_eq!(fake.0.load(Ordering::SeqCst), 0);
    // URL access on, but the mode (grounded) does not enable remote sources.
    let open = Pipeline::new(Arc::clone(&kb), None, ModePolicy::new(&[], true))
        .with_remote(vec![fake.clone() as Arc<dyn RemoteProvider>]);
    let pkg = open.build_sources(request("grounded")).await.unwrap();
    assert!(pkg.remote_sources.is_empty());
    assert_eq!(fake.0.load(Ordering::SeqCst), 0);
    // Both: the remote result is a labelled source after the local ones.
    let pkg = open.build_sources(request("insight")).await.unwrap();
    assert_eq!(fake.0.load(Ordering::SeqCst), 1);
    assert_eq!(pkg.remote_sources.len(), 1);
    let last = pkg.candidates.last().unwrap();
    assert_eq!(
        (last.content_type.as_str(), last.path.as_str()),
        ("remote", "http://example.org/x")
    );
    let pkg = open.synthesize_context(pkg);
    assert!(pkg.context_block.contains("About wing flutter"));
}

#[tokio::test]
async fn remote_tools_need_url_access_and_load_url_refuses_private_addresses() {
    let (base, _) = serve(
        "<html><body><h1>Page</h1><p>Hello from the page.</p></body></html>",
        "text/html",
    );
    let mut f = Fixture::new();
    f.corpus();
    f.config.remote.providers = vec![
        serde_json::from_value(json!({
            "name": "arxiv", "kind": "arxiv", "url": format!("{base}/api/query"),
            "min_interval_seconds": 0.0
        }))
        .unwrap(),
    ];
    let kb = f.kb(None);
    f.ingest(&kb);
    let remote = lsm_tools_kb::remote::build_providers(&f.config.remote).unwrap();
    let p = Arc::new(Pipeline::new(kb, None, ModePolicy::new(&[], true)).with_remote(remote));
    let registry = tools::registry_with(ToolRegistry::new(), Some(p));
    for name in ["query_arxiv", "query_remote_chain", "load_url"] {
        assert!(registry.contains(name), "{name}");
    }
    let sandbox = |allow: bool, private: bool| {
        let mut config = SandboxConfig {
            allow_url_access: allow,
            ..Default::default()
        };
        config
            .require_user_permission
            .insert("load_url".into(), false);
        let mut reg = registry.clone();
        let mut remote_cfg = f.config.remote.clone();
        remote_cfg.allow_private_addresses = private;
        reg.register(Arc::new(tools::LoadUrl(remote_cfg)));
        Sandbox::new(config, reg, None).unwrap()
    };
    // Without URL access every remote tool is denied by the sandbox.
    let closed = sandbox(false, false);
    for name in ["query_arxiv", "query_remote_chain", "load_url"] {
        let args = if name == "load_url" {
            json!({"url": format!("{base}/")})
        } else {
            json!({"query": "flutter"})
        };
        let err = closed
            .execute(name, &args)
            .await
            .outcome
            .unwrap_err()
            .to_string();
        assert!(err.contains("allow_url_access"), "{name}: {err}");
    }
    // With it, load_url still refuses loopback unless configured, and other schemes.
    let open = sandbox(true, false);
    let err = open
        .execute("load_url", &json!({"url": format!("{base}/")}))
        .await
        .outcome
        .unwrap_err()
        .to_string();
    assert!(err.contains("private address"), "{err}");
    let port = base.rsplit(':').next().unwrap();
    for bad in [
        "file:///etc/passwd".to_string(),
        "ftp://example.org/".to_string(),
        "http://user:pw@example.org/".to_string(),
        // A host name that resolves to loopback is refused like the literal address.
        format!("http://localhost:{port}/"),
    ] {
        let err = open
            .execute("load_url", &json!({"url": bad}))
            .await
            .outcome
            .unwrap_err()
            .to_string();
        assert!(err.contains("refused"), "{bad}: {err}");
    }
    let allowed = sandbox(true, true);
    let out = allowed
        .execute("load_url", &json!({"url": format!("{base}/")}))
        .await
        .outcome
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["text"].as_str().unwrap().contains("Hello from the page"),
        "{v}"
    );
    assert!(!v["text"].as_str().unwrap().contains("<p>"));
    assert_eq!(v["truncated"], false);
    // A page longer than load_url_max_bytes is cut there, and the output says so.
    let mut small = f.config.remote.clone();
    small.allow_private_addresses = true;
    small.load_url_max_bytes = 20;
    let mut reg = registry.clone();
    reg.register(Arc::new(tools::LoadUrl(small)));
    let mut config = SandboxConfig {
        allow_url_access: true,
        ..Default::default()
    };
    config
        .require_user_permission
        .insert("load_url".into(), false);
    let out = Sandbox::new(config, reg, None)
        .unwrap()
        .execute("load_url", &json!({"url": format!("{base}/")}))
        .await
        .outcome
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["truncated"], true, "{v}");
    assert!(!v["text"].as_str().unwrap().contains("Hello"), "{v}");
    // https is spoken: against this plain-HTTP server the TLS handshake fails, after a real
    // connection attempt (not a refusal of the scheme).
    let err = allowed
        .execute(
            "load_url",
            &json!({"url": format!("https://127.0.0.1:{port}/")}),
        )
        .await
        .outcome
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot fetch") && !err.contains("refused"),
        "{err}"
    );
}
