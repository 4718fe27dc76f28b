//! One conformance suite run against every HTTP client (OpenAI Chat Completions, an
//! OpenAI-compatible server, OpenAI Responses, Anthropic Messages), each against a real HTTP
//! server on 127.0.0.1 (wiremock). No test reaches the internet.

// Helpers outside #[test] functions may fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lsm_providers::{
    CallOptions, CollectingObserver, HttpProvider, HttpSettings, LlmRequest, LlmResponse, Message,
    Pricing, Provider, ProviderConfig, ProviderError, ProviderEvent, ProviderKind, ToolCall,
    ToolDefinition, Usage,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

// ---------- the flavours ----------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Flavour {
    Chat,
    Compatible,
    Responses,
    Anthropic,
}

const ALL: [Flavour; 4] = [
    Flavour::Chat,
    Flavour::Compatible,
    Flavour::Responses,
    Flavour::Anthropic,
];

/// One logical answer, rendered per flavour as JSON or as an SSE stream.
#[derive(Clone)]
struct Answer {
    id: &'static str,
    text: &'static str,
    calls: Vec<(&'static str, &'static str, Value)>,
    input: u64,
    output: u64,
    cached: u64,
}

impl Answer {
    fn text(text: &'static str) -> Self {
        Answer {
            id: "resp_1",
            text,
            calls: vec![],
            input: 120,
            output: 30,
            cached: 100,
        }
    }
    fn tools(calls: Vec<(&'static str, &'static str, Value)>) -> Self {
        Answer {
            id: "resp_1",
            text: "",
            calls,
            input: 120,
            output: 30,
            cached: 100,
        }
    }
    fn with_id(mut self, id: &'static str) -> Self {
        self.id = id;
        self
    }
}

impl Flavour {
    fn kind(self) -> ProviderKind {
        match self {
            Flavour::Chat => ProviderKind::OpenAi,
            Flavour::Compatible => ProviderKind::Compatible,
            Flavour::Responses => ProviderKind::OpenAiResponses,
            Flavour::Anthropic => ProviderKind::Anthropic,
        }
    }

    fn name(self) -> &'static str {
        self.kind().as_str()
    }

    fn path(self) -> &'static str {
        match self {
            Flavour::Chat | Flavour::Compatible => "/v1/chat/completions",
            Flavour::Responses => "/v1/responses",
            Flavour::Anthropic => "/v1/messages",
        }
    }

    fn model(self) -> &'static str {
        match self {
            Flavour::Chat | Flavour::Responses => "gpt-4o-mini",
            Flavour::Compatible => "llama3.2",
            Flavour::Anthropic => "claude-sonnet-4-5",
        }
    }

    fn key_env(self) -> &'static str {
        match self {
            Flavour::Anthropic => "ANTHROPIC_API_KEY",
            _ => "OPENAI_API_KEY",
        }
    }

    /// The answer as a non-streamed JSON body.
    fn json(self, a: &Answer) -> Value {
        match self {
            Flavour::Chat | Flavour::Compatible => {
                let calls: Vec<Value> = a
                    .calls
                    .iter()
                    .map(|(id, name, args)| {
                        json!({"id": id, "type": "function",
                               "function": {"name": name, "arguments": args.to_string()}})
                    })
                    .collect();
                let mut message = json!({"role": "assistant",
                    "content": if a.text.is_empty() { Value::Null } else { json!(a.text) }});
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                json!({"id": a.id, "object": "chat.completion", "model": self.model(),
                       "choices": [{"index": 0, "message": message,
                                    "finish_reason": if a.calls.is_empty() { "stop" } else { "tool_calls" }}],
                       "usage": {"prompt_tokens": a.input, "completion_tokens": a.output,
                                 "total_tokens": a.input + a.output,
                                 "prompt_tokens_details": {"cached_tokens": a.cached}}})
            }
            Flavour::Responses => {
                let mut output = vec![];
                if !a.text.is_empty() {
                    output.push(
                        json!({"type": "message", "id": "msg_1", "role": "assistant",
                        "content": [{"type": "output_text", "text": a.text, "annotations": []}]}),
                    );
                }
                for (i, (id, name, args)) in a.calls.iter().enumerate() {
                    output.push(json!({"type": "function_call", "id": format!("fc_{i}"),
                        "call_id": id, "name": name, "arguments": args.to_string(),
                        "status": "completed"}));
                }
                json!({"id": a.id, "object": "response", "status": "completed",
                       "model": self.model(), "output": output,
                       "usage": {"input_tokens": a.input, "output_tokens": a.output,
                                 "total_tokens": a.input + a.output,
                                 "input_tokens_details": {"cached_tokens": a.cached}}})
            }
            Flavour::Anthropic => {
                let mut content = vec![];
                if !a.text.is_empty() {
                    content.push(json!({"type": "text", "text": a.text}));
                }
                for (id, name, args) in &a.calls {
                    content
                        .push(json!({"type": "tool_use", "id": id, "name": name, "input": args}));
                }
                json!({"id": a.id, "type": "message", "role": "assistant", "model": self.model(),
                       "content": content,
                       "stop_reason": if a.calls.is_empty() { "end_turn" } else { "tool_use" },
                       "usage": {"input_tokens": a.input - a.cached, "output_tokens": a.output,
                                 "cache_read_input_tokens": a.cached,
                                 "cache_creation_input_tokens": 0}})
            }
        }
    }

    /// The same answer as an SSE stream, text and arguments split into pieces.
    fn sse(self, a: &Answer) -> String {
        let halves = |s: &str| {
            let mid = s.len() / 2;
            (s[..mid].to_string(), s[mid..].to_string())
        };
        let (t1, t2) = halves(a.text);
        let mut out = String::new();
        let mut data = |event: Option<&str>, v: Value| {
            if let Some(e) = event {
                out.push_str(&format!("event: {e}\n"));
            }
            out.push_str(&format!("data: {v}\n\n"));
        };
        match self {
            Flavour::Chat | Flavour::Compatible => {
                let chunk = |delta: Value| {
                    json!({"id": a.id, "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
                };
                data(None, chunk(json!({"role": "assistant", "content": ""})));
                if !a.text.is_empty() {
                    data(None, chunk(json!({"content": t1})));
                    data(None, chunk(json!({"content": t2})));
                }
                for (i, (id, name, args)) in a.calls.iter().enumerate() {
                    data(
                        None,
                        chunk(
                            json!({"tool_calls": [{"index": i, "id": id, "type": "function",
                                                        "function": {"name": name, "arguments": ""}}]}),
                        ),
                    );
                    let (a1, a2) = halves(&args.to_string());
                    for piece in [a1, a2] {
                        data(
                            None,
                            chunk(
                                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                            ),
                        );
                    }
                }
                data(
                    None,
                    json!({"id": a.id, "object": "chat.completion.chunk", "choices": [],
                           "usage": {"prompt_tokens": a.input, "completion_tokens": a.output,
                                     "prompt_tokens_details": {"cached_tokens": a.cached}}}),
                );
                out.push_str("data: [DONE]\n\n");
            }
            Flavour::Responses => {
                data(
                    Some("response.created"),
                    json!({"type": "response.created", "response": {"id": a.id, "status": "in_progress", "output": []}}),
                );
                if !a.text.is_empty() {
                    for piece in [t1, t2] {
                        data(
                            Some("response.output_text.delta"),
                            json!({"type": "response.output_text.delta", "output_index": 0, "delta": piece}),
                        );
                    }
                }
                for (i, (id, name, args)) in a.calls.iter().enumerate() {
                    data(
                        Some("response.output_item.added"),
                        json!({"type": "response.output_item.added", "output_index": i + 1,
                               "item": {"type": "function_call", "call_id": id, "name": name, "arguments": ""}}),
                    );
                    data(
                        Some("response.function_call_arguments.delta"),
                        json!({"type": "response.function_call_arguments.delta", "output_index": i + 1,
                               "delta": args.to_string()}),
                    );
                }
                data(
                    Some("response.completed"),
                    json!({"type": "response.completed", "response": self.json(a)}),
                );
            }
            Flavour::Anthropic => {
                data(
                    Some("message_start"),
                    json!({"type": "message_start", "message": {"id": a.id, "type": "message",
                           "role": "assistant", "content": [],
                           "usage": {"input_tokens": a.input - a.cached, "output_tokens": 1,
                                     "cache_read_input_tokens": a.cached,
                                     "cache_creation_input_tokens": 0}}}),
                );
                let mut index = 0;
                if !a.text.is_empty() {
                    data(
                        Some("content_block_start"),
                        json!({"type": "content_block_start", "index": index,
                               "content_block": {"type": "text", "text": ""}}),
                    );
                    for piece in [t1, t2] {
                        data(
                            Some("content_block_delta"),
                            json!({"type": "content_block_delta", "index": index,
                                   "delta": {"type": "text_delta", "text": piece}}),
                        );
                    }
                    data(
                        Some("content_block_stop"),
                        json!({"type": "content_block_stop", "index": index}),
                    );
                    index += 1;
                }
                for (id, name, args) in &a.calls {
                    data(
                        Some("content_block_start"),
                        json!({"type": "content_block_start", "index": index,
                               "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
                    );
                    let (a1, a2) = halves(&args.to_string());
                    for piece in [a1, a2] {
                        data(
                            Some("content_block_delta"),
                            json!({"type": "content_block_delta", "index": index,
                                   "delta": {"type": "input_json_delta", "partial_json": piece}}),
                        );
                    }
                    data(
                        Some("content_block_stop"),
                        json!({"type": "content_block_stop", "index": index}),
                    );
                    index += 1;
                }
                data(Some("ping"), json!({"type": "ping"}));
                data(
                    Some("message_delta"),
                    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": a.output}}),
                );
                data(Some("message_stop"), json!({"type": "message_stop"}));
            }
        }
        out
    }
}

// ---------- fixtures ----------

fn fast_settings() -> HttpSettings {
    HttpSettings {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        max_retries: 3,
        retry_base_delay: Duration::from_millis(2),
        retry_max_delay: Duration::from_millis(500),
        direct: true,
    }
}

fn config(f: Flavour, server: &MockServer) -> ProviderConfig {
    let mut c = ProviderConfig::new(f.kind(), f.model());
    c.base_url = Some(format!("{}/v1", server.uri()));
    c.http = fast_settings();
    c
}

fn env_with_keys(name: &str) -> Option<String> {
    match name {
        "OPENAI_API_KEY" => Some("sk-test-openai".into()),
        "ANTHROPIC_API_KEY" => Some("sk-ant-test".into()),
        _ => None,
    }
}

/// Both ways a call can travel to a plain `http://` server: hyper's connection directly
/// (`true`, what a local server gets) and reqwest (`false`, what TLS and proxies get). The
/// cases that depend on the transport (headers, streaming, errors, timeouts, cancellation)
/// run over each.
const TRANSPORTS: [bool; 2] = [true, false];

/// Every flavour over every transport.
fn each_flavour_and_transport() -> impl Iterator<Item = (Flavour, bool)> {
    ALL.into_iter().flat_map(|f| TRANSPORTS.map(|d| (f, d)))
}

/// `c` with calls sent over the direct connection or through reqwest.
fn over(mut c: ProviderConfig, direct: bool) -> ProviderConfig {
    c.http.direct = direct;
    c
}

fn build(c: &ProviderConfig) -> HttpProvider {
    let p = c.build_http(&env_with_keys).unwrap();
    assert_eq!(
        p.transport(),
        if c.http.direct { "direct" } else { "reqwest" }
    );
    p
}

fn provider(f: Flavour, server: &MockServer) -> HttpProvider {
    build(&config(f, server))
}

/// The error of a simple call to `server` over the direct connection or reqwest, which must
/// fail.
async fn failed_call(f: Flavour, server: &MockServer, direct: bool) -> ProviderError {
    build(&over(config(f, server), direct))
        .complete(&simple_request())
        .await
        .unwrap_err()
}

async fn answer_with(server: &MockServer, f: Flavour, template: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(f.path()))
        .respond_with(template)
        .mount(server)
        .await;
}

async fn answer_json(server: &MockServer, f: Flavour, a: &Answer) {
    answer_with(
        server,
        f,
        ResponseTemplate::new(200).set_body_json(f.json(a)),
    )
    .await;
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json::<Value>().unwrap())
        .collect()
}

fn tools() -> Vec<std::sync::Arc<ToolDefinition>> {
    vec![
        std::sync::Arc::new(ToolDefinition {
            name: "read_file".into(),
            description: "Read a text file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}},
                               "required": ["path"], "additionalProperties": false}),
        }),
        std::sync::Arc::new(ToolDefinition {
            name: "write_file".into(),
            description: "Write a text file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"},
                               "content": {"type": "string"}}, "required": ["path", "content"]}),
        }),
    ]
}

/// A conversation after one round of two parallel tool calls.
fn round_trip_request() -> LlmRequest {
    LlmRequest {
        messages: vec![
            Message::system("You are a test agent."),
            Message::user("Summarize notes.md into summary.md."),
            Message::assistant(
                "Reading both.",
                vec![
                    ToolCall {
                        id: "call_a".into(),
                        name: "read_file".into(),
                        arguments: json!({"path": "notes.md"}),
                    },
                    ToolCall {
                        id: "call_b".into(),
                        name: "read_file".into(),
                        arguments: json!({"path": "todo.md"}),
                    },
                ],
            ),
            Message::tool_result("call_a", "hello notes"),
            Message::tool_result("call_b", "Error: no such file"),
        ]
        .into_iter()
        .map(Arc::new)
        .collect(),
        tools: tools(),
        options: CallOptions {
            max_output_tokens: Some(1000),
            previous_response_id: Some("resp_prev".into()),
            prompt_cache_key: Some("general:__default__".into()),
            prompt_cache_retention: None,
        },
    }
}

fn simple_request() -> LlmRequest {
    LlmRequest {
        messages: vec![Message::system("sys").into(), Message::user("hi").into()],
        tools: tools(),
        options: CallOptions {
            max_output_tokens: Some(100),
            ..Default::default()
        },
    }
}

// ---------- request bodies ----------

#[tokio::test]
async fn request_bodies_match_the_snapshots() {
    for (f, direct) in each_flavour_and_transport() {
        let server = MockServer::start().await;
        answer_json(&server, f, &Answer::text("ok")).await;
        let p = build(&over(config(f, &server), direct));
        p.complete(&round_trip_request()).await.unwrap();
        let sent = server.received_requests().await.unwrap();
        assert_eq!(sent.len(), 1);
        let header = |name: &str| {
            sent[0]
                .headers
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
        };
        let host = server.uri().trim_start_matches("http://").to_string();
        assert_eq!(
            header("host").as_deref(),
            Some(host.as_str()),
            "{f:?} {direct}"
        );
        assert_eq!(
            header("content-type").as_deref(),
            Some("application/json"),
            "{f:?} {direct}"
        );
        assert_eq!(
            header("content-length"),
            Some(sent[0].body.len().to_string()),
            "{f:?} {direct}"
        );
        assert!(
            header("user-agent").is_some_and(|a| a.starts_with("lsm/")),
            "{f:?} {direct}"
        );
        let auth = match f {
            Flavour::Anthropic => sent[0].headers.get("x-api-key"),
            _ => sent[0].headers.get("authorization"),
        };
        let expected_auth = match f {
            Flavour::Anthropic => "sk-ant-test",
            _ => "Bearer sk-test-openai",
        };
        // compatible has no default key variable: it sends none.
        if f == Flavour::Compatible {
            assert!(auth.is_none());
        } else {
            assert_eq!(auth.unwrap().to_str().unwrap(), expected_auth, "{f:?}");
        }
        if f == Flavour::Anthropic {
            assert_eq!(
                sent[0].headers.get("anthropic-version").unwrap(),
                "2023-06-01"
            );
        }
        insta::assert_json_snapshot!(
            format!("request_{}", f.name()),
            keys_sorted(sent[0].body_json::<Value>().unwrap())
        );
    }
}

/// `value` with every object's keys in sorted order, so a snapshot reads the same whether
/// `serde_json` keeps keys sorted or, with its `preserve_order` feature (which the `local`
/// feature's llguidance turns on), in the order they came.
fn keys_sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, keys_sorted(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(keys_sorted).collect()),
        other => other,
    }
}

#[test]
fn a_body_built_again_from_the_cache_is_byte_equal_to_a_fresh_one() {
    for f in ALL {
        let mut c = ProviderConfig::new(f.kind(), f.model());
        c.base_url = Some("http://127.0.0.1:9/v1".into());
        let warm = build(&c);
        let request = round_trip_request();
        let first = warm.request_body(&request, false);
        let again = warm.request_body(&request, false);
        assert_eq!(first, again, "{f:?}: second build from cached fragments");
        // A longer request sharing the same messages: the cached ones are reused, the new
        // one made, and the whole equals what a provider that never saw any of them sends.
        let mut longer = request.clone();
        longer.messages.push(Message::user("and one more").into());
        let cached = warm.request_body(&longer, false);
        let fresh = build(&c).request_body(&longer, false);
        assert_eq!(cached, fresh, "{f:?}: cached fragments against fresh ones");
        assert_ne!(cached, first, "{f:?}: the new message is sent");
    }
}

/// A conversation over several calls — results added, one message edited in the middle, the
/// history compacted, an option changed — sends at each call exactly the body that call's
/// request makes on its own (each provider builds on the body it sent last; nothing of an
/// earlier body may leak into a later one).
#[tokio::test]
async fn each_call_of_a_changing_conversation_sends_the_body_of_its_own_request() {
    for f in ALL {
        for stream in [false, true] {
            let server = MockServer::start().await;
            if stream {
                answer_with(
                    &server,
                    f,
                    ResponseTemplate::new(200)
                        .insert_header("content-type", "text/event-stream")
                        .set_body_string(f.sse(&Answer::text("ok"))),
                )
                .await;
            } else {
                answer_json(&server, f, &Answer::text("ok")).await;
            }
            let mut c = config(f, &server);
            c.stream = stream;
            let p = build(&c);
            let mut request = round_trip_request();
            let mut expected = Vec::new();
            for step in 0..7 {
                match step {
                    0 => {}
                    1 | 2 | 5 => {
                        let n = request.messages.len();
                        request.messages.push(Arc::new(Message::assistant(
                            "",
                            vec![ToolCall {
                                id: format!("call_{n}"),
                                name: "read_file".into(),
                                arguments: json!({"path": format!("f{n}.md")}),
                            }],
                        )));
                        request
                            .messages
                            .push(Arc::new(Message::tool_result(format!("call_{n}"), "text")));
                    }
                    3 => request.messages[3] = Arc::new(Message::tool_result("call_a", "edited")),
                    4 => {
                        let last = request.messages.split_off(request.messages.len() - 2);
                        request.messages = vec![
                            Arc::new(Message::system("You are a test agent.")),
                            Arc::new(Message::user("Summary of the work so far.")),
                        ];
                        request.messages.extend(last);
                    }
                    _ => request.options.max_output_tokens = Some(77),
                }
                expected.push(p.request_body(&request, true));
                p.complete(&request).await.unwrap();
            }
            let sent: Vec<Vec<u8>> = server
                .received_requests()
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.body)
                .collect();
            assert_eq!(sent.len(), expected.len(), "{f:?}");
            for (i, (sent, expected)) in sent.iter().zip(&expected).enumerate() {
                assert_eq!(
                    String::from_utf8_lossy(sent),
                    String::from_utf8_lossy(expected),
                    "{f:?}, stream {stream}, call {i}"
                );
            }
        }
    }
}

#[tokio::test]
async fn tool_results_go_back_with_their_call_ids() {
    for f in ALL {
        let server = MockServer::start().await;
        answer_json(&server, f, &Answer::text("ok")).await;
        provider(f, &server)
            .complete(&round_trip_request())
            .await
            .unwrap();
        let body = bodies(&server).await.remove(0);
        match f {
            Flavour::Chat | Flavour::Compatible => {
                let m = body["messages"].as_array().unwrap();
                assert_eq!(m[2]["tool_calls"][1]["id"], "call_b");
                assert_eq!(
                    m[2]["tool_calls"][0]["function"]["arguments"],
                    json!({"path": "notes.md"}).to_string(),
                    "arguments go back as a JSON string"
                );
                assert_eq!(
                    m[3],
                    json!({"role": "tool", "tool_call_id": "call_a", "content": "hello notes"})
                );
                assert_eq!(m[4]["tool_call_id"], "call_b");
            }
            Flavour::Responses => {
                // Chained: only what followed the previous response is sent.
                assert_eq!(body["previous_response_id"], "resp_prev");
                assert_eq!(
                    body["input"],
                    json!([
                        {"type": "function_call_output", "call_id": "call_a", "output": "hello notes"},
                        {"type": "function_call_output", "call_id": "call_b", "output": "Error: no such file"},
                    ])
                );
            }
            Flavour::Anthropic => {
                let m = body["messages"].as_array().unwrap();
                assert_eq!(
                    m.len(),
                    3,
                    "user, assistant, one user turn with both results"
                );
                assert_eq!(m[1]["content"][1]["type"], "tool_use");
                assert_eq!(m[1]["content"][2]["id"], "call_b");
                assert_eq!(m[2]["role"], "user");
                assert_eq!(m[2]["content"][0]["tool_use_id"], "call_a");
                assert_eq!(m[2]["content"][1]["tool_use_id"], "call_b");
            }
        }
    }
}

#[tokio::test]
async fn prompt_cache_key_is_the_agent_and_label() {
    for f in [Flavour::Chat, Flavour::Responses] {
        let server = MockServer::start().await;
        answer_json(&server, f, &Answer::text("ok")).await;
        let mut c = config(f, &server);
        c.prompt_cache_retention = Some("24h".into());
        build(&c).complete(&round_trip_request()).await.unwrap();
        let body = bodies(&server).await.remove(0);
        assert_eq!(body["prompt_cache_key"], "general:__default__", "{f:?}");
        assert_eq!(body["prompt_cache_retention"], "24h", "{f:?}");
    }
    // A compatible server gets no OpenAI-only options; Anthropic caches by cache_control.
    for f in [Flavour::Compatible, Flavour::Anthropic] {
        let server = MockServer::start().await;
        answer_json(&server, f, &Answer::text("ok")).await;
        provider(f, &server)
            .complete(&round_trip_request())
            .await
            .unwrap();
        let body = bodies(&server).await.remove(0);
        assert!(body.get("prompt_cache_key").is_none(), "{f:?}");
    }
}

#[tokio::test]
async fn anthropic_marks_the_stable_prefix_for_caching() {
    let server = MockServer::start().await;
    answer_json(&server, Flavour::Anthropic, &Answer::text("ok")).await;
    provider(Flavour::Anthropic, &server)
        .complete(&round_trip_request())
        .await
        .unwrap();
    let body = bodies(&server).await.remove(0);
    assert_eq!(body["system"][0]["text"], "You are a test agent.");
    assert_eq!(
        body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    let tools = body["tools"].as_array().unwrap();
    assert!(tools[0].get("cache_control").is_none());
    assert_eq!(tools[1]["cache_control"], json!({"type": "ephemeral"}));
}

// ---------- answers ----------

#[tokio::test]
async fn parallel_tool_calls_are_parsed() {
    for f in ALL {
        let server = MockServer::start().await;
        let a = Answer::tools(vec![
            ("call_1", "read_file", json!({"path": "a.md"})),
            (
                "call_2",
                "write_file",
                json!({"path": "b.md", "content": "x"}),
            ),
        ]);
        answer_json(&server, f, &a).await;
        let r = provider(f, &server)
            .complete(&simple_request())
            .await
            .unwrap();
        assert_eq!(
            r.tool_calls,
            vec![
                ToolCall {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "a.md"})
                },
                ToolCall {
                    id: "call_2".into(),
                    name: "write_file".into(),
                    arguments: json!({"path": "b.md", "content": "x"})
                },
            ],
            "{f:?}"
        );
        assert_eq!(r.response_id.as_deref(), Some("resp_1"));
    }
}

#[tokio::test]
async fn chat_arguments_as_objects_or_bad_strings_are_handled() {
    let server = MockServer::start().await;
    // Some compatible servers send objects; a model may send a string that is not JSON.
    let body = json!({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant",
        "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "a"}}},
            {"type": "function", "function": {"name": "read_file", "arguments": "{not json"}}
        ]}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    answer_with(
        &server,
        Flavour::Compatible,
        ResponseTemplate::new(200).set_body_json(body),
    )
    .await;
    let r = provider(Flavour::Compatible, &server)
        .complete(&simple_request())
        .await
        .unwrap();
    assert_eq!(r.tool_calls[0].arguments, json!({"path": "a"}));
    assert_eq!(r.tool_calls[1].id, "call_1", "a missing id is generated");
    assert_eq!(
        r.tool_calls[1].arguments,
        json!("{not json"),
        "left as text for argument validation to report"
    );
}

#[tokio::test]
async fn usage_and_cost_are_reported() {
    let pricing = Pricing {
        input: 2.0,
        output: 8.0,
        cached_input: Some(0.5),
        cache_write: None,
    };
    for f in ALL {
        let server = MockServer::start().await;
        answer_json(&server, f, &Answer::text("ok")).await;
        let mut c = config(f, &server);
        c.pricing = Some(pricing);
        let p = build(&c);
        let r = p.complete(&simple_request()).await.unwrap();
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 120,
                output_tokens: 30,
                cached_tokens: 100,
                cache_creation_tokens: 0
            },
            "{f:?}"
        );
        let cost = p.pricing().unwrap().cost(&r.usage);
        // 20 × 2 + 100 × 0.5 + 30 × 8 per million
        assert!((cost - 330.0 / 1e6).abs() < 1e-12, "{f:?}: {cost}");
    }
}

#[tokio::test]
async fn anthropic_cache_writes_count_as_input() {
    let server = MockServer::start().await;
    let body = json!({"id": "msg_1", "type": "message", "content": [{"type": "text", "text": "ok"}],
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 200,
                  "cache_creation_input_tokens": 1000}});
    answer_with(
        &server,
        Flavour::Anthropic,
        ResponseTemplate::new(200).set_body_json(body),
    )
    .await;
    let r = provider(Flavour::Anthropic, &server)
        .complete(&simple_request())
        .await
        .unwrap();
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 1210,
            output_tokens: 5,
            cached_tokens: 200,
            cache_creation_tokens: 1000
        }
    );
}

#[tokio::test]
async fn a_server_without_usage_is_charged_an_estimate() {
    let server = MockServer::start().await;
    let body = json!({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "twelve bytes"}}]});
    answer_with(
        &server,
        Flavour::Compatible,
        ResponseTemplate::new(200).set_body_json(body),
    )
    .await;
    let p = provider(Flavour::Compatible, &server);
    let r = p.complete(&simple_request()).await.unwrap();
    assert_eq!(
        r.usage.input_tokens,
        p.estimate_prompt_tokens(&simple_request())
    );
    assert_eq!(r.usage.output_tokens, 4);
}

#[tokio::test]
async fn prompt_estimates_use_tiktoken_for_openai_and_are_conservative_otherwise() {
    let server = MockServer::start().await;
    let r = round_trip_request();
    let conservative = lsm_providers::estimate_tokens_conservatively(&r);
    let openai = provider(Flavour::Chat, &server).estimate_prompt_tokens(&r);
    let responses = provider(Flavour::Responses, &server).estimate_prompt_tokens(&r);
    // Counted with o200k_base: close to, but not, the three-bytes-per-token bound.
    assert_ne!(openai, conservative);
    assert!(
        openai > 40 && openai < conservative * 2,
        "{openai} vs {conservative}"
    );
    assert_eq!(openai, responses);
    assert_eq!(
        provider(Flavour::Anthropic, &server).estimate_prompt_tokens(&r),
        conservative
    );
    assert_eq!(
        provider(Flavour::Compatible, &server).estimate_prompt_tokens(&r),
        conservative,
        "llama3.2 has no known tokenizer"
    );
}

// ---------- streaming ----------

#[tokio::test]
async fn streaming_assembles_the_same_response_and_reports_progress() {
    for (f, direct) in each_flavour_and_transport() {
        let mut a = Answer::tools(vec![
            ("call_1", "read_file", json!({"path": "a.md"})),
            (
                "call_2",
                "write_file",
                json!({"path": "b.md", "content": "x y"}),
            ),
        ]);
        a.text = "Let me look at both files.";
        let plain = MockServer::start().await;
        answer_json(&plain, f, &a).await;
        let expected = provider(f, &plain)
            .complete(&simple_request())
            .await
            .unwrap();

        let streaming = MockServer::start().await;
        answer_with(
            &streaming,
            f,
            ResponseTemplate::new(200).set_body_raw(f.sse(&a), "text/event-stream"),
        )
        .await;
        let mut c = over(config(f, &streaming), direct);
        c.stream = true;
        let observer = CollectingObserver::default();
        let got = build(&c)
            .complete_observed(&simple_request(), &observer)
            .await
            .unwrap();
        assert_eq!(got, expected, "{f:?}");
        assert_eq!(bodies(&streaming).await[0]["stream"], true);

        let events = observer.events();
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::TextDelta { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, a.text, "{f:?}");
        let started: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::ToolCallStarted { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(started, ["read_file", "write_file"], "{f:?}");
        assert!(
            events
                .iter()
                .any(|e| matches!(e, ProviderEvent::ToolCallArgumentsDelta { .. })),
            "{f:?}"
        );
    }
}

#[tokio::test]
async fn a_truncated_stream_is_a_malformed_response() {
    for (f, direct) in each_flavour_and_transport() {
        let a = Answer::text("This answer will be cut off.");
        let full = f.sse(&a);
        let cut = &full[..full.len() * 2 / 3];
        let server = MockServer::start().await;
        answer_with(
            &server,
            f,
            ResponseTemplate::new(200).set_body_raw(cut.to_string(), "text/event-stream"),
        )
        .await;
        let mut c = over(config(f, &server), direct);
        c.stream = true;
        let e = build(&c).complete(&simple_request()).await.unwrap_err();
        assert!(matches!(e, ProviderError::Malformed { .. }), "{f:?}: {e}");
        assert!(
            e.to_string().contains("truncated") || e.to_string().contains("not JSON"),
            "{f:?}: {e}"
        );
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            1,
            "not retried"
        );
    }
}

// ---------- retries ----------

/// Answers with the given templates in order, then repeats the last.
struct Sequence {
    templates: Vec<ResponseTemplate>,
    next: AtomicUsize,
}

impl Sequence {
    fn new(templates: Vec<ResponseTemplate>) -> Self {
        Sequence {
            templates,
            next: AtomicUsize::new(0),
        }
    }
}

impl Respond for Sequence {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        self.templates[n.min(self.templates.len() - 1)].clone()
    }
}

fn retry_delays(events: &[ProviderEvent]) -> Vec<Duration> {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::Retry { delay, .. } => Some(*delay),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn server_errors_and_rate_limits_are_retried_with_growing_backoff() {
    for (f, direct) in each_flavour_and_transport() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(f.path()))
            .respond_with(Sequence::new(vec![
                ResponseTemplate::new(503).set_body_string("overloaded"),
                ResponseTemplate::new(429)
                    .set_body_json(json!({"error": {"message": "slow down"}})),
                ResponseTemplate::new(500),
                ResponseTemplate::new(200).set_body_json(f.json(&Answer::text("finally"))),
            ]))
            .mount(&server)
            .await;
        let observer = CollectingObserver::default();
        let r = build(&over(config(f, &server), direct))
            .complete_observed(&simple_request(), &observer)
            .await
            .unwrap();
        assert_eq!(r.text, "finally");
        assert_eq!(server.received_requests().await.unwrap().len(), 4);
        let delays = retry_delays(&observer.events());
        assert_eq!(delays.len(), 3, "{f:?}");
        // Base 2 ms doubling, with jitter below the current step: [2,4), [4,8), [8,16) ms.
        for (k, d) in delays.iter().enumerate() {
            let low = Duration::from_millis(2 << k);
            assert!(*d >= low && *d < low * 2, "{f:?}: retry {k} waited {d:?}");
        }
        let reasons: Vec<String> = observer
            .events()
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::Retry { reason, .. } => Some(reason.clone()),
                _ => None,
            })
            .collect();
        assert!(
            reasons[1].contains("429") && reasons[1].contains("slow down"),
            "{reasons:?}"
        );
    }
}

#[tokio::test]
async fn retries_are_capped_and_the_error_counts_the_attempts() {
    for f in ALL {
        let server = MockServer::start().await;
        answer_with(
            &server,
            f,
            ResponseTemplate::new(502).set_body_string("bad gateway"),
        )
        .await;
        let mut c = config(f, &server);
        c.http.max_retries = 2;
        let e = build(&c).complete(&simple_request()).await.unwrap_err();
        assert!(
            matches!(
                e,
                ProviderError::Status {
                    status: 502,
                    attempts: 3,
                    ..
                }
            ),
            "{f:?}: {e:?}"
        );
        assert!(e.to_string().contains("after 3 attempt(s)"), "{e}");
        assert_eq!(server.received_requests().await.unwrap().len(), 3);
    }
}

#[tokio::test]
async fn retry_after_is_honoured_and_capped() {
    let f = Flavour::Chat;
    // retry-after-ms (OpenAI): 40 ms, far above the 2 ms backoff.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Sequence::new(vec![
            ResponseTemplate::new(429).insert_header("retry-after-ms", "40"),
            ResponseTemplate::new(200).set_body_json(f.json(&Answer::text("ok"))),
        ]))
        .mount(&server)
        .await;
    let observer = CollectingObserver::default();
    provider(f, &server)
        .complete_observed(&simple_request(), &observer)
        .await
        .unwrap();
    assert_eq!(
        retry_delays(&observer.events()),
        [Duration::from_millis(40)]
    );

    // Retry-After in seconds, longer than the cap: the cap wins.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Sequence::new(vec![
            ResponseTemplate::new(503).insert_header("retry-after", "120"),
            ResponseTemplate::new(200).set_body_json(f.json(&Answer::text("ok"))),
        ]))
        .mount(&server)
        .await;
    let mut c = config(f, &server);
    c.http.retry_max_delay = Duration::from_millis(30);
    let observer = CollectingObserver::default();
    build(&c)
        .complete_observed(&simple_request(), &observer)
        .await
        .unwrap();
    assert_eq!(
        retry_delays(&observer.events()),
        [Duration::from_millis(30)]
    );
}

#[tokio::test]
async fn client_errors_are_not_retried_and_each_maps_to_its_own_error() {
    for (f, direct) in each_flavour_and_transport() {
        let cases: Vec<(u16, Value)> = vec![
            (
                400,
                json!({"error": {"message": "max_tokens is too large", "type": "invalid_request_error"}}),
            ),
            (
                401,
                json!({"error": {"message": "Incorrect API key provided"}}),
            ),
            (403, json!({"error": {"message": "not allowed"}})),
            (
                404,
                json!({"error": {"message": "The model does not exist"}}),
            ),
            (422, json!({"error": {"message": "unprocessable"}})),
        ];
        for (status, body) in cases {
            let server = MockServer::start().await;
            answer_with(
                &server,
                f,
                ResponseTemplate::new(status).set_body_json(body),
            )
            .await;
            let e = failed_call(f, &server, direct).await;
            let text = e.to_string();
            match status {
                400 => {
                    assert!(
                        matches!(e, ProviderError::BadRequest { .. }),
                        "{f:?}: {e:?}"
                    );
                    assert!(text.contains("max_tokens is too large"), "{text}");
                }
                401 | 403 => {
                    assert!(matches!(e, ProviderError::Auth { .. }), "{f:?}: {e:?}");
                    if f == Flavour::Compatible {
                        assert!(text.contains("api_key_env"), "{text}");
                    } else {
                        assert!(text.contains(f.key_env()), "{text}");
                    }
                    assert!(text.contains(&status.to_string()), "{text}");
                }
                404 => {
                    assert!(matches!(e, ProviderError::NotFound { .. }), "{f:?}: {e:?}");
                    assert!(
                        text.contains(f.model()) && text.contains("base_url"),
                        "{text}"
                    );
                    assert!(text.contains(f.path()), "names the URL: {text}");
                }
                _ => assert!(
                    matches!(
                        e,
                        ProviderError::Status {
                            status: 422,
                            attempts: 1,
                            retryable: false,
                            ..
                        }
                    ),
                    "{f:?}: {e:?}"
                ),
            }
            assert!(!e.is_retryable());
            assert_eq!(
                server.received_requests().await.unwrap().len(),
                1,
                "{f:?} {status}"
            );
        }
    }
}

#[tokio::test]
async fn a_redirect_is_reported_with_its_target_and_not_followed() {
    for (f, direct) in each_flavour_and_transport() {
        // Where the redirect points: it must see no request (and so no key).
        let elsewhere = MockServer::start().await;
        answer_json(&elsewhere, f, &Answer::text("followed")).await;
        let server = MockServer::start().await;
        let target = format!("{}{}", elsewhere.uri(), f.path());
        answer_with(
            &server,
            f,
            ResponseTemplate::new(307).insert_header("location", target.as_str()),
        )
        .await;
        let e = failed_call(f, &server, direct).await;
        let text = e.to_string();
        assert!(matches!(e, ProviderError::Config { .. }), "{f:?}: {e:?}");
        assert!(
            text.contains("307") && text.contains(&target) && text.contains("base_url"),
            "{text}"
        );
        assert!(!e.is_retryable());
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
        assert!(
            elsewhere.received_requests().await.unwrap().is_empty(),
            "{f:?}: the redirect was followed"
        );
    }
}

/// Keys a server might echo: one of the usual `sk-` shape, one of no known shape.
const ECHOED_KEYS: [&str; 2] = ["sk-test-SECRETSECRET1234567890", "plain-SECRET-Zq81x0Lm"];

#[tokio::test]
async fn a_key_the_server_echoes_never_reaches_the_error() {
    for f in ALL {
        for key in ECHOED_KEYS {
            let env = |name: &str| {
                matches!(name, "OPENAI_API_KEY" | "ANTHROPIC_API_KEY" | "COMPAT_KEY")
                    .then(|| key.to_string())
            };
            for status in [400u16, 401, 500] {
                // OpenAI's own 401 wording, as JSON; and a proxy's plain-text page.
                let bodies = [
                    ResponseTemplate::new(status).set_body_json(json!({"error": {
                        "message": format!("Incorrect API key provided: {key}. You can find your API key at https://platform.openai.com/account/api-keys."),
                        "type": "invalid_request_error", "code": "invalid_api_key"}})),
                    ResponseTemplate::new(status)
                        .set_body_string(format!("upstream refused Authorization: Bearer {key}")),
                ];
                for body in bodies {
                    let server = MockServer::start().await;
                    answer_with(&server, f, body).await;
                    let mut c = config(f, &server);
                    if f == Flavour::Compatible {
                        c.api_key_env = Some("COMPAT_KEY".into());
                    }
                    let observer = CollectingObserver::default();
                    let e = c
                        .build_http(&env)
                        .unwrap()
                        .complete_observed(&simple_request(), &observer)
                        .await
                        .unwrap_err();
                    let shown = format!("{e} {e:?}");
                    assert!(!shown.contains(key), "{f:?} {status}: {shown}");
                    assert!(shown.contains("[REDACTED]"), "{f:?} {status}: {shown}");
                    // 500 is retried: the retry events carry the error's text too.
                    let events = format!("{:?}", observer.events());
                    assert!(!events.contains(key), "{f:?} {status}: {events}");
                    if status == 500 {
                        assert!(events.contains("Retry"), "{f:?}: {events}");
                    }
                }
            }
        }
    }
}

#[tokio::test]
async fn a_short_key_is_not_scrubbed_out_of_every_message() {
    let f = Flavour::Chat;
    let server = MockServer::start().await;
    answer_with(
        &server,
        f,
        ResponseTemplate::new(401).set_body_json(json!({"error": {"message": "key k is invalid"}})),
    )
    .await;
    let e = config(f, &server)
        .build_http(&|_: &str| Some("k".to_string()))
        .unwrap()
        .complete(&simple_request())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("key k is invalid"), "{e}");
}

#[tokio::test]
async fn a_body_that_is_not_json_is_malformed() {
    for (f, direct) in each_flavour_and_transport() {
        let server = MockServer::start().await;
        answer_with(
            &server,
            f,
            ResponseTemplate::new(200).set_body_raw("<html>proxy login</html>", "text/html"),
        )
        .await;
        let e = failed_call(f, &server, direct).await;
        assert!(matches!(e, ProviderError::Malformed { .. }), "{f:?}: {e:?}");
        assert!(e.to_string().contains("proxy login"), "{e}");

        let server = MockServer::start().await;
        answer_with(
            &server,
            f,
            ResponseTemplate::new(200).set_body_json(json!({"unexpected": true})),
        )
        .await;
        let e = failed_call(f, &server, direct).await;
        assert!(matches!(e, ProviderError::Malformed { .. }), "{f:?}: {e:?}");
    }
}

/// When [`counting_server`] hangs up a connection.
#[derive(Clone, Copy, Debug)]
enum Hangup {
    /// Never: the connection is kept for the next request.
    Never,
    /// Right after each answer.
    AfterAnswer,
    /// At the second request on a connection, unanswered, as a server whose idle timeout
    /// fires just as the request arrives: read whole, then closed (the client sees the
    /// connection end) or, when `reset`, closed unread (the kernel resets it).
    AtSecondRequest { reset: bool },
}

/// A server on a raw socket that answers requests on a connection with a text answer and
/// hangs up as `hangup` says. Returns its base URL and the count of connections it accepted.
async fn counting_server(hangup: Hangup) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let answer = Flavour::Compatible.json(&Answer::text("ok")).to_string();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
                let mut sock = BufReader::new(sock);
                let mut served = 0;
                loop {
                    let hang_up_now =
                        matches!(hangup, Hangup::AtSecondRequest { .. }) && served == 1;
                    if hang_up_now && matches!(hangup, Hangup::AtSecondRequest { reset: true }) {
                        // Unread bytes in the socket when it closes: the kernel resets it.
                        let _ = sock.get_ref().readable().await;
                        let _ = sock.get_ref().set_zero_linger();
                        return;
                    }
                    // The head, then a body of its content-length.
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if sock.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0u8; length];
                    sock.read_exact(&mut body).await.unwrap();
                    if hang_up_now {
                        return;
                    }
                    served += 1;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                        answer.len()
                    );
                    let reply = [head.as_bytes(), answer.as_bytes()].concat();
                    if sock.get_mut().write_all(&reply).await.is_err() {
                        return;
                    }
                    if matches!(hangup, Hangup::AfterAnswer) {
                        let _ = sock.get_mut().shutdown().await;
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}/v1"), accepted)
}

#[tokio::test]
async fn calls_reuse_one_connection_and_a_closed_one_is_replaced() {
    for direct in TRANSPORTS {
        // A server that keeps connections open: three calls, one connection.
        let (base, accepted) = counting_server(Hangup::Never).await;
        let mut c = ProviderConfig::new(ProviderKind::Compatible, "m");
        c.base_url = Some(base);
        c.http = fast_settings();
        c.http.direct = direct;
        c.http.max_retries = 0;
        let p = build(&c);
        for _ in 0..3 {
            assert_eq!(p.complete(&simple_request()).await.unwrap().text, "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "{direct}");

        // A server that closes each connection after its answer: every call still succeeds
        // (without a retry: none is allowed), each on a new connection.
        let (base, accepted) = counting_server(Hangup::AfterAnswer).await;
        c.base_url = Some(base);
        let p = build(&c);
        for _ in 0..3 {
            assert_eq!(p.complete(&simple_request()).await.unwrap().text, "ok");
            // Give the connection's task the moment it needs to see the close, as the
            // time between two model calls (a tool run) gives it.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3, "{direct}");
    }
}

/// A server whose idle timeout fires just as a request arrives on a kept connection (it
/// closes or resets the connection unanswered): the direct transport sends the request again
/// on a new connection at once, so the call succeeds without a retry (none is allowed here)
/// and without a retry's wait.
#[tokio::test]
async fn a_kept_connection_closed_as_the_request_goes_out_is_replaced_at_once() {
    for reset in [false, true] {
        let (base, accepted) = counting_server(Hangup::AtSecondRequest { reset }).await;
        let mut c = ProviderConfig::new(ProviderKind::Compatible, "m");
        c.base_url = Some(base);
        c.http = fast_settings();
        c.http.max_retries = 0;
        let p = build(&c);
        for call in 1..=3 {
            let answer = p.complete(&simple_request()).await;
            assert_eq!(
                answer.map(|a| a.text).map_err(|e| e.to_string()),
                Ok("ok".to_string()),
                "call {call}, reset {reset}"
            );
        }
        // Each connection answers one call and drops the next, which a new one answers.
        assert_eq!(accepted.load(Ordering::SeqCst), 3, "reset {reset}");
    }
}

#[test]
fn a_proxy_variable_sends_plain_http_calls_through_reqwest() {
    let mut c = ProviderConfig::new(ProviderKind::Compatible, "m");
    c.base_url = Some("http://localhost:11434/v1".into());
    assert_eq!(c.build_http(&|_| None).unwrap().transport(), "direct");
    for var in ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"] {
        let env = |name: &str| (name == var).then(|| "http://127.0.0.1:3128".to_string());
        assert_eq!(c.build_http(&env).unwrap().transport(), "reqwest", "{var}");
    }
    c.base_url = Some("https://models.example.test/v1".into());
    assert_eq!(c.build_http(&|_| None).unwrap().transport(), "reqwest");
    c.base_url = Some("http://localhost:11434/v1".into());
    c.http.direct = false;
    assert_eq!(c.build_http(&|_| None).unwrap().transport(), "reqwest");
}

/// A server that promises a longer body than it sends, then hangs up.
async fn cut_off_server() -> String {
    partial_body_server(false).await
}

/// A server that promises a longer body than it sends, then hangs up or, when `hang`, keeps
/// the connection open and says nothing more.
async fn partial_body_server(hang: bool) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = vec![0u8; 65536];
            let _ = sock.read(&mut buf).await;
            let _ = sock
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{\"id\": \"x\", \"choi")
                .await;
            if hang {
                // Silent until the client gives up and closes.
                let _ = sock.read(&mut buf).await;
            }
            let _ = sock.shutdown().await;
        }
    });
    format!("http://{addr}/v1")
}

#[tokio::test]
async fn a_body_cut_off_mid_way_is_malformed() {
    let base = cut_off_server().await;
    for direct in TRANSPORTS {
        let mut c = ProviderConfig::new(ProviderKind::Compatible, "m");
        c.base_url = Some(base.clone());
        c.http = fast_settings();
        c.http.direct = direct;
        let e = build(&c).complete(&simple_request()).await.unwrap_err();
        assert!(
            matches!(e, ProviderError::Malformed { .. }),
            "{direct}: {e:?}"
        );
        assert!(e.to_string().contains("cut off"), "{direct}: {e}");
    }
}

#[tokio::test]
async fn a_body_that_stalls_mid_way_times_out() {
    let base = partial_body_server(true).await;
    for direct in TRANSPORTS {
        let mut c = ProviderConfig::new(ProviderKind::Compatible, "m");
        c.base_url = Some(base.clone());
        c.http = fast_settings();
        c.http.direct = direct;
        c.http.read_timeout = Duration::from_millis(100);
        c.http.max_retries = 0;
        let e = build(&c).complete(&simple_request()).await.unwrap_err();
        assert!(
            matches!(e, ProviderError::Timeout { .. }),
            "{direct}: {e:?}"
        );
        assert!(e.to_string().contains("stalled"), "{direct}: {e}");
    }
}

#[tokio::test]
async fn connection_errors_are_retried_then_reported() {
    // A port that was just free: nothing listens there.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for direct in TRANSPORTS {
        let mut c = ProviderConfig::new(ProviderKind::Compatible, "m");
        c.base_url = Some(format!("http://127.0.0.1:{port}/v1"));
        c.http = fast_settings();
        c.http.max_retries = 2;
        c.http.direct = direct;
        let observer = CollectingObserver::default();
        let e = build(&c)
            .complete_observed(&simple_request(), &observer)
            .await
            .unwrap_err();
        assert!(
            matches!(e, ProviderError::Connect { attempts: 3, .. }),
            "{direct}: {e:?}"
        );
        let text = e.to_string();
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(text.to_lowercase().contains("refused"), "{direct}: {text}");
        assert_eq!(retry_delays(&observer.events()).len(), 2);
    }
}

#[tokio::test]
async fn a_silent_server_times_out_and_is_retried() {
    let f = Flavour::Chat;
    for direct in TRANSPORTS {
        let server = MockServer::start().await;
        answer_with(
            &server,
            f,
            ResponseTemplate::new(200)
                .set_body_json(f.json(&Answer::text("too late")))
                .set_delay(Duration::from_secs(30)),
        )
        .await;
        let mut c = over(config(f, &server), direct);
        c.http.read_timeout = Duration::from_millis(100);
        c.http.max_retries = 1;
        let e = build(&c).complete(&simple_request()).await.unwrap_err();
        assert!(
            matches!(e, ProviderError::Timeout { attempts: 2, .. }),
            "{e:?}"
        );
        assert_eq!(server.received_requests().await.unwrap().len(), 2);
    }
}

#[tokio::test]
async fn dropping_the_call_cancels_it_mid_flight() {
    for (f, direct) in each_flavour_and_transport() {
        let server = MockServer::start().await;
        answer_with(
            &server,
            f,
            ResponseTemplate::new(200)
                .set_body_json(f.json(&Answer::text("too late")))
                .set_delay(Duration::from_secs(60)),
        )
        .await;
        let p = Arc::new(build(&over(config(f, &server), direct)));
        let stop = tokio_util::sync::CancellationToken::new();
        let watcher = async {
            // Cancel once the server has the request.
            while server.received_requests().await.unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            stop.cancel();
        };
        let request = simple_request();
        let call = async {
            tokio::select! {
                () = stop.cancelled() => None,
                r = p.complete(&request) => Some(r),
            }
        };
        let (outcome, ()) = tokio::join!(call, watcher);
        assert!(
            outcome.is_none(),
            "{f:?}: the call finished instead of being cancelled"
        );
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
    }
}

// ---------- Responses chaining ----------

#[tokio::test]
async fn an_unknown_previous_response_is_retried_once_with_the_full_history() {
    let f = Flavour::Responses;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Sequence::new(vec![
            ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": "Previous response with id 'resp_prev' not found.",
                "type": "invalid_request_error", "param": "previous_response_id",
                "code": "previous_response_not_found"}})),
            ResponseTemplate::new(200)
                .set_body_json(f.json(&Answer::text("fresh").with_id("resp_new"))),
        ]))
        .mount(&server)
        .await;
    let observer = CollectingObserver::default();
    let r = provider(f, &server)
        .complete_observed(&round_trip_request(), &observer)
        .await
        .unwrap();
    assert_eq!(r.response_id.as_deref(), Some("resp_new"));
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0]["previous_response_id"], "resp_prev");
    assert_eq!(sent[0]["input"].as_array().unwrap().len(), 2);
    assert!(sent[1].get("previous_response_id").is_none());
    assert_eq!(
        sent[1]["input"].as_array().unwrap().len(),
        6,
        "user, assistant text, two calls, two outputs"
    );
    assert!(
        observer
            .events()
            .iter()
            .any(|e| matches!(e, ProviderEvent::ChainReset { .. }))
    );

    // If the server keeps refusing, the error says the chain is broken.
    let server = MockServer::start().await;
    answer_with(
        &server,
        f,
        ResponseTemplate::new(404).set_body_json(json!({"error": {
            "message": "Previous response with id 'resp_prev' not found.",
            "code": "previous_response_not_found"}})),
    )
    .await;
    let e = provider(f, &server)
        .complete(&round_trip_request())
        .await
        .unwrap_err();
    assert!(
        matches!(e, ProviderError::NotFound { .. }),
        "the full-history retry's own error: {e:?}"
    );
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        2,
        "retried exactly once"
    );
}

#[test]
fn breaks_chain_is_only_for_an_unknown_previous_response() {
    let e = ProviderError::PreviousResponseNotFound {
        provider: "openai-responses".into(),
        response_id: "r".into(),
        message: "gone".into(),
    };
    assert!(e.breaks_chain() && !e.is_retryable());
}

// ---------- configuration ----------

#[test]
fn keys_come_only_from_the_named_environment_variable() {
    let none = |_: &str| None;
    for (kind, var) in [
        (ProviderKind::OpenAi, "OPENAI_API_KEY"),
        (ProviderKind::OpenAiResponses, "OPENAI_API_KEY"),
        (ProviderKind::Anthropic, "ANTHROPIC_API_KEY"),
    ] {
        let e = ProviderConfig::new(kind, "m")
            .build_http(&none)
            .unwrap_err();
        assert!(matches!(e, ProviderError::MissingApiKey { .. }), "{e:?}");
        assert!(e.to_string().contains(var), "{e}");
    }
    let mut c = ProviderConfig::new(ProviderKind::OpenAi, "m");
    c.api_key_env = Some("MY_GATEWAY_KEY".into());
    let e = c.build_http(&env_with_keys).unwrap_err();
    assert!(e.to_string().contains("MY_GATEWAY_KEY"), "{e}");
    let p = c
        .build_http(&|n: &str| (n == "MY_GATEWAY_KEY").then(|| "k".to_string()))
        .unwrap();
    assert!(
        !format!("{p:?}").contains("\"k\""),
        "the key is never printed"
    );

    let mut c = ProviderConfig::new(ProviderKind::Compatible, "llama3.2");
    let e = c.build_http(&none).unwrap_err();
    assert!(e.to_string().contains("base_url"), "{e}");
    c.base_url = Some("http://localhost:11434/v1/".into());
    let p = c.build_http(&none).unwrap();
    assert_eq!(p.endpoint(), "http://localhost:11434/v1/chat/completions");
    let e = ProviderConfig::new(ProviderKind::Anthropic, " ")
        .build_http(&env_with_keys)
        .unwrap_err();
    assert!(e.to_string().contains("no model"), "{e}");
}

// ---------- strict JSON over HTTP ----------

#[tokio::test]
async fn models_without_function_calling_use_the_strict_json_protocol() {
    let f = Flavour::Compatible;
    let server = MockServer::start().await;
    let mut a = Answer::text("");
    a.text =
        r#"{"response": "reading", "action": "read_file", "action_arguments": {"path": "a.md"}}"#;
    answer_json(&server, f, &a).await;
    let mut c = config(f, &server);
    c.function_calling = false;
    let p = c.build(&env_with_keys).unwrap();
    let r: LlmResponse = p.complete(&simple_request()).await.unwrap();
    assert_eq!(r.text, "reading");
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].name, "read_file");
    let body = bodies(&server).await.remove(0);
    assert!(body.get("tools").is_none(), "no native tools offered");
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("\"action\"") && system.contains("- read_file"),
        "{system}"
    );
}
