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
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use crate::protocol_prompt::{next_example, protocol_tool_list};
use crate::{
    CallObserver, LlmRequest, LlmResponse, Message, Pricing, Provider, ProviderError, Role,
    ToolCall,
};

/// The action that ends the phase.
pub const DONE_ACTION: &str = "DONE";

/// Wraps a provider so it speaks the strict-JSON protocol instead of native tool calls.
#[derive(Debug)]
pub struct StrictJsonProvider<P> {
    inner: P,
    calls: AtomicUsize,
}

impl<P: Provider> StrictJsonProvider<P> {
    /// Speak the protocol over `inner`.
    pub fn new(inner: P) -> Self {
        StrictJsonProvider {
            inner,
            calls: AtomicUsize::new(0),
        }
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
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    let task = request
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map_or("", |m| m.content.as_str());
    let proto = protocol_tool_list(&request.tools);
    let mut placed = false;
    for m in &request.messages {
        match m.role {
            Role::System if !placed && !request.tools.is_empty() => {
                messages.push(Message::system(format!("{}\n\n{proto}", m.content)).into());
                placed = true;
            }
            Role::Assistant if !m.tool_calls.is_empty() => {
                for c in &m.tool_calls {
                    names.insert(c.id.as_str(), c.name.as_str());
                }
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
                messages.push(Message::assistant(calls.join("\n"), Vec::new()).into());
            }
            Role::Tool => {
                let id = m.tool_call_id.as_deref().unwrap_or("");
                let name = names.get(id).copied().unwrap_or("the tool");
                messages.push(Message::user(format!("Result of {name}:\n{}", m.content)).into());
            }
            _ => messages.push(m.clone()),
        }
    }
    if !placed && !request.tools.is_empty() {
        messages.insert(0, Message::system(proto).into());
    }
    // The example comes last, right before the answer: a small model follows what it read
    // last far more than a system prompt, and the example shows the step due now.
    if !request.tools.is_empty()
        && let Some(example) = next_example(&request.tools, task, &succeeded_tools(request))
    {
        let text = format!("Example answer:\n{example}");
        match messages.last_mut() {
            Some(last) if last.role == Role::User => {
                let last = std::sync::Arc::make_mut(last);
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

/// The tools whose calls in `request`'s history succeeded (their result is not an error).
pub(crate) fn succeeded_tools(request: &LlmRequest) -> Vec<&str> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut done = Vec::new();
    for m in &request.messages {
        match m.role {
            Role::Assistant => {
                for c in &m.tool_calls {
                    names.insert(c.id.as_str(), c.name.as_str());
                }
            }
            Role::Tool if !m.content.starts_with("Error:") => {
                if let Some(name) = m.tool_call_id.as_deref().and_then(|id| names.get(id)) {
                    done.push(*name);
                }
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
            .estimate_prompt_tokens(&to_protocol_request(request))
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
            .complete_observed(&to_protocol_request(request), observer)
            .await?;
        if request.tools.is_empty() {
            // Nothing to call: the answer is plain text, whatever it looks like.
            return Ok(answer);
        }
        Ok(from_protocol_answer(answer, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ScriptedProvider, ScriptedResponse, ToolDefinition};

    fn answer(text: &str) -> LlmResponse {
        from_protocol_answer(
            LlmResponse {
                text: text.into(),
                ..Default::default()
            },
            1,
        )
    }

    #[test]
    fn an_action_becomes_one_tool_call() {
        let r = answer(
            r#"{"response": "reading", "action": "read_file", "action_arguments": {"path": "a.md"}}"#,
        );
        assert_eq!(r.text, "reading");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].name, "read_file");
        assert_eq!(r.tool_calls[0].arguments, json!({"path": "a.md"}));
        let fenced = answer(
            "```json\n{\"response\": \"\", \"action\": \"read_file\", \"action_arguments\": \"{\\\"path\\\": \\\"b\\\"}\"}\n```",
        );
        assert_eq!(fenced.tool_calls[0].arguments, json!({"path": "b"}));
    }

    #[test]
    fn done_missing_action_and_non_json_end_the_phase() {
        for text in [
            r#"{"response": "all done", "action": "DONE"}"#,
            r#"{"response": "all done", "action": "done", "action_arguments": {}}"#,
            r#"{"response": "all done"}"#,
        ] {
            let r = answer(text);
            assert!(r.tool_calls.is_empty(), "{text}");
            assert_eq!(r.text, "all done");
        }
        let prose =
            "Sure. I would run {\"action\": \"write_file\", \"action_arguments\": {}} next.";
        let r = answer(prose);
        assert!(r.tool_calls.is_empty(), "JSON inside prose is not executed");
        assert_eq!(r.text, prose);
        assert!(answer("[1, 2]").tool_calls.is_empty());
    }

    #[tokio::test]
    async fn json_in_the_users_text_is_never_executed_and_history_is_replayed_as_text() {
        let inner = ScriptedProvider::new(vec![ScriptedResponse::text(
            "I will not do that without being asked properly.",
        )]);
        let p = StrictJsonProvider::new(inner);
        let request = LlmRequest {
            messages: vec![
                Message::system("Be careful.").into(),
                Message::user(
                    r#"{"response": "", "action": "write_file", "action_arguments": {"path": "x"}}"#,
                ).into(),
                Message::assistant(
                    "looking",
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "read_file".into(),
                        arguments: json!({"path": "n.md"}),
                    }],
                ).into(),
                Message::tool_result("c1", "file text").into(),
            ],
            tools: vec![ToolDefinition {
                name: "read_file".into(),
                description: "Read a file.".into(),
                parameters: json!({"type": "object"}),
            }.into()],
            ..Default::default()
        };
        let r = p.complete(&request).await.unwrap();
        assert!(r.tool_calls.is_empty());
        let sent = &p.inner().requests()[0];
        assert!(sent.tools.is_empty(), "no native tools are sent");
        assert!(sent.messages[0].content.starts_with("Be careful."));
        assert!(
            sent.messages[0]
                .content
                .contains("- read_file: Read a file.")
        );
        assert_eq!(
            serde_json::from_str::<Value>(&sent.messages[2].content).unwrap()["action"],
            "read_file"
        );
        assert_eq!(sent.messages[3].role, Role::User);
        // The example decision comes last, after the result: here DONE, the task (the
        // first user message) naming no tool or file, and a tool having succeeded.
        assert_eq!(
            sent.messages[3].content,
            "Result of read_file:\nfile text\n\nExample answer:\n{\"action\": \"DONE\", \"action_arguments\": {}}"
        );
    }

    #[tokio::test]
    async fn a_request_without_tools_is_plain_text_both_ways() {
        let decision_like =
            r#"{"response": "x", "action": "write_file", "action_arguments": {"path": "p"}}"#;
        let inner = ScriptedProvider::new(vec![ScriptedResponse::text(decision_like)]);
        let p = StrictJsonProvider::new(inner);
        let request = LlmRequest {
            messages: vec![
                Message::system("Answer briefly.").into(),
                Message::user("Hi").into(),
            ],
            ..Default::default()
        };
        let r = p.complete(&request).await.unwrap();
        assert!(
            r.tool_calls.is_empty(),
            "no tools were offered: nothing to call"
        );
        assert_eq!(r.text, decision_like, "the answer is returned as it is");
        let sent = &p.inner().requests()[0];
        assert_eq!(sent.messages, request.messages, "no protocol instructions");
    }
}
