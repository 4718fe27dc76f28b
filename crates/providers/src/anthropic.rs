//! Anthropic Messages (`POST {base_url}/messages`, `anthropic-version: 2023-06-01`).
//!
//! System messages become the top-level `system` blocks; tool calls are `tool_use` blocks in
//! assistant turns and their results `tool_result` blocks in the next user turn (consecutive
//! turns of one role are merged, as the API wants them alternating). The stable prefix — tool
//! definitions and the system prompt — carries `cache_control` so later calls read it from the
//! cache. Usage counts cache reads and writes; `input_tokens` here includes both.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::answer::{AnswerError, StreamAssembler, StreamError, parse_arguments};
use crate::endpoint::HttpProvider;
use crate::sse::SseEvent;
use crate::wire::{KeptBody, Written, lock};
use crate::{
    CallObserver, LlmRequest, LlmResponse, Message, ProviderEvent, Role, ToolCall, ToolDefinition,
    Usage,
};

/// `max_tokens` is required by this API; used when the harness sets no cap.
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 4096;

/// `{"type": "ephemeral"}`: a prompt-cache breakpoint.
#[derive(Serialize)]
struct Ephemeral {
    r#type: &'static str,
}

const EPHEMERAL: Ephemeral = Ephemeral {
    r#type: "ephemeral",
};

/// One content block, borrowed from the request.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<Ephemeral>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Input<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// A tool call's arguments: the object itself, `{}` for anything else.
struct Input<'a>(&'a Value);

impl Serialize for Input<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(o) => o.serialize(s),
            _ => Map::new().serialize(s),
        }
    }
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

#[derive(Serialize)]
struct ToolChoice {
    r#type: &'static str,
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<WireBlock<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

/// The request body, serialized straight from the request (borrowed, never copied into a
/// `serde_json::Value` tree), built on the body `kept` from the last call: the turns of the
/// messages both share are not written again (see [`KeptBody`]).
pub(crate) fn body(
    p: &HttpProvider,
    request: &LlmRequest,
    stream: bool,
    kept: KeptBody,
) -> KeptBody {
    let mut system: Vec<WireBlock<'_>> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System && !m.content.is_empty())
        .map(|m| WireBlock::Text {
            text: &m.content,
            cache_control: None,
        })
        .collect();
    // The system prompt (first block) closes the stable prefix: tools + system prompt.
    if let Some(WireBlock::Text { cache_control, .. }) = system.first_mut() {
        *cache_control = Some(EPHEMERAL);
    }

    let n = request.tools.len();
    let rest = crate::wire::to_bytes(&Body {
        model: &p.model,
        max_tokens: request
            .options
            .max_output_tokens
            .unwrap_or(DEFAULT_MAX_TOKENS),
        system,
        tool_choice: (n > 0).then_some(ToolChoice { r#type: "auto" }),
        stream,
    });
    let mut cache = lock(&p.wire);
    // Consecutive messages of one role are one turn (tool results answer as the user).
    let (mut kept, written) = kept.reserve(p.body_capacity() + rest.len()).messages_with(
        b"{\"messages\":[",
        &request.messages,
        |m, head, written| {
            let role = match m.role {
                Role::System => return,
                Role::User | Role::Tool => "user",
                Role::Assistant => "assistant",
            };
            let mark = head.len();
            if *written == Written::Turn(role) {
                head.push(b',');
            } else {
                if *written != Written::Nothing {
                    head.extend_from_slice(b"]},");
                }
                head.extend_from_slice(b"{\"role\":\"");
                head.extend_from_slice(role.as_bytes());
                head.extend_from_slice(b"\",\"content\":[");
            }
            if cache.json(m, head, write_blocks) {
                *written = Written::Turn(role);
            } else {
                head.truncate(mark);
            }
        },
    );
    let head = &mut kept.bytes;
    if written != Written::Nothing {
        head.extend_from_slice(b"]}");
    }
    head.push(b']');
    if n > 0 {
        head.extend_from_slice(b",\"tools\":");
        cache.tools_array(&request.tools, head, |cache, json| {
            json.push(b'[');
            for (i, t) in request.tools.iter().enumerate() {
                if i > 0 {
                    json.push(b',');
                }
                if i + 1 == n {
                    // The last tool carries the cache marker: not kept as the tool's own
                    // JSON (only in this array, for these tools).
                    crate::wire::write(json, &wire_tool(t, Some(EPHEMERAL)));
                } else {
                    cache.json(t, json, |t, json| {
                        crate::wire::write(json, &wire_tool(t, None));
                    });
                }
            }
            json.push(b']');
        });
    }
    drop(cache);
    p.remember_body_len(head.len() + rest.len());
    crate::wire::join_fields(head, &rest);
    kept
}

fn wire_tool(t: &ToolDefinition, cache_control: Option<Ephemeral>) -> Tool<'_> {
    Tool {
        name: &t.name,
        description: &t.description,
        input_schema: &t.parameters,
        cache_control,
    }
}

/// Append `m`'s content blocks to `out`, joined by commas (none for an empty text).
fn write_blocks(m: &Message, out: &mut Vec<u8>) {
    let block = |out: &mut Vec<u8>, b: WireBlock<'_>| crate::wire::push_item(out, &b);
    match m.role {
        Role::System => {}
        Role::User => {
            if !m.content.is_empty() {
                block(
                    out,
                    WireBlock::Text {
                        text: &m.content,
                        cache_control: None,
                    },
                );
            }
        }
        Role::Assistant => {
            if !m.content.is_empty() {
                block(
                    out,
                    WireBlock::Text {
                        text: &m.content,
                        cache_control: None,
                    },
                );
            }
            for c in &m.tool_calls {
                block(
                    out,
                    WireBlock::ToolUse {
                        id: &c.id,
                        name: &c.name,
                        input: Input(&c.arguments),
                    },
                );
            }
        }
        Role::Tool => block(
            out,
            WireBlock::ToolResult {
                tool_use_id: m.tool_call_id.as_deref().unwrap_or(""),
                content: &m.content,
                is_error: m.content.starts_with("Error: "),
            },
        ),
    }
}

/// Usage: `input_tokens` here is the uncached part; ours includes cache reads and writes.
fn usage(v: &Value) -> Usage {
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let read = n("cache_read_input_tokens");
    let written = n("cache_creation_input_tokens");
    Usage {
        input_tokens: n("input_tokens") + read + written,
        output_tokens: n("output_tokens"),
        cached_tokens: read,
        cache_creation_tokens: written,
    }
}

/// Read a non-streamed answer.
pub(crate) fn parse(v: &Value) -> Result<LlmResponse, AnswerError> {
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| AnswerError::missing("content array", v))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (i, block) in content.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => {
                let name =
                    block
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or(AnswerError::NoToolName {
                            what: "tool_use block",
                            index: i,
                        })?;
                tool_calls.push(ToolCall {
                    id: block
                        .get("id")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("toolu_{i}"), String::from),
                    name: name.to_string(),
                    arguments: parse_arguments(block.get("input").unwrap_or(&Value::Null)),
                });
            }
            _ => {} // thinking and other blocks
        }
    }
    Ok(LlmResponse {
        text,
        tool_calls,
        usage: v.get("usage").map(usage).unwrap_or_default(),
        response_id: v.get("id").and_then(Value::as_str).map(String::from),
    })
}

enum Block {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
        input: Value,
    },
    Other,
}

/// Assembles `message_start`, `content_block_*`, `message_delta`, `message_stop`.
#[derive(Default)]
pub(crate) struct Assembler {
    id: Option<String>,
    usage: Value,
    blocks: Vec<Block>,
    tools_seen: usize,
}

impl StreamAssembler for Assembler {
    fn event(&mut self, ev: &SseEvent, observer: &dyn CallObserver) -> Result<bool, StreamError> {
        let v: Value = serde_json::from_str(ev.data.trim())
            .map_err(|e| StreamError::Malformed(format!("a stream event is not JSON ({e})")))?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        match kind {
            "message_start" => {
                self.id = v
                    .pointer("/message/id")
                    .and_then(Value::as_str)
                    .map(String::from);
                if let Some(u) = v.pointer("/message/usage") {
                    self.usage = u.clone();
                }
            }
            "content_block_start" => {
                let b = v.get("content_block").unwrap_or(&Value::Null);
                let block = match b.get("type").and_then(Value::as_str) {
                    Some("text") => Block::Text(
                        b.get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    ),
                    Some("tool_use") => {
                        let id = b
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        let name = b
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string();
                        observer.on_event(ProviderEvent::ToolCallStarted {
                            index: self.tools_seen,
                            id: id.clone(),
                            name: name.clone(),
                        });
                        self.tools_seen += 1;
                        Block::Tool {
                            id,
                            name,
                            json: String::new(),
                            input: b.get("input").cloned().unwrap_or(Value::Null),
                        }
                    }
                    _ => Block::Other,
                };
                self.blocks.push(block);
            }
            "content_block_delta" => {
                let d = v.get("delta").unwrap_or(&Value::Null);
                let tool_index = self.tools_seen.saturating_sub(1);
                match (
                    self.blocks.last_mut(),
                    d.get("type").and_then(Value::as_str),
                ) {
                    (Some(Block::Text(t)), Some("text_delta")) => {
                        let piece = d.get("text").and_then(Value::as_str).unwrap_or("");
                        t.push_str(piece);
                        observer.on_event(ProviderEvent::TextDelta {
                            text: piece.to_string(),
                        });
                    }
                    (Some(Block::Tool { json, .. }), Some("input_json_delta")) => {
                        let piece = d.get("partial_json").and_then(Value::as_str).unwrap_or("");
                        json.push_str(piece);
                        observer.on_event(ProviderEvent::ToolCallArgumentsDelta {
                            index: tool_index,
                            delta: piece.to_string(),
                        });
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let (Some(Value::Object(u)), Value::Object(total)) =
                    (v.get("usage"), &mut self.usage)
                {
                    for (k, val) in u {
                        total.insert(k.clone(), val.clone());
                    }
                } else if let Some(u) = v.get("usage") {
                    self.usage = u.clone();
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let msg = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("an error without a message");
                return Err(StreamError::Server(msg.to_string()));
            }
            _ => {} // ping, content_block_stop
        }
        Ok(false)
    }

    fn finish(self: Box<Self>) -> Result<LlmResponse, AnswerError> {
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for (i, b) in self.blocks.into_iter().enumerate() {
            match b {
                Block::Text(t) => text.push_str(&t),
                Block::Tool {
                    id,
                    name,
                    json,
                    input,
                } => {
                    let arguments = if json.is_empty() {
                        parse_arguments(&input)
                    } else {
                        serde_json::from_str(&json).map_err(|e| AnswerError::InputNotJson {
                            index: i,
                            message: e.to_string(),
                        })?
                    };
                    tool_calls.push(ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
                Block::Other => {}
            }
        }
        Ok(LlmResponse {
            text,
            tool_calls,
            usage: usage(&self.usage),
            response_id: self.id,
        })
    }
}
