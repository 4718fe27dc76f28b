//! The CPU of one model call's own work in each HTTP flavour: serializing the request body
//! from a run's history, and reading a tool-call answer. The history is that of an agent 200
//! `read_file` calls into its task (401 messages, ≈ 150 KB of JSON) with eight tools
//! offered, the shape `cargo xtask bench-peers` measures end to end. Also the strict-JSON
//! protocol's per-call work over the same history (for models without function calling):
//! the prompt estimate of the next call, which converts the history to the protocol first.
//! And the body of a short conversation whose last message is a new 20 KB tool result (a
//! file of prose read), which is serialized, not taken from the cache: what writing a large
//! text's JSON costs.
//! Run: `cargo bench -p lsm-providers --bench request`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use lsm_providers::{
    HttpProvider, LlmRequest, Message, Provider, ProviderConfig, ProviderKind, StrictJsonProvider,
    ToolCall, ToolDefinition,
};
use serde_json::json;

/// Iterations of the history.
const CALLS: usize = 200;

fn tools() -> Vec<std::sync::Arc<ToolDefinition>> {
    let names = [
        "read_file",
        "write_file",
        "edit_file",
        "append_file",
        "list_folder",
        "find_section",
        "query_context",
        "ask_user",
    ];
    names
        .iter()
        .map(|name| ToolDefinition {
            name: (*name).into(),
            description: format!("The {name} tool: what it does, for the model, in a sentence or two of plain text."),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, absolute or relative to the working directory."},
                    "content": {"type": "string", "description": "The complete new content of the file."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 500},
                },
                "required": ["path"],
                "additionalProperties": false,
            }),
        })
        .map(std::sync::Arc::new)
        .collect()
}

fn history() -> LlmRequest {
    let file = format!("File 3.\n{}\n", "Some notes of a small project. ".repeat(8));
    let mut messages = vec![
        Message::system("You are a careful agent. Use the tools to do the task, then answer."),
        Message::user(
            "Read the files the tool calls name, one after the other, then say how many you read.",
        ),
    ];
    for k in 0..CALLS {
        messages.push(Message::assistant(
            "",
            vec![ToolCall {
                id: format!("call_{k}"),
                name: "read_file".into(),
                arguments: json!({"path": format!("files/f{}.txt", k % 10)}),
            }],
        ));
        messages.push(Message::tool_result(format!("call_{k}"), file.clone()));
    }
    LlmRequest {
        messages: messages.into_iter().map(std::sync::Arc::new).collect(),
        tools: tools(),
        ..Default::default()
    }
}

/// A system prompt, the task, one `read_file` call; its result is added by the bench.
fn short_conversation() -> LlmRequest {
    let messages = vec![
        Message::system("You are a careful agent. Use the tools to do the task, then answer."),
        Message::user("Read notes.md, then say what it is about."),
        Message::assistant(
            "",
            vec![ToolCall {
                id: "call_0".into(),
                name: "read_file".into(),
                arguments: json!({"path": "notes.md"}),
            }],
        ),
    ];
    LlmRequest {
        messages: messages.into_iter().map(std::sync::Arc::new).collect(),
        tools: tools(),
        ..Default::default()
    }
}

/// About 20 KB of prose in lines of about 100 bytes: a file an agent reads.
fn prose_file() -> String {
    "Some notes of a small project, written as plain prose with the usual punctuation, line by line.\n"
        .repeat(205)
}

fn provider(kind: ProviderKind) -> HttpProvider {
    let mut config = ProviderConfig::new(kind, "mock-model");
    config.base_url = Some("http://127.0.0.1:9/v1".into());
    config
        .build_http(&|_| Some("sk-bench".into()))
        .expect("an HTTP provider")
}

/// A tool-call answer in each flavour's format.
fn answer(kind: ProviderKind) -> Vec<u8> {
    let args = json!({"path": "files/f4.txt"});
    let v = match kind {
        ProviderKind::OpenAi | ProviderKind::Compatible => json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "mock-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_200", "type": "function",
                    "function": {"name": "read_file", "arguments": args.to_string()}}]}}],
            "usage": {"prompt_tokens": 38_000, "completion_tokens": 12, "total_tokens": 38_012,
                      "prompt_tokens_details": {"cached_tokens": 37_000}},
        }),
        ProviderKind::OpenAiResponses => json!({
            "id": "resp_1", "object": "response", "status": "completed",
            "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_200",
                        "name": "read_file", "arguments": args.to_string()}],
            "usage": {"input_tokens": 38_000, "output_tokens": 12,
                      "input_tokens_details": {"cached_tokens": 37_000}},
        }),
        ProviderKind::Anthropic => json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "mock-model",
            "content": [{"type": "tool_use", "id": "toolu_200", "name": "read_file", "input": args}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 38_000, "output_tokens": 12, "cache_read_input_tokens": 37_000},
        }),
    };
    serde_json::to_vec(&v).unwrap()
}

fn request(c: &mut Criterion) {
    let request = history();
    for (name, kind) in [
        ("chat_completions", ProviderKind::Compatible),
        ("responses", ProviderKind::OpenAiResponses),
        ("anthropic", ProviderKind::Anthropic),
    ] {
        let p = provider(kind);
        let body = p.request_body(&request, false);
        let reply = answer(kind);
        let parsed = p.parse_response(&reply).unwrap();
        assert_eq!(parsed.tool_calls.len(), 1, "{name}");
        println!(
            "{name}: request body {} bytes for {} messages",
            body.len(),
            request.messages.len()
        );
        let mut group = c.benchmark_group(format!("model_call_{name}"));
        group.bench_function("request_body_200_calls", |b| {
            b.iter(|| p.request_body(&request, false))
        });
        group.bench_function("parse_tool_call_answer", |b| {
            b.iter(|| p.parse_response(&reply).unwrap())
        });
        let short = short_conversation();
        let file = prose_file();
        group.bench_function("request_body_new_20kb_result", |b| {
            b.iter_batched(
                || {
                    let mut r = short.clone();
                    let result = Message::tool_result("call_0", file.clone());
                    r.messages.push(std::sync::Arc::new(result));
                    r
                },
                |r| p.request_body(&r, false),
                BatchSize::SmallInput,
            )
        });
        group.finish();
    }
}

/// Two consecutive calls of a run under the strict-JSON protocol: the history of 200 calls,
/// and the same history (the same messages) with one call and its result more. Estimating
/// both, in turn, is what each call of a long run does (converted, then counted).
fn strict_json(c: &mut Criterion) {
    let before = history();
    let mut after = before.clone();
    let call = Message::assistant(
        "",
        vec![ToolCall {
            id: format!("call_{CALLS}"),
            name: "read_file".into(),
            arguments: json!({"path": "files/f0.txt"}),
        }],
    );
    after.messages.push(call.into());
    after
        .messages
        .push(Message::tool_result(format!("call_{CALLS}"), "File 0.\n").into());
    let p = StrictJsonProvider::new(provider(ProviderKind::Compatible));
    let mut group = c.benchmark_group("strict_json");
    group.bench_function("estimate_two_calls_200_calls", |b| {
        b.iter(|| p.estimate_prompt_tokens(&before) + p.estimate_prompt_tokens(&after))
    });
    group.finish();
}

criterion_group!(benches, request, strict_json);
criterion_main!(benches);
