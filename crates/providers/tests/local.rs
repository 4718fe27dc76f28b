//! The local provider against a real model (feature `local`).
//!
//! The model is the default one `cargo xtask fetch-model` caches (or the GGUF file named by
//! `LOCAL_MODEL_PATH`). When it is absent each test says so and passes, unless
//! `LOCAL_MODEL_REQUIRED=1` is set (as `.ci/run` does after fetching it): then a missing
//! model fails the test. The tests of the native tool-call format run against the model
//! named by `LOCAL_NATIVE_MODEL_PATH` (Qwen2.5, `cargo xtask fetch-model qwen25`; CI sets it),
//! under the same rule.
#![cfg(feature = "local")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use lsm_providers::{
    CallObserver, CallOptions, CollectingObserver, LlmRequest, LocalFinish, LocalProvider,
    LocalSettings, Message, Provider, ProviderError, ProviderEvent, ToolDefinition,
    default_local_model_path,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn model_path() -> Option<PathBuf> {
    let path = std::env::var_os("LOCAL_MODEL_PATH")
        .map(PathBuf::from)
        .or_else(default_local_model_path)?;
    if path.is_file() {
        return Some(path);
    }
    let required = std::env::var("LOCAL_MODEL_REQUIRED").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "LOCAL_MODEL_REQUIRED=1 but there is no model at {}: run `cargo xtask fetch-model`",
        path.display()
    );
    eprintln!(
        "SKIPPED: no local model at {} — run `cargo xtask fetch-model` to test the local provider against it",
        path.display()
    );
    None
}

fn provider(path: &std::path::Path) -> LocalProvider {
    LocalProvider::load(
        path,
        LocalSettings {
            context_size: Some(4096),
            ..LocalSettings::default()
        },
    )
    .expect("the model loads")
}

fn tools() -> Vec<std::sync::Arc<ToolDefinition>> {
    vec![
        ToolDefinition {
            name: "read_file".into(),
            description: "Read a text file.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file to read."},
                    "max_bytes": {"type": "integer", "minimum": 1, "format": "uint64"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
        .into(),
        ToolDefinition {
            name: "write_file".into(),
            description: "Write text to a file, replacing it.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
        .into(),
        ToolDefinition {
            name: "find_file".into(),
            description: "Find files by name or content.".into(),
            parameters: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "mode": {"$ref": "#/$defs/Mode"},
                    "extensions": {"type": "array", "items": {"type": "string"}, "maxItems": 4}
                },
                "required": ["query", "mode"],
                "$defs": {"Mode": {"type": "string", "enum": ["name", "content"]}}
            }),
        }
        .into(),
        ToolDefinition {
            name: "block".into(),
            description: "Call this when you cannot proceed at all. Give the reason.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"reason": {"type": "string"}},
                "required": ["reason"],
                "additionalProperties": false
            }),
        }
        .into(),
    ]
}

const TASKS: [&str; 20] = [
    "Read the file notes.md.",
    "Summarize notes.md into summary.md.",
    "Find every markdown file that mentions budgets.",
    "Write 'hello' into hello.txt.",
    "What is 2 + 2? Answer directly.",
    "Find the file named config.toml.",
    "Read the first 100 bytes of README.md.",
    "Create todo.md listing three chores.",
    "Say hello and finish.",
    "Find files whose content mentions 'sandbox'.",
    "Read docs/ARCHITECTURE.md and tell me what it is about.",
    "Copy the text 'done' into status.txt.",
    "You cannot access the internet. Fetch https://example.com.",
    "List the files that contain the word TODO.",
    "Read the file data.csv.",
    "Write a haiku about rust into poem.txt.",
    "Which file defines the sandbox? Search by content.",
    "Thank you, that is all.",
    "Read notes.md and then write its first line into first.txt.",
    "Find all .rs files by name.",
];

fn request(task: &str, max_output_tokens: u64) -> LlmRequest {
    LlmRequest {
        messages: vec![
            Message::system("You are a careful assistant working on files in a small project.")
                .into(),
            Message::user(task).into(),
        ],
        tools: tools(),
        options: CallOptions {
            max_output_tokens: Some(max_output_tokens),
            ..CallOptions::default()
        },
    }
}

/// The raw answer text, from the streamed pieces.
fn raw_text(observer: &CollectingObserver) -> String {
    observer
        .events()
        .into_iter()
        .filter_map(|e| match e {
            ProviderEvent::TextDelta { text } => Some(text),
            _ => None,
        })
        .collect()
}

/// Fails unless `raw` is one strict-JSON decision over `tools`: exactly `response`,
/// `action` and `action_arguments`, the action an offered tool (arguments valid for its own
/// schema) or DONE.
fn assert_valid_decision(raw: &str, tools: &[std::sync::Arc<ToolDefinition>]) -> (String, Value) {
    let value: Value =
        serde_json::from_str(raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"));
    let obj = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {raw}"));
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["action", "action_arguments", "response"], "{raw}");
    assert!(obj["response"].is_string(), "{raw}");
    let action = obj["action"].as_str().unwrap_or_else(|| panic!("{raw}"));
    let args = obj["action_arguments"].clone();
    if action == "DONE" {
        assert_eq!(args, json!({}), "{raw}");
    } else {
        let tool = tools
            .iter()
            .find(|t| t.name == action)
            .unwrap_or_else(|| panic!("action {action} is not an offered tool: {raw}"));
        let validator = jsonschema::validator_for(&tool.parameters).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&args)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{action} arguments {args} invalid: {errors:?}"
        );
    }
    (action.to_string(), args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_constrained_generations_are_valid_decisions_with_usage() {
    let Some(path) = model_path() else { return };
    let p = provider(&path);
    let tools = tools();
    let mut actions = Vec::new();
    for (i, task) in TASKS.iter().enumerate() {
        let req = request(task, 768);
        let observer = CollectingObserver::default();
        let estimate = p.estimate_prompt_tokens(&req);
        let r = p.complete_observed(&req, &observer).await.unwrap();
        let raw = raw_text(&observer);
        let stats = p.last_call_stats().unwrap();
        assert_eq!(
            stats.finish,
            LocalFinish::Done,
            "call {i} ({task}) ended early: {raw}"
        );
        let (action, args) = assert_valid_decision(&raw, &tools);
        // The parsed response is the same decision.
        if action == "DONE" {
            assert!(r.tool_calls.is_empty(), "{raw}");
        } else {
            assert_eq!(r.tool_calls.len(), 1, "{raw}");
            assert_eq!(r.tool_calls[0].name, action);
            assert_eq!(r.tool_calls[0].arguments, args);
        }
        assert!(
            r.usage.input_tokens > 0 && r.usage.output_tokens > 0,
            "{:?}",
            r.usage
        );
        assert_eq!(r.usage.input_tokens, stats.prompt_tokens);
        assert_eq!(r.usage.output_tokens, stats.generated_tokens);
        assert_eq!(
            estimate, r.usage.input_tokens,
            "the estimate uses the model's tokenizer"
        );
        eprintln!(
            "[{i:2}] {action:<10} {task} | prompt {} (cached {}, {:.0} tok/s) + {} generated ({:.0} tok/s): {raw}",
            stats.prompt_tokens,
            stats.cached_prompt_tokens,
            stats.prompt_tokens_per_second(),
            stats.generated_tokens,
            stats.generation_tokens_per_second()
        );
        actions.push(action);
    }
    assert_eq!(actions.len(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_output_tokens_is_honoured() {
    let Some(path) = model_path() else { return };
    let p = provider(&path);
    let r = p.complete(&request(TASKS[1], 5)).await.unwrap();
    assert_eq!(r.usage.output_tokens, 5);
    assert_eq!(p.last_call_stats().unwrap().finish, LocalFinish::MaxTokens);
    assert!(r.tool_calls.is_empty(), "a cut answer is no tool call");
}

/// Cancels `token` when the first piece of text arrives.
struct StopOnFirstPiece {
    token: CancellationToken,
    pieces: AtomicUsize,
}

impl CallObserver for StopOnFirstPiece {
    fn on_event(&self, event: ProviderEvent) {
        if matches!(event, ProviderEvent::TextDelta { .. }) {
            self.pieces.fetch_add(1, Ordering::SeqCst);
            self.token.cancel();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_request_interrupts_generation() {
    let Some(path) = model_path() else { return };
    let p = provider(&path);
    let observer = StopOnFirstPiece {
        token: CancellationToken::new(),
        pieces: AtomicUsize::new(0),
    };
    let req = request(
        "Write a very long story of at least two thousand words about a lighthouse into story.txt.",
        2000,
    );
    tokio::select! {
        biased;
        () = observer.token.cancelled() => {}
        r = p.complete_observed(&req, &observer) => panic!("the call finished before the stop: {r:?}"),
    }
    p.wait_idle().await;
    let stats = p.last_call_stats().unwrap();
    assert_eq!(stats.finish, LocalFinish::Cancelled, "{stats:?}");
    assert!(
        stats.generated_tokens <= 4,
        "generation stopped within a few tokens of the stop, not at the end: {stats:?}"
    );
    assert_eq!(observer.pieces.load(Ordering::SeqCst), 1);

    // The provider is still usable.
    let r = p
        .complete(&request("Say hello and finish.", 256))
        .await
        .unwrap();
    assert!(r.usage.output_tokens > 0);
}

fn plain_request(prompt: &str, max_output_tokens: u64) -> LlmRequest {
    LlmRequest {
        messages: vec![
            Message::system("You are a helpful assistant.").into(),
            Message::user(prompt).into(),
        ],
        tools: Vec::new(),
        options: CallOptions {
            max_output_tokens: Some(max_output_tokens),
            ..CallOptions::default()
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toolless_generation_is_plain_text_and_stops_on_repetition() {
    let Some(path) = model_path() else { return };
    let p = provider(&path);
    // Without tools: no protocol, no decision object, the text as generated.
    let r = p
        .complete(&plain_request("What is the capital of France?", 64))
        .await
        .unwrap();
    let stats = p.last_call_stats().unwrap();
    eprintln!("plain answer ({:?}): {:?}", stats.finish, r.text);
    assert!(r.tool_calls.is_empty());
    assert!(!r.text.trim().is_empty());
    assert!(
        !r.text.trim_start().starts_with('{') && !r.text.contains("\"action\""),
        "plain text, not a decision: {:?}",
        r.text
    );
    assert_eq!(r.usage.output_tokens, stats.generated_tokens);

    // A request that makes the model repeat itself ends at the first repetition, long
    // before the token limit, and the repetition is cut off. The repetition penalty is
    // turned off here so that the model does loop: what is tested is the stop.
    let p = LocalProvider::load(
        &path,
        LocalSettings {
            context_size: Some(4096),
            text_repeat_penalty: 1.0,
            ..LocalSettings::default()
        },
    )
    .unwrap();
    let limit = 400;
    let r = p
        .complete(&plain_request(
            "Write a very long story about a cat named Tom who eats fish every day.",
            limit,
        ))
        .await
        .unwrap();
    let stats = p.last_call_stats().unwrap();
    eprintln!(
        "repetitive answer ({:?}, {} tokens): {:?}",
        stats.finish, stats.generated_tokens, r.text
    );
    assert_eq!(stats.finish, LocalFinish::Repetition, "{:?}", r.text);
    assert!(stats.generated_tokens < limit, "{stats:?}");
    // No run of twelve words (at least twelve tokens) comes twice in what is kept.
    let words: Vec<&str> = r.text.split_whitespace().collect();
    let normalized = words.join(" ");
    for w in words.windows(12) {
        let joined = w.join(" ");
        assert_eq!(
            normalized.matches(&joined).count(),
            1,
            "a run of twelve words repeats in the kept text: {:?}",
            r.text
        );
    }
}

/// The model that calls tools in its own format, when one is named.
fn native_model_path() -> Option<PathBuf> {
    let required = std::env::var("LOCAL_MODEL_REQUIRED").is_ok_and(|v| v == "1");
    match std::env::var_os("LOCAL_NATIVE_MODEL_PATH").map(PathBuf::from) {
        Some(path) if path.is_file() => Some(path),
        other => {
            assert!(
                !required,
                "LOCAL_MODEL_REQUIRED=1 but LOCAL_NATIVE_MODEL_PATH names no model ({other:?}): \
                 run `cargo xtask fetch-model qwen25` and set it to the printed path"
            );
            eprintln!("SKIPPED: LOCAL_NATIVE_MODEL_PATH names no model file");
            None
        }
    }
}

/// Tasks whose first step is a tool call, and one that asks for no tool.
const NATIVE_TASKS: [&str; 4] = [
    "Read the file notes.md.",
    "Write 'hello' into hello.txt.",
    "Find the file named config.toml.",
    "What is 2 + 2? Answer directly, without any tool.",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_model_answers_with_valid_calls_of_offered_tools_or_prose() {
    let Some(path) = native_model_path() else {
        return;
    };
    let p = provider(&path);
    let offered = tools();
    let mut calls = 0;
    for task in NATIVE_TASKS {
        let req = request(task, 256);
        let observer = CollectingObserver::default();
        let estimate = p.estimate_prompt_tokens(&req);
        let r = p.complete_observed(&req, &observer).await.unwrap();
        let raw = raw_text(&observer);
        let stats = p.last_call_stats().unwrap();
        eprintln!("{task} -> {raw:?} ({:?})", stats.finish);
        assert_eq!(stats.finish, LocalFinish::Done, "{task}: {raw}");
        assert_eq!(estimate, r.usage.input_tokens, "the estimate is the prompt");
        assert!(
            !raw.contains("\"action\""),
            "the native format, not the strict-JSON protocol: {raw}"
        );
        match r.tool_calls.as_slice() {
            [] => assert!(!r.text.trim().is_empty(), "{task}: an empty answer"),
            [call] => {
                calls += 1;
                let tool = offered
                    .iter()
                    .find(|t| t.name == call.name)
                    .unwrap_or_else(|| panic!("{} is not an offered tool: {raw}", call.name));
                assert_ne!(tool.name, "block", "control tools are not offered: {raw}");
                let validator = jsonschema::validator_for(&tool.parameters).unwrap();
                assert!(
                    validator.is_valid(&call.arguments),
                    "{} arguments {} invalid: {raw}",
                    call.name,
                    call.arguments
                );
            }
            more => panic!("one call at most per answer: {more:?}"),
        }
    }
    assert!(calls >= 1, "no task was answered with a tool call");
}

#[test]
fn a_missing_model_file_is_a_clear_error() {
    let e = LocalProvider::load(
        std::path::Path::new("/nonexistent/model.gguf"),
        LocalSettings::default(),
    )
    .unwrap_err();
    assert!(matches!(e, ProviderError::ModelFile { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("/nonexistent/model.gguf") && text.contains("no such file"),
        "{text}"
    );
}

#[test]
fn a_file_that_is_not_a_model_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("not-a-model.gguf");
    std::fs::write(&f, b"this is not a GGUF file").unwrap();
    let e = LocalProvider::load(&f, LocalSettings::default()).unwrap_err();
    assert!(matches!(e, ProviderError::ModelFile { .. }), "{e:?}");
    assert!(e.to_string().contains("cannot load"), "{e}");
}
