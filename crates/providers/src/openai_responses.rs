//! OpenAI Responses (`POST {base_url}/responses`).
//!
//! The server keeps the conversation: a call that continues a context sends
//! `previous_response_id` and only what happened since that response (tool outputs, new user
//! messages); the system prompt goes in `instructions` every time, since it is not carried
//! over. `prompt_cache_key` and `prompt_cache_retention` are sent when given. When the server
//! no longer knows the previous response, [`crate::HttpProvider`] repeats the call once with
//! the full history (`chained = false`).

use serde::Serialize;
use serde_json::Value;

use crate::answer::{AnswerError, StreamAssembler, StreamError, parse_arguments};
use crate::endpoint::HttpProvider;
use crate::sse::SseEvent;
use crate::wire::{JsonString, KeptBody, lock};
use crate::{CallObserver, LlmRequest, LlmResponse, Message, ProviderEvent, Role, ToolCall, Usage};

/// The API's smallest accepted `max_output_tokens`.
pub(crate) const MIN_OUTPUT_TOKENS: u64 = 16;

/// One input item, borrowed from the request.
#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    Message {
        role: &'static str,
        content: &'a str,
    },
    Call {
        r#type: &'static str,
        call_id: &'a str,
        name: &'a str,
        arguments: JsonString<'a>,
    },
    Output {
        r#type: &'static str,
        call_id: &'a str,
        output: &'a str,
    },
}

/// Append `m`'s input items to `out`, joined by commas; none for a system message (it goes
/// in `instructions`) and none for an empty assistant text.
fn write_items(m: &Message, out: &mut Vec<u8>) {
    let item = |out: &mut Vec<u8>, i: Item<'_>| crate::wire::push_item(out, &i);
    match m.role {
        Role::System => {}
        Role::User => item(
            out,
            Item::Message {
                role: "user",
                content: &m.content,
            },
        ),
        Role::Assistant => {
            if !m.content.is_empty() {
                item(
                    out,
                    Item::Message {
                        role: "assistant",
                        content: &m.content,
                    },
                );
            }
            for c in &m.tool_calls {
                item(
                    out,
                    Item::Call {
                        r#type: "function_call",
                        call_id: &c.id,
                        name: &c.name,
                        arguments: JsonString(&c.arguments),
                    },
                );
            }
        }
        Role::Tool => item(
            out,
            Item::Output {
                r#type: "function_call_output",
                call_id: m.tool_call_id.as_deref().unwrap_or(""),
                output: &m.content,
            },
        ),
    }
}

#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    strict: bool,
}

/// The fields of a body other than its input and tools.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_response_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

/// The request body, serialized straight from the request (borrowed, never copied into a
/// `serde_json::Value` tree; each message's items and each tool made once, then copied from
/// the provider's [`WireCache`](crate::wire::WireCache)). With `chained` and a `previous_response_id`, only the
/// messages after the last assistant message are sent. It is built on the body `kept` from
/// the last call: the items of the messages both share are not written again (see
/// [`KeptBody`]).
pub(crate) fn body(
    p: &HttpProvider,
    request: &LlmRequest,
    stream: bool,
    chained: bool,
    kept: KeptBody,
) -> KeptBody {
    let instructions: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    let previous = request
        .options
        .previous_response_id
        .as_deref()
        .filter(|_| chained);
    let start = match previous {
        Some(_) => request
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
            .map_or(0, |i| i + 1),
        None => 0,
    };
    let rest = crate::wire::to_bytes(&Body {
        model: &p.model,
        instructions: (!instructions.is_empty()).then(|| instructions.join("\n\n")),
        previous_response_id: previous,
        tool_choice: (!request.tools.is_empty()).then_some("auto"),
        max_output_tokens: request
            .options
            .max_output_tokens
            .map(|max| max.max(MIN_OUTPUT_TOKENS)),
        prompt_cache_key: request.options.prompt_cache_key.as_deref(),
        prompt_cache_retention: request
            .options
            .prompt_cache_retention
            .as_deref()
            .or(p.prompt_cache_retention.as_deref()),
        stream,
    });
    let mut cache = lock(&p.wire);
    let mut kept = kept.reserve(p.body_capacity() + rest.len()).messages(
        b"{\"input\":[",
        &request.messages[start..],
        |m, out| cache.json(m, out, write_items),
    );
    let head = &mut kept.bytes;
    head.push(b']');
    if !request.tools.is_empty() {
        head.extend_from_slice(b",\"tools\":");
        cache.tools_array(&request.tools, head, |cache, json| {
            crate::wire::array(json, &request.tools, |t, out| {
                cache.json(t, out, |t, json| {
                    crate::wire::write(
                        json,
                        &Tool {
                            r#type: "function",
                            name: &t.name,
                            description: &t.description,
                            parameters: &t.parameters,
                            strict: false,
                        },
                    );
                })
            });
        });
    }
    drop(cache);
    p.remember_body_len(head.len() + rest.len());
    crate::wire::join_fields(head, &rest);
    kept
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
pub(crate) fn parse(v: &Value) -> Result<LlmResponse, AnswerError> {
    let output = v
        .get("output")
        .and_then(Value::as_array)
        .ok_or_else(|| AnswerError::missing("output array", v))?;
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
                let name =
                    item.get("name")
                        .and_then(Value::as_str)
                        .ok_or(AnswerError::NoToolName {
                            what: "function_call item",
                            index: i,
                        })?;
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

    fn finish(self: Box<Self>) -> Result<LlmResponse, AnswerError> {
        match &self.done {
            Some(r) => parse(r),
            None => Err(AnswerError::NotCompleted),
        }
    }
}
