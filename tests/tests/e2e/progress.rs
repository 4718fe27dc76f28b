//! What a person sees on stderr: retries announced at the default level, the internal
//! context label never shown, an error printed once.

use lsm_e2e::{lsm, run};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::stderr;

/// A server that answers every request with `status`.
async fn failing(status: u16) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(status)
                .set_body_json(serde_json::json!({"error": {"message": "slow down"}})),
        )
        .mount(&server)
        .await;
    server
}

fn openai(cmd: &mut std::process::Command, server: &MockServer) {
    cmd.env("OPENAI_API_KEY", "sk-test-progress-key")
        .args([
            "-c",
            "llm.max_retries=2",
            "-c",
            "llm.retry_base_delay_ms=20",
        ])
        .args(["--provider", "openai", "--model", "m"])
        .args(["--base-url", &format!("{}/v1", server.uri())]);
}

#[tokio::test(flavor = "multi_thread")]
async fn retries_are_announced_and_the_final_error_is_printed_once() {
    let server = failing(429).await;
    let dir = tempfile::tempdir().unwrap();
    let mut ping = lsm(dir.path());
    ping.args(["llm", "ping"]);
    openai(&mut ping, &server);
    let out = tokio::task::spawn_blocking(move || run(&mut ping))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("429 from openai, retry 1/2 in "), "{err}");
    assert!(err.contains("429 from openai, retry 2/2 in "), "{err}");

    let server = failing(500).await;
    std::fs::write(dir.path().join("notes.md"), "hello\n").unwrap();
    let mut agent = lsm(dir.path());
    agent.args(["agent", "run", "general", "--task", "t"]);
    openai(&mut agent, &server);
    let out = tokio::task::spawn_blocking(move || run(&mut agent))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("500 from openai, retry 1/2 in "), "{err}");
    assert!(!err.contains("__default__"), "{err}");
    assert_eq!(
        err.matches("after 3 attempt(s)").count(),
        1,
        "the error once: {err}"
    );
}
