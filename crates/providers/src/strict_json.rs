//! The strict-JSON protocol, for models without native function calling.
//!
//! The tools are described in the system prompt (`protocol_prompt`: one line per tool and one
//! concrete example, never a schema), and the model must answer with exactly one JSON object
//! with the keys `action` (a tool name or `DONE`), `action_arguments` and `response`. A
//! request that offers no tools is passed on as it is and answered in plain text.
//! An action other than `DONE` becomes one tool call; `DONE`, a missing action, or an answer
//! that is not a JSON object ends the phase with the text. Only the model's *whole answer* is
//! ever parsed: JSON inside the user's messages, tool results, or prose around a JSON object is
//! never executed. Earlier tool calls are replayed to the model in the same JSON form, and tool
//! results as user messages naming the tool.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::decision::DONE_ACTION;
use crate::protocol_prompt::{next_example, protocol_tool_list};
use crate::wire::{AddressHasher, key, lock, shared_prefix};
use crate::{
    CallObserver, LlmRequest, LlmResponse, Message, Pricing, Provider, ProviderError, Role,
    ToolCall, ToolDefinition,
};

/// Wraps a provider so it speaks the strict-JSON protocol instead of native tool calls.
#[derive(Debug)]
pub struct StrictJsonProvider<P> {
    inner: P,
    calls: AtomicUsize,
    /// The last request's conversions, reused by the next estimate or call.
    conversions: Mutex<Conversions>,
}

impl<P: Provider> StrictJsonProvider<P> {
    /// Speak the protocol over `inner`.
    pub fn new(inner: P) -> Self {
        StrictJsonProvider {
            inner,
            calls: AtomicUsize::new(0),
            conversions: Mutex::default(),
        }
    }

    /// [`to_protocol_request`], converting only the messages the last request did not have.
    fn protocol_request(&self, request: &LlmRequest) -> LlmRequest {
        convert(request, &mut lock(&self.conversions))
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

/// The request the wrapped provider receives: no native tools, the protocol in the system
/// prompt (when tools are offered: without tools the model answers in plain text), earlier
/// calls and results rendered as text.
pub fn to_protocol_request(request: &LlmRequest) -> LlmRequest {
    convert(request, &mut Conversions::default())
}

/// What each message of the last request became under the protocol, by source message.
///
/// Without it every call made a new message of every earlier call and result, so the
/// wrapped provider's caches (its wire JSON, the body it sent last, its running token
/// counts), all keyed by the message's `Arc`, missed, and each call serialized the whole
/// history again: a long run was quadratic. With it an unchanged message converts to the
/// very `Arc` it became last time, and a call converts only its new messages.
#[derive(Default)]
struct Conversions {
    /// The tools offered when the entries were made, and their list as placed in the
    /// system prompt (made again only for other tools).
    tools: Vec<Arc<ToolDefinition>>,
    proto: String,
    /// Source message's address → what it became (the last request's messages only).
    entries: ByAddress,
}

/// Shows how many messages it keeps, never their text.
impl std::fmt::Debug for Conversions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversions")
            .field("tools", &self.tools.len())
            .field("messages", &self.entries.len())
            .finish()
    }
}

struct Conversion {
    /// Held, so its address is not reused while the entry lives.
    source: Arc<Message>,
    /// The tool a result was said to come from (from the call that asked for it, an
    /// earlier message that can change without this one changing).
    tool: Option<String>,
    converted: Arc<Message>,
}

type ByAddress = HashMap<usize, Conversion, BuildHasherDefault<AddressHasher>>;

/// `source` converted by `make`, or what it became last time (taken from `last`) when it is
/// the same message said to come from the same `tool`; either way kept in `next`.
fn reuse(
    last: &mut ByAddress,
    next: &mut ByAddress,
    source: &Arc<Message>,
    tool: Option<&str>,
    make: impl FnOnce() -> Message,
) -> Arc<Message> {
    let key = key(source);
    let entry = match last.remove(&key) {
        Some(c) if Arc::ptr_eq(&c.source, source) && c.tool.as_deref() == tool => c,
        _ => Conversion {
            source: Arc::clone(source),
            tool: tool.map(str::to_string),
            converted: Arc::new(make()),
        },
    };
    let converted = Arc::clone(&entry.converted);
    next.insert(key, entry);
    converted
}

/// [`to_protocol_request`], reusing the conversions of `cache` and keeping this request's.
fn convert(request: &LlmRequest, cache: &mut Conversions) -> LlmRequest {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    let task = request
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map_or("", |m| m.content.as_str());
    let Conversions {
        tools: kept_tools,
        proto: kept_proto,
        entries,
    } = cache;
    let same_tools = kept_tools.len() == request.tools.len()
        && shared_prefix(kept_tools, &request.tools) == kept_tools.len();
    if !same_tools || kept_proto.is_empty() {
        let proto = protocol_tool_list(&request.tools);
        if proto != *kept_proto {
            // The system prompt holds the tool list: another list, other conversions.
            entries.clear();
            *kept_proto = proto;
        }
        *kept_tools = request.tools.clone();
    }
    let proto = kept_proto.as_str();
    let mut last = std::mem::take(entries);
    let mut next = ByAddress::with_capacity_and_hasher(request.messages.len(), Default::default());
    let mut calls = Calls::default();
    let mut done = Vec::new();
    let mut placed = false;
    for m in &request.messages {
        match m.role {
            Role::System if !placed && !request.tools.is_empty() => {
                placed = true;
                messages.push(reuse(&mut last, &mut next, m, None, || {
                    Message::system(format!("{}\n\n{proto}", m.content))
                }));
            }
            Role::Assistant if !m.tool_calls.is_empty() => {
                calls.seen(m);
                messages.push(reuse(&mut last, &mut next, m, None, || replayed_calls(m)));
            }
            Role::Tool => {
                let called = calls.name_of(m);
                if let Some(name) = called
                    && !m.content.starts_with("Error:")
                {
                    done.push(name);
                }
                let name = called.unwrap_or("the tool");
                messages.push(reuse(&mut last, &mut next, m, Some(name), || {
                    Message::user(format!("Result of {name}:\n{}", m.content))
                }));
            }
            _ => messages.push(Arc::clone(m)),
        }
    }
    *entries = next;
    if !placed && !request.tools.is_empty() {
        messages.insert(0, Message::system(proto).into());
    }
    // The example comes last, right before the answer: a small model follows what it read
    // last far more than a system prompt, and the example shows the step due now.
    if !request.tools.is_empty()
        && let Some(example) = next_example(&request.tools, task, &done)
    {
        let text = format!("Example answer:\n{example}");
        match messages.last_mut() {
            Some(last) if last.role == Role::User => {
                // A copy (the conversion and the history keep theirs): the example is
                // for this call only.
                let last = Arc::make_mut(last);
                last.content = format!("{}\n\n{text}", last.content);
            }
            _ => messages.push(Message::user(text).into()),
        }
    }
    LlmRequest {
        messages,
        tools: Vec::new(),
        options: request.options.clone(),
    }
}

/// The assistant messages with tool calls met so far, in order: which tool a result answers.
#[derive(Default)]
struct Calls<'a> {
    seen: Vec<&'a Message>,
    /// Every call id of `seen[..indexed]` → its tool (the latest call wins), made only when
    /// a result does not answer the last message with calls.
    by_id: HashMap<&'a str, &'a str>,
    indexed: usize,
}

impl<'a> Calls<'a> {
    fn seen(&mut self, m: &'a Message) {
        self.seen.push(m);
    }

    /// The tool of the latest call met so far with `result`'s id.
    fn name_of(&mut self, result: &Message) -> Option<&'a str> {
        let id = result.tool_call_id.as_deref().unwrap_or("");
        // A result nearly always answers the last message with calls.
        let last = self.seen.last()?;
        if let Some(c) = last.tool_calls.iter().rev().find(|c| c.id == id) {
            return Some(c.name.as_str());
        }
        for m in &self.seen[self.indexed..] {
            for c in &m.tool_calls {
                self.by_id.insert(c.id.as_str(), c.name.as_str());
            }
        }
        self.indexed = self.seen.len();
        self.by_id.get(id).copied()
    }
}

/// An assistant message's tool calls as the protocol's JSON answers, one per line.
fn replayed_calls(m: &Message) -> Message {
    let calls: Vec<String> = m
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            // The order and spacing the grammar generates, like the example.
            format!(
                "{{\"action\": {}, \"action_arguments\": {}, \"response\": {}}}",
                json!(c.name),
                c.arguments,
                json!(if i == 0 { m.content.as_str() } else { "" })
            )
        })
        .collect();
    Message::assistant(calls.join("\n"), Vec::new())
}

/// The tools whose calls in `request`'s history succeeded (their result is not an error).
#[cfg(feature = "local")]
pub(crate) fn succeeded_tools(request: &LlmRequest) -> Vec<&str> {
    let mut calls = Calls::default();
    let mut done = Vec::new();
    for m in &request.messages {
        match m.role {
            Role::Assistant => calls.seen(m),
            Role::Tool if !m.content.starts_with("Error:") => {
                done.extend(calls.name_of(m));
            }
            _ => {}
        }
    }
    done
}

/// The model's answer read under the protocol. `call_number` makes call ids unique.
pub fn from_protocol_answer(mut response: LlmResponse, call_number: usize) -> LlmResponse {
    let raw = response.text.trim();
    let body = strip_fence(raw);
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(body) else {
        // Not one JSON object: the phase ends with the text as it is.
        response.tool_calls.clear();
        return response;
    };
    let said = obj
        .get("response")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let action = obj
        .get("action")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("");
    response.tool_calls.clear();
    if action.is_empty() || action.eq_ignore_ascii_case(DONE_ACTION) {
        response.text = said;
        return response;
    }
    let arguments = match obj.get("action_arguments") {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| json!(s)),
        Some(v) => v.clone(),
    };
    response.text = said;
    response.tool_calls.push(ToolCall {
        id: format!("json_call_{call_number}"),
        name: action.to_string(),
        arguments,
    });
    response
}

/// The JSON inside a Markdown code fence, or the text itself.
fn strip_fence(s: &str) -> &str {
    let Some(rest) = s.strip_prefix("```") else {
        return s;
    };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

#[async_trait::async_trait]
impl<P: Provider> Provider for StrictJsonProvider<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn context_window(&self) -> Option<u64> {
        self.inner.context_window()
    }

    fn pricing(&self) -> Option<Pricing> {
        self.inner.pricing()
    }

    fn estimate_prompt_tokens(&self, request: &LlmRequest) -> u64 {
        self.inner
            .estimate_prompt_tokens(&self.protocol_request(request))
    }

    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        self.complete_observed(request, &crate::NoObserver).await
    }

    async fn complete_observed(
        &self,
        request: &LlmRequest,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let answer = self
            .inner
            .complete_observed(&self.protocol_request(request), observer)
            .await?;
        if request.tools.is_empty() {
            // Nothing to call: the answer is plain text, whatever it looks like.
            return Ok(answer);
        }
        Ok(from_protocol_answer(answer, n))
    }
}

#[cfg(test)]
mod tests;
