//! Seed 002 §13.2 over a real OpenAI Responses client: response ids chain per context label,
//! against an HTTP server on 127.0.0.1 (wiremock).

// Helpers outside #[test] functions may fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lsm_harness::{AgentHarness, HarnessConfig, RunSummary};
use lsm_phase::{AgentIdentity, PhaseExecutor, PhaseRequest, RunOutcome, StopReason};
use lsm_providers::{ProviderConfig, ProviderKind};
use lsm_sandbox::{Sandbox, SandboxConfig, ToolRegistry};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Answers every call with a text and a fresh id: resp_1, resp_2, …
struct NumberedResponses(AtomicUsize);

impl Respond for NumberedResponses {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        ResponseTemplate::new(200).set_body_json(json!({
            "id": format!("resp_{n}"), "object": "response", "status": "completed",
            "output": [{"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": format!("answer {n}")}]}],
            "usage": {"input_tokens": 10, "output_tokens": 2, "input_tokens_details": {"cached_tokens": 0}}
        }))
    }
}

async fn harness(server: &MockServer, dir: &std::path::Path) -> AgentHarness {
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(NumberedResponses(AtomicUsize::new(0)))
        .mount(server)
        .await;
    let mut config = ProviderConfig::new(ProviderKind::OpenAiResponses, "gpt-4o-mini");
    config.base_url = Some(format!("{}/v1", server.uri()));
    let provider = config
        .build(&|name: &str| (name == "OPENAI_API_KEY").then(|| "sk-test".to_string()))
        .unwrap();
    let sandbox =
        Arc::new(Sandbox::new(SandboxConfig::default(), ToolRegistry::new(), None).unwrap());
    AgentHarness::new(
        AgentIdentity {
            name: "tester".into(),
            tool_allowlist: vec![],
            tier: Default::default(),
            topic: "chaining".into(),
        },
        "You are a test agent.",
        HarnessConfig {
            agents_folder: dir.to_path_buf(),
            ..HarnessConfig::default()
        },
        provider,
        sandbox,
    )
}

async fn sent(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json().unwrap())
        .collect()
}

#[tokio::test]
async fn response_ids_chain_per_label_over_http() {
    let server = MockServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(&server, dir.path()).await;

    // 1: the primary context (None) starts a chain.
    h.run_bounded(PhaseRequest::new("first")).await;
    // 2: a named label never sees another label's id.
    h.run_bounded(PhaseRequest::new("second").with_context_label(Some("x")))
        .await;
    // 3: the same label carries its previous id forward.
    h.run_bounded(PhaseRequest::new("third")).await;
    // 4: and so does "x", with its own.
    h.run_bounded(PhaseRequest::new("fourth").with_context_label(Some("x")))
        .await;
    // 5: continue_context=false resets that label's chain only.
    let last = h
        .run_bounded(PhaseRequest::new("fifth").with_continue_context(false))
        .await;
    assert_eq!(last.stop_reason, StopReason::Done);
    assert_eq!(last.final_text, "answer 5");
    // 6: "x" still chains.
    h.run_bounded(PhaseRequest::new("sixth").with_context_label(Some("x")))
        .await;

    let bodies = sent(&server).await;
    let prev: Vec<Option<&str>> = bodies
        .iter()
        .map(|b| b.get("previous_response_id").and_then(Value::as_str))
        .collect();
    assert_eq!(
        prev,
        [
            None,
            None,
            Some("resp_1"),
            Some("resp_2"),
            None,
            Some("resp_4")
        ]
    );
    let keys: Vec<&str> = bodies
        .iter()
        .map(|b| b["prompt_cache_key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "tester:__default__",
            "tester:x",
            "tester:__default__",
            "tester:x",
            "tester:__default__",
            "tester:x"
        ]
    );
    // A chained call sends only what is new; the instructions every time.
    assert_eq!(
        bodies[2]["input"],
        json!([{"role": "user", "content": "third"}])
    );
    assert_eq!(bodies[2]["instructions"], "You are a test agent.");
    assert_eq!(
        bodies[4]["input"],
        json!([{"role": "user", "content": "fifth"}]),
        "after a reset the history is only the new message"
    );

    h.finish(RunOutcome::Completed).await;
    let s: RunSummary =
        serde_json::from_slice(&std::fs::read(h.run_dir().join("run_summary.json")).unwrap())
            .unwrap();
    assert_eq!(s.provider, "openai-responses");
    assert_eq!(s.model, "gpt-4o-mini");
    assert_eq!(
        s.context_tracking.per_label["__default__"]
            .response_id
            .as_deref(),
        Some("resp_5")
    );
    assert_eq!(
        s.context_tracking.per_label["x"].response_id.as_deref(),
        Some("resp_6")
    );
    assert_eq!(s.token_usage.tokens_used, 6 * 12);
}

#[tokio::test]
async fn a_stop_aborts_a_real_http_call_in_flight() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"id": "resp_late", "output": [], "usage": {}}))
                .set_delay(std::time::Duration::from_secs(60)),
        )
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = ProviderConfig::new(ProviderKind::OpenAiResponses, "gpt-4o-mini");
    config.base_url = Some(format!("{}/v1", server.uri()));
    let provider = config
        .build(&|name: &str| (name == "OPENAI_API_KEY").then(|| "sk-test".to_string()))
        .unwrap();
    let sandbox =
        Arc::new(Sandbox::new(SandboxConfig::default(), ToolRegistry::new(), None).unwrap());
    let stop = tokio_util::sync::CancellationToken::new();
    let mut h = AgentHarness::new(
        AgentIdentity {
            name: "tester".into(),
            tool_allowlist: vec![],
            tier: Default::default(),
            topic: String::new(),
        },
        "",
        HarnessConfig {
            agents_folder: dir.path().to_path_buf(),
            ..HarnessConfig::default()
        },
        provider,
        sandbox,
    )
    .with_stop_token(stop.clone());
    let watcher = async {
        while server.received_requests().await.unwrap().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        stop.cancel();
    };
    let (r, ()) = tokio::join!(h.run_bounded(PhaseRequest::new("x")), watcher);
    assert_eq!(r.stop_reason, StopReason::StopRequested);
    assert_eq!(h.usage().llm_calls, 0, "the call never completed");
    let text = std::fs::read_to_string(h.run_dir().join("transcript.jsonl")).unwrap();
    assert!(text.contains("\"where\":\"llm_call\""), "{text}");
}
