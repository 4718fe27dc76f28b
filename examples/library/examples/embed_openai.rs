//! The harness inside another program's `main`, on an OpenAI-compatible server.
//!
//! ```sh
//! # On a mock of Chat Completions this example starts on 127.0.0.1 (no network, no key):
//! cargo run -p lsm-examples --example embed_openai
//! # On a server of your own (Ollama here; `--api-key-env VAR` if it needs a key):
//! cargo run -p lsm-examples --example embed_openai -- \
//!     --base-url http://localhost:11434/v1 --model qwen2.5
//! ```
//!
//! One bounded run of up to six model calls that may read one file; the answer, the run's
//! token usage and the length of its transcript are printed.

#![allow(clippy::print_stdout)]

use std::sync::Arc;

use lsm_harness::{AgentHarness, HarnessConfig};
use lsm_phase::{AgentIdentity, StopReason};
use lsm_providers::{ProviderConfig, ProviderKind, process_env};
use lsm_sandbox::{Sandbox, SandboxConfig};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// What the mock answers.
const MOCK_ANSWER: &str = "The notes say that soil holds carbon.";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The server: the one given, or a mock kept alive until the end of `main`.
    let mock = match arg("--base-url") {
        Some(_) => None,
        None => Some(mock_chat_completions().await),
    };
    let base_url = arg("--base-url").or_else(|| mock.as_ref().map(|m| format!("{}/v1", m.uri())));
    let provider = ProviderConfig {
        base_url,
        api_key_env: arg("--api-key-env"),
        ..ProviderConfig::new(
            ProviderKind::Compatible,
            arg("--model").unwrap_or_else(|| "mock-model".into()),
        )
    }
    .build(&process_env)?; // the key, if any, is read from the environment only

    // A workspace with one file, and a sandbox that may read that folder and nothing else.
    let dir = tempfile::tempdir()?;
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace)?;
    std::fs::write(
        workspace.join("notes.md"),
        "# Notes\n\nSoil holds carbon.\n",
    )?;
    let policy = SandboxConfig {
        allowed_read_paths: vec![workspace.clone()],
        working_dir: Some(workspace),
        ..SandboxConfig::default()
    };
    let sandbox = Sandbox::new(policy, lsm_sandbox::builtin::registry(), None)?;

    // One run: who it is for, what it may call, its limits and where its records go.
    let identity = AgentIdentity {
        name: "embedded".into(),
        tool_allowlist: vec!["read_file".into()],
        tier: Default::default(),
        topic: String::new(),
    };
    let config = HarnessConfig {
        agents_folder: dir.path().join("Agents"),
        max_tokens_budget: 50_000,
        max_iterations: 6,
        ..HarnessConfig::default()
    };
    let prompt = "Answer in one sentence. Read files with read_file when you need them.";
    let mut harness = AgentHarness::new(identity, prompt, config, provider, Arc::new(sandbox));
    let report = harness.run("What do the notes in notes.md say?").await;

    let answer = report.result.final_text.trim();
    println!("answer: {answer}");
    let events = std::fs::read_to_string(&report.transcript_path)?
        .lines()
        .count();
    println!(
        "stop reason: {}, model calls: {}, tokens: {}, transcript events: {events}",
        report.result.stop_reason,
        report.summary.token_usage.iterations,
        report.summary.token_usage.tokens_used,
    );
    anyhow::ensure!(
        report.result.stop_reason == StopReason::Done && !answer.is_empty(),
        "the run ended without an answer ({})",
        report.result.stop_reason
    );
    if let Some(mock) = mock {
        let calls = mock.received_requests().await.map_or(0, |r| r.len());
        anyhow::ensure!(
            calls == 1 && answer == MOCK_ANSWER,
            "{calls} call(s): {answer:?}"
        );
    }
    Ok(())
}

/// The value after `name` on the command line.
fn arg(name: &str) -> Option<String> {
    std::env::args().skip_while(|a| a != name).nth(1)
}

/// A Chat Completions server on 127.0.0.1 that answers every call with [`MOCK_ANSWER`].
async fn mock_chat_completions() -> MockServer {
    let server = MockServer::start().await;
    let completion = serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "mock-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": MOCK_ANSWER}}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 9, "total_tokens": 51}
    });
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion))
        .mount(&server)
        .await;
    server
}
