//! OpenAI Chat Completions (`POST {base_url}/chat/completions`), also spoken by Ollama, vLLM,
//! llama.cpp's server, LM Studio and OpenRouter.
//!
//! Tools are offered as `{"type": "function", "function": {...}}` with `tool_choice: "auto"`;
//! the model may ask for several calls at once; each result goes back as a `tool` message
//! carrying its call id. Arguments arrive as a JSON string and are parsed.

use serde_json::{Map, Value, json};

use crate::config::ProviderKind;
use crate::http::{HttpProvider, StreamAssembler, StreamError, parse_arguments};
use crate::sse::SseEvent;
use crate::{CallObserver, LlmRequest, LlmResponse, ProviderEvent, Role, ToolCall, Usage};

/// The request body.
pub(crate) fn body(p: &HttpProvider, request: &LlmRequest, stream: bool) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| match m.role {
            Role::System => json!({"role": "system", "content": m.content}),
            Role::User => json!({"role": "user", "content": m.content}),
            Role::Assistant => {
                let mut msg = Map::new();
                msg.insert("role".into(), json!("assistant"));
                msg.insert(
                    "content".into(),
                    if m.content.is_empty() && !m.tool_calls.is_empty() {
                        Value::Null
                    } else {
                        json!(m.content)
                    },
                );
                if !m.tool_calls.is_empty() {
                    let calls: Vec<Value> = m
                        .tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments.to_string()},
                            })
                        })
                        .collect();
                    msg.insert("tool_calls".into(), Value::Array(calls));
                }
                Value::Object(msg)
            }
            Role::Tool => json!({
                "role": "tool",
                "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
                "content": m.content,
            }),
        })
        .collect();
    let mut body = Map::new();
    body.insert("model".into(), json!(p.model));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
    }
    if let Some(max) = request.options.max_output_tokens {
        // OpenAI's current name; compatible servers know the older one.
        let key = if p.kind == ProviderKind::OpenAi {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body.insert(key.into(), json!(max));
    }
    if p.kind == ProviderKind::OpenAi {
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
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
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

/// Read a non-streamed answer.
pub(crate) fn parse(v: &Value) -> Result<LlmResponse, String> {
    let message = v.pointer("/choices/0/message").ok_or_else(|| {
        format!(
            "no choices[0].message in the answer: {}",
            crate::http::excerpt(&v.to_string(), 300)
        )
    })?;
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
                .ok_or_else(|| format!("tool call {i} has no function name"))?;
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

    fn finish(self: Box<Self>) -> Result<LlmResponse, String> {
        let mut tool_calls = Vec::new();
        for (i, c) in self.calls.into_iter().enumerate() {
            if c.name.is_empty() {
                return Err(format!("streamed tool call {i} has no name"));
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

    fn feed(a: &mut Assembler, data: Value) {
        let ev = SseEvent {
            event: String::new(),
            data: data.to_string(),
        };
        a.event(&ev, &CollectingObserver::default()).unwrap();
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
