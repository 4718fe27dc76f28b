//! OpenAI Chat Completions (`POST {base_url}/chat/completions`), also spoken by Ollama, vLLM,
//! llama.cpp's server, LM Studio and OpenRouter.
//!
//! Tools are offered as `{"type": "function", "function": {...}}` with `tool_choice: "auto"`;
//! the model may ask for several calls at once; each result goes back as a `tool` message
//! carrying its call id. Arguments arrive as a JSON string and are parsed.

use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::answer::{AnswerError, StreamAssembler, StreamError, parse_arguments};
use crate::endpoint::HttpProvider;
use crate::kind::ProviderKind;
use crate::sse::SseEvent;
use crate::wire::{JsonString, KeptBody, lock};
use crate::{
    CallObserver, LlmRequest, LlmResponse, Message, ProviderEvent, Role, ToolCall, ToolDefinition,
    Usage,
};

/// The request body, serialized straight from the request: nothing of the history is
/// copied or turned into a `serde_json::Value` tree on the way, and each message's and
/// tool's JSON is made once and then copied from the provider's [`WireCache`](crate::wire::WireCache) (a call over a
/// long history was mostly this serialization, repeated for every message at every call).
/// It is built on the body `kept` from the last call: the messages both share are not
/// written again (see [`KeptBody`]).
pub(crate) fn body(
    p: &HttpProvider,
    request: &LlmRequest,
    stream: bool,
    kept: KeptBody,
) -> KeptBody {
    let openai = p.kind == ProviderKind::OpenAi;
    let max = request.options.max_output_tokens;
    let rest = crate::wire::to_bytes(&Body {
        model: &p.model,
        tool_choice: (!request.tools.is_empty()).then_some("auto"),
        // OpenAI's current name; compatible servers know the older one.
        max_completion_tokens: max.filter(|_| openai),
        max_tokens: max.filter(|_| !openai),
        prompt_cache_key: request
            .options
            .prompt_cache_key
            .as_deref()
            .filter(|_| openai),
        prompt_cache_retention: request
            .options
            .prompt_cache_retention
            .as_deref()
            .or(p.prompt_cache_retention.as_deref())
            .filter(|_| openai),
        stream: stream.then_some(true),
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
    });
    let mut cache = lock(&p.wire);
    let mut kept = kept.reserve(p.body_capacity() + rest.len()).messages(
        b"{\"messages\":[",
        &request.messages,
        |m, out| cache.json(m, out, |m, json| crate::wire::write(json, &WireMessage(m))),
    );
    let body = &mut kept.bytes;
    body.push(b']');
    if !request.tools.is_empty() {
        body.extend_from_slice(b",\"tools\":");
        cache.tools_array(&request.tools, body, |cache, json| {
            crate::wire::array(json, &request.tools, |t, out| {
                cache.json(t, out, |t, json| crate::wire::write(json, &WireTool(t)))
            });
        });
    }
    drop(cache);
    p.remember_body_len(body.len() + rest.len());
    crate::wire::join_fields(body, &rest);
    kept
}

/// The fields of a body other than its messages and tools.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

struct WireMessage<'a>(&'a Message);

impl Serialize for WireMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut map = s.serialize_map(None)?;
        match m.role {
            Role::System | Role::User => {
                let role = if m.role == Role::System {
                    "system"
                } else {
                    "user"
                };
                map.serialize_entry("role", role)?;
                map.serialize_entry("content", &m.content)?;
            }
            Role::Assistant => {
                map.serialize_entry("role", "assistant")?;
                if m.content.is_empty() && !m.tool_calls.is_empty() {
                    map.serialize_entry("content", &())?;
                } else {
                    map.serialize_entry("content", &m.content)?;
                }
                if !m.tool_calls.is_empty() {
                    map.serialize_entry("tool_calls", &WireCalls(&m.tool_calls))?;
                }
            }
            Role::Tool => {
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", m.tool_call_id.as_deref().unwrap_or(""))?;
                map.serialize_entry("content", &m.content)?;
            }
        }
        map.end()
    }
}

struct WireCalls<'a>(&'a [ToolCall]);

impl Serialize for WireCalls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            arguments: JsonString<'a>,
        }
        #[derive(Serialize)]
        struct Call<'a> {
            id: &'a str,
            r#type: &'static str,
            function: Function<'a>,
        }
        s.collect_seq(self.0.iter().map(|c| Call {
            id: &c.id,
            r#type: "function",
            function: Function {
                name: &c.name,
                arguments: JsonString(&c.arguments),
            },
        }))
    }
}

/// One tool as Chat Completions offers it.
struct WireTool<'a>(&'a ToolDefinition);

impl Serialize for WireTool<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Function<'a> {
            name: &'a str,
            description: &'a str,
            parameters: &'a Value,
        }
        #[derive(Serialize)]
        struct Tool<'a> {
            r#type: &'static str,
            function: Function<'a>,
        }
        let t = self.0;
        Tool {
            r#type: "function",
            function: Function {
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
            },
        }
        .serialize(s)
    }
}

fn usage(v: &Value) -> Usage {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("prompt_tokens"),
        output_tokens: n("completion_tokens"),
        cached_tokens: v
            .pointer("/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        cache_creation_tokens: 0,
    }
}

/// Read a non-streamed answer's body straight into typed fields (no `Value` tree of the
/// whole answer), by sonic-rs (what serde_json would read:
/// `the_typed_reader_reads_what_the_general_one_reads`). `None` when the body has a shape
/// these fields do not cover (not JSON, a content that is not a string, ...): [`parse`] then
/// reads it and says what is wrong.
pub(crate) fn parse_bytes(body: &[u8]) -> Option<Result<LlmResponse, AnswerError>> {
    #[derive(Deserialize)]
    struct Answer {
        id: Option<String>,
        #[serde(default)]
        choices: Vec<Choice>,
        usage: Option<AnswerUsage>,
    }
    // The counts [`usage`] reads; any other shape (a null, a fraction) falls back to it.
    #[derive(Deserialize)]
    struct AnswerUsage {
        #[serde(default)]
        prompt_tokens: u64,
        #[serde(default)]
        completion_tokens: u64,
        prompt_tokens_details: Option<Details>,
    }
    #[derive(Deserialize)]
    struct Details {
        #[serde(default)]
        cached_tokens: u64,
    }
    #[derive(Deserialize)]
    struct Choice {
        message: Option<AnswerMessage>,
    }
    #[derive(Deserialize)]
    struct AnswerMessage {
        content: Option<String>,
        tool_calls: Option<Vec<AnswerCall>>,
    }
    #[derive(Deserialize)]
    struct AnswerCall {
        id: Option<String>,
        function: AnswerFunction,
    }
    #[derive(Deserialize)]
    struct AnswerFunction {
        name: String,
        #[serde(default)]
        arguments: Value,
    }
    let answer: Answer = sonic_rs::from_slice(body).ok()?;
    let message = answer.choices.into_iter().next()?.message?;
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, c)| ToolCall {
            id: c
                .id
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("call_{i}")),
            name: c.function.name,
            arguments: parse_arguments(&c.function.arguments),
        })
        .collect();
    Some(Ok(LlmResponse {
        text: message.content.unwrap_or_default(),
        tool_calls,
        usage: answer
            .usage
            .map(|u| Usage {
                input_tokens: u.prompt_tokens,
                output_tokens: u.completion_tokens,
                cached_tokens: u.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
                cache_creation_tokens: 0,
            })
            .unwrap_or_default(),
        response_id: answer.id,
    }))
}

/// Read a non-streamed answer.
pub(crate) fn parse(v: &Value) -> Result<LlmResponse, AnswerError> {
    let message = v
        .pointer("/choices/0/message")
        .ok_or_else(|| AnswerError::missing("choices[0].message", v))?;
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (i, c) in calls.iter().enumerate() {
            let name = c
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or(AnswerError::NoFunctionName { index: i })?;
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map_or_else(|| format!("call_{i}"), String::from);
            let arguments =
                parse_arguments(c.pointer("/function/arguments").unwrap_or(&Value::Null));
            tool_calls.push(ToolCall {
                id,
                name: name.to_string(),
                arguments,
            });
        }
    }
    Ok(LlmResponse {
        text,
        tool_calls,
        usage: v.get("usage").map(usage).unwrap_or_default(),
        response_id: v.get("id").and_then(Value::as_str).map(String::from),
    })
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles `chat.completion.chunk` events.
#[derive(Default)]
pub(crate) struct Assembler {
    id: Option<String>,
    text: String,
    calls: Vec<PartialCall>,
    usage: Usage,
}

impl StreamAssembler for Assembler {
    fn event(&mut self, ev: &SseEvent, observer: &dyn CallObserver) -> Result<bool, StreamError> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| StreamError::Malformed(format!("a stream chunk is not JSON ({e})")))?;
        if let Some(err) = v.get("error") {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| err.to_string(), String::from);
            return Err(StreamError::Server(msg));
        }
        if self.id.is_none() {
            self.id = v.get("id").and_then(Value::as_str).map(String::from);
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = usage(u);
        }
        let Some(delta) = v.pointer("/choices/0/delta") else {
            return Ok(false);
        };
        if let Some(t) = delta.get("content").and_then(Value::as_str)
            && !t.is_empty()
        {
            self.text.push_str(t);
            observer.on_event(ProviderEvent::TextDelta {
                text: t.to_string(),
            });
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for c in calls {
                // Servers that omit `index` start a new call with a new id.
                let id = c
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty());
                let index = match c.get("index").and_then(Value::as_u64) {
                    Some(i) => i as usize,
                    None => match (self.calls.last(), id) {
                        (Some(last), Some(id)) if !last.id.is_empty() && last.id != id => {
                            self.calls.len()
                        }
                        _ => self.calls.len().saturating_sub(1),
                    },
                };
                while self.calls.len() <= index {
                    self.calls.push(PartialCall::default());
                }
                let call = &mut self.calls[index];
                if let Some(id) = c.get("id").and_then(Value::as_str) {
                    call.id = id.to_string();
                }
                if let Some(name) = c.pointer("/function/name").and_then(Value::as_str) {
                    call.name.push_str(name);
                    observer.on_event(ProviderEvent::ToolCallStarted {
                        index,
                        id: call.id.clone(),
                        name: call.name.clone(),
                    });
                }
                if let Some(a) = c.pointer("/function/arguments").and_then(Value::as_str)
                    && !a.is_empty()
                {
                    call.arguments.push_str(a);
                    observer.on_event(ProviderEvent::ToolCallArgumentsDelta {
                        index,
                        delta: a.to_string(),
                    });
                }
            }
        }
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<LlmResponse, AnswerError> {
        let mut tool_calls = Vec::new();
        for (i, c) in self.calls.into_iter().enumerate() {
            if c.name.is_empty() {
                return Err(AnswerError::NoToolName {
                    what: "streamed tool call",
                    index: i,
                });
            }
            tool_calls.push(ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: parse_arguments(&Value::String(c.arguments)),
            });
        }
        Ok(LlmResponse {
            text: self.text,
            tool_calls,
            usage: self.usage,
            response_id: self.id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CollectingObserver;
    use serde_json::json;

    fn feed(a: &mut Assembler, data: Value) {
        let ev = SseEvent {
            event: String::new(),
            data: data.to_string(),
        };
        a.event(&ev, &CollectingObserver::default()).unwrap();
    }

    /// What an answer body reads as: the typed reader's result, or the general reader's
    /// where the typed one declines (as `HttpProvider::parse_response` does).
    fn read(body: &Value) -> LlmResponse {
        let bytes = serde_json::to_vec(body).unwrap();
        match parse_bytes(&bytes) {
            Some(r) => r.unwrap(),
            None => parse(body).unwrap(),
        }
    }

    proptest::proptest! {
        /// The typed reader (sonic-rs) reads any answer as the general one (serde_json's
        /// tree) does: text, ids, names, and arguments sent as JSON text or as JSON.
        #[test]
        fn the_typed_reader_reads_what_the_general_one_reads(
            text in proptest::prelude::any::<String>(),
            id in proptest::prelude::any::<String>(),
            name in proptest::prelude::any::<String>(),
            arguments in crate::test_values::any_json(),
            as_text in proptest::prelude::any::<bool>(),
        ) {
            let arguments = if as_text { json!(arguments.to_string()) } else { arguments };
            let body = json!({"id": id, "choices": [{"message": {"content": text,
                "tool_calls": [{"id": id, "type": "function",
                                "function": {"name": name, "arguments": arguments}}]}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4}});
            let typed = parse_bytes(&serde_json::to_vec(&body).unwrap());
            proptest::prop_assert_eq!(typed, Some(parse(&body)));
        }
    }

    #[test]
    fn the_typed_reader_counts_usage_as_the_general_one_does() {
        let usages = [
            json!({"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127}),
            json!({"prompt_tokens": 120, "completion_tokens": 7,
                   "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0}}),
            json!({"prompt_tokens": 120, "prompt_tokens_details": null}),
            json!({"prompt_tokens": 120, "prompt_tokens_details": {}}),
            json!({"prompt_tokens": null, "completion_tokens": 7}),
            json!({"prompt_tokens": 1.5, "completion_tokens": 7}),
            json!({"prompt_tokens": -3, "completion_tokens": 7}),
            json!({"prompt_tokens_details": {"cached_tokens": null}}),
            json!({}),
            json!(null),
            json!(5),
        ];
        for u in usages {
            let body = json!({"id": "r1", "choices": [{"message": {"content": "hi"}}], "usage": u});
            assert_eq!(read(&body).usage, parse(&body).unwrap().usage, "{u}");
        }
        let body = json!({"choices": [{"message": {"content": "hi"}}],
                          "usage": {"prompt_tokens": 120, "completion_tokens": 7,
                                    "prompt_tokens_details": {"cached_tokens": 64}}});
        let typed = parse_bytes(&serde_json::to_vec(&body).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                typed.usage.input_tokens,
                typed.usage.output_tokens,
                typed.usage.cached_tokens
            ),
            (120, 7, 64)
        );
    }

    #[test]
    fn streamed_calls_without_an_index_are_told_apart_by_their_ids() {
        let mut a = Assembler::default();
        let call = |id: Option<&str>, name: Option<&str>, args: &str| {
            let mut c = json!({"function": {"arguments": args}});
            if let Some(id) = id {
                c["id"] = json!(id);
            }
            if let Some(name) = name {
                c["function"]["name"] = json!(name);
            }
            json!({"choices": [{"delta": {"tool_calls": [c]}}]})
        };
        feed(&mut a, call(Some("c1"), Some("read_file"), "{\"path\":"));
        feed(&mut a, call(None, None, "\"a\"}"));
        feed(
            &mut a,
            call(Some("c2"), Some("read_file"), "{\"path\": \"b\"}"),
        );
        let r = Box::new(a).finish().unwrap();
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].arguments, json!({"path": "a"}));
        assert_eq!(r.tool_calls[1].id, "c2");
        assert_eq!(r.tool_calls[1].arguments, json!({"path": "b"}));
    }
}
