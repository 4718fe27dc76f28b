//! OpenAI Responses (`POST {base_url}/responses`).
//!
//! The server keeps the conversation: a call that continues a context sends
//! `previous_response_id` and only what happened since that response (tool outputs, new user
//! messages); the system prompt goes in `instructions` every time, since it is not carried
//! over. `prompt_cache_key` and `prompt_cache_retention` are sent when given. When the server
//! no longer knows the previous response, [`crate::HttpProvider`] repeats the call once with
//! the full history (`chained = false`).

use serde_json::{Map, Value, json};

use crate::http::{HttpProvider, StreamAssembler, StreamError, excerpt, parse_arguments};
use crate::sse::SseEvent;
use crate::{CallObserver, LlmRequest, LlmResponse, Message, ProviderEvent, Role, ToolCall, Usage};

/// The API's smallest accepted `max_output_tokens`.
pub(crate) const MIN_OUTPUT_TOKENS: u64 = 16;

fn items(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    for m in messages {
        match m.role {
            Role::System => {}
            Role::User => out.push(json!({"role": "user", "content": m.content})),
            Role::Assistant => {
                if !m.content.is_empty() {
                    out.push(json!({"role": "assistant", "content": m.content}));
                }
                for c in &m.tool_calls {
                    out.push(json!({
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": c.arguments.to_string(),
                    }));
                }
            }
            Role::Tool => out.push(json!({
                "type": "function_call_output",
                "call_id": m.tool_call_id.clone().unwrap_or_default(),
                "output": m.content,
            })),
        }
    }
    out
}

/// The request body. With `chained` and a `previous_response_id`, only the messages after the
/// last assistant message are sent.
pub(crate) fn body(p: &HttpProvider, request: &LlmRequest, stream: bool, chained: bool) -> Value {
    let instructions: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    let previous = request
        .options
        .previous_response_id
        .as_ref()
        .filter(|_| chained);
    let input = match previous {
        Some(_) => {
            let start = request
                .messages
                .iter()
                .rposition(|m| m.role == Role::Assistant)
                .map_or(0, |i| i + 1);
            items(&request.messages[start..])
        }
        None => items(&request.messages),
    };
    let mut body = Map::new();
    body.insert("model".into(), json!(p.model));
    if !instructions.is_empty() {
        body.insert("instructions".into(), json!(instructions.join("\n\n")));
    }
    body.insert("input".into(), Value::Array(input));
    if let Some(id) = previous {
        body.insert("previous_response_id".into(), json!(id));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "name": t.name, "description": t.description,
                       "parameters": t.parameters, "strict": false})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
    }
    if let Some(max) = request.options.max_output_tokens {
        body.insert(
            "max_output_tokens".into(),
            json!(max.max(MIN_OUTPUT_TOKENS)),
        );
    }
    if let Some(key) = &request.options.prompt_cache_key {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    if let Some(r) = request
        .options
        .prompt_cache_retention
        .as_ref()
        .or(p.prompt_cache_retention.as_ref())
    {
        body.insert("prompt_cache_retention".into(), json!(r));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

fn usage(v: &Value) -> Usage {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cached_tokens: v
            .pointer("/input_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        cache_creation_tokens: 0,
    }
}

/// Read a response object (the non-streamed body, or `response.completed`'s `response`).
pub(crate) fn parse(v: &Value) -> Result<LlmResponse, String> {
    let output = v.get("output").and_then(Value::as_array).ok_or_else(|| {
        format!(
            "no output array in the answer: {}",
            excerpt(&v.to_string(), 300)
        )
    })?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (i, item) in output.iter().enumerate() {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if part.get("type").and_then(Value::as_str) == Some("output_text")
                        && let Some(t) = part.get("text").and_then(Value::as_str)
                    {
                        text.push_str(t);
                    }
                }
            }
            Some("function_call") => {
                let name = item
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("function_call item {i} has no name"))?;
                let id = item
                    .get("call_id")
                    .or_else(|| item.get("id"))
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("call_{i}"), String::from);
                tool_calls.push(ToolCall {
                    id,
                    name: name.to_string(),
                    arguments: parse_arguments(item.get("arguments").unwrap_or(&Value::Null)),
                });
            }
            _ => {} // reasoning and other items are not part of the conversation we keep
        }
    }
    Ok(LlmResponse {
        text,
        tool_calls,
        usage: v.get("usage").map(usage).unwrap_or_default(),
        response_id: v.get("id").and_then(Value::as_str).map(String::from),
    })
}

/// Forwards deltas; the final `response.completed` carries the whole response.
#[derive(Default)]
pub(crate) struct Assembler {
    done: Option<Value>,
}

impl StreamAssembler for Assembler {
    fn event(&mut self, ev: &SseEvent, observer: &dyn CallObserver) -> Result<bool, StreamError> {
        let v: Value = serde_json::from_str(ev.data.trim())
            .map_err(|e| StreamError::Malformed(format!("a stream event is not JSON ({e})")))?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        let index = v.get("output_index").and_then(Value::as_u64).unwrap_or(0) as usize;
        match kind {
            "response.output_text.delta" => {
                if let Some(d) = v.get("delta").and_then(Value::as_str) {
                    observer.on_event(ProviderEvent::TextDelta {
                        text: d.to_string(),
                    });
                }
            }
            "response.output_item.added" => {
                if let Some(item) = v.get("item")
                    && item.get("type").and_then(Value::as_str) == Some("function_call")
                {
                    observer.on_event(ProviderEvent::ToolCallStarted {
                        index,
                        id: item
                            .get("call_id")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        name: item
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                if let Some(d) = v.get("delta").and_then(Value::as_str) {
                    observer.on_event(ProviderEvent::ToolCallArgumentsDelta {
                        index,
                        delta: d.to_string(),
                    });
                }
            }
            "response.completed" | "response.incomplete" => {
                let r = v.get("response").cloned().ok_or_else(|| {
                    StreamError::Malformed(format!("{kind} without a response object"))
                })?;
                self.done = Some(r);
                return Ok(true);
            }
            "response.failed" => {
                let msg = v
                    .pointer("/response/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("the response failed without a message");
                return Err(StreamError::Server(msg.to_string()));
            }
            "error" => {
                let msg = v
                    .get("message")
                    .or_else(|| v.pointer("/error/message"))
                    .and_then(Value::as_str)
                    .unwrap_or("an error without a message");
                return Err(StreamError::Server(msg.to_string()));
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<LlmResponse, String> {
        match &self.done {
            Some(r) => parse(r),
            None => Err("the stream ended without response.completed".into()),
        }
    }
}
