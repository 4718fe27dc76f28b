//! The tool-call format a model was trained on, for models whose chat template has one.
//!
//! Qwen2.5's instruction-tuned models (and other ChatML models tuned the same way) learned
//! one way of calling tools: the tools' JSON signatures inside `<tools></tools>` in the system
//! turn, a call written as `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, a
//! result given back in a user turn inside `<tool_response></tool_response>`, and a final
//! answer as plain text. A small model follows its own format far better than a protocol it
//! reads about for the first time (measured: docs/PERFORMANCE.md, "eval-local").
//!
//! What the model writes is still held by a grammar, only later: the answer starts free, and
//! the moment the model writes the `<tool_call>` token the rest is generated under the call
//! schema ([`call_schema_text`]): one offered tool, with arguments valid for it. Text without
//! that token is the final answer.
//!
//! `<tool_call>` and `</tool_call>` are single tokens. They are written into the prompt by id
//! (the chat template maps [`CALL_OPEN`] and [`CALL_CLOSE`] to them), never read from text:
//! a file that spells `<tool_call>` out stays plain text to the model.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::protocol_prompt::spaced;
use crate::{LlmRequest, LlmResponse, Role, ToolCall, ToolDefinition, grammar_ready_schema};

/// Stands for the `<tool_call>` token in a turn's text (a private-use character).
pub const CALL_OPEN: char = '\u{E000}';
/// Stands for the `</tool_call>` token in a turn's text.
pub const CALL_CLOSE: char = '\u{E001}';

/// What replaces a marker character found in text that came from outside (a file, a tool's
/// result): only the template writes markers.
const REPLACEMENT: &str = "\u{FFFD}";

/// `text` with any marker character replaced, so that only the template writes markers.
fn inert(text: &str) -> String {
    if text.contains([CALL_OPEN, CALL_CLOSE]) {
        text.replace([CALL_OPEN, CALL_CLOSE], REPLACEMENT)
    } else {
        text.to_string()
    }
}

/// The conversation in the trained format, as (role, content) turns for the chat template.
pub fn native_messages(request: &LlmRequest) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(request.messages.len() + 1);
    let tools = (!request.tools.is_empty()).then(|| tools_block(&request.tools));
    let mut placed = false;
    for m in &request.messages {
        match m.role {
            Role::System if !placed => {
                let text = match &tools {
                    Some(tools) => format!("{}\n\n{tools}", inert(&m.content)),
                    None => inert(&m.content),
                };
                out.push(("system".into(), text));
                placed = true;
            }
            Role::System | Role::User => {
                out.push((role_name(m.role).into(), inert(&m.content)));
            }
            Role::Assistant => {
                let mut text = inert(&m.content);
                for call in &m.tool_calls {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push(CALL_OPEN);
                    text.push('\n');
                    text.push_str(&inert(&call_json(&call.name, &call.arguments)));
                    text.push('\n');
                    text.push(CALL_CLOSE);
                }
                out.push(("assistant".into(), text));
            }
            Role::Tool => {
                let result = format!("<tool_response>\n{}\n</tool_response>", inert(&m.content));
                // Results of one turn's calls go together in one user turn, as trained.
                match out.last_mut() {
                    Some((role, content))
                        if role == "user" && content.ends_with("</tool_response>") =>
                    {
                        content.push('\n');
                        content.push_str(&result);
                    }
                    _ => out.push(("user".into(), result)),
                }
            }
        }
    }
    if !placed && let Some(tools) = tools {
        out.insert(0, ("system".into(), tools));
    }
    out
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::Assistant => "assistant",
        Role::User | Role::Tool => "user",
    }
}

/// `{"name": "...", "arguments": {...}}` with the separators the model writes.
fn call_json(name: &str, arguments: &Value) -> String {
    format!(
        "{{\"name\": {}, \"arguments\": {}}}",
        json!(name),
        spaced(arguments)
    )
}

/// The system prompt's tool section: each tool's name and the schema of its required
/// arguments ([`small_schema`]), without any description: a small model pastes what it
/// reads there in as a value (a summary that is the tool's description, seen in
/// `eval-local`), and a file tool's name says what it does.
fn tools_block(tools: &[Arc<ToolDefinition>]) -> String {
    let mut s = String::from(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    );
    for t in tools {
        let signature = json!({
            "type": "function",
            "function": {
                "name": t.name,
                "parameters": small_schema(&t.parameters),
            }
        });
        s.push('\n');
        s.push_str(&inert(&spaced(&signature)));
    }
    // The template's `<tool_call>` tags are the call tokens themselves (markers here).
    s.push_str(&format!(
        "\n</tools>\n\nFor each function call, return a json object with function name and \
         arguments within {CALL_OPEN}{CALL_CLOSE} XML tags:\n{CALL_OPEN}\n{{\"name\": \
         <function-name>, \"arguments\": <args-json-object>}}\n{CALL_CLOSE}"
    ));
    s
}

/// A tool's argument schema as a small model sees it and the grammar holds it: the
/// required arguments only (an optional one is an invitation to invent a value: a line
/// range that cuts a file short, a mode string of its own), without descriptions.
fn small_schema(parameters: &Value) -> Value {
    let mut schema = without_descriptions(&grammar_ready_schema(parameters), false);
    let required: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.retain(|name, _| required.contains(name));
    }
    schema
}

/// `schema` without `description`, `title` and `examples` at any depth. `in_properties`: the
/// keys of this object are property names, not schema keywords, and are all kept.
fn without_descriptions(schema: &Value, in_properties: bool) -> Value {
    match schema {
        Value::Object(map) => {
            let kept: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| {
                    in_properties || !matches!(k.as_str(), "description" | "title" | "examples")
                })
                .map(|(k, v)| {
                    let nested = !in_properties && (k == "properties" || k == "$defs");
                    (k.clone(), without_descriptions(v, nested))
                })
                .collect();
            Value::Object(kept)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| without_descriptions(v, false))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The schema of what follows `<tool_call>`: a newline, then one call of an offered tool with
/// arguments valid for it (keys `name` then `arguments`). Written out by hand so the key order
/// is the trained one whatever the JSON map's order.
pub fn call_schema_text(tools: &[Arc<ToolDefinition>]) -> String {
    let branches: Vec<String> = tools
        .iter()
        .map(|t| {
            format!(
                "{{\"type\":\"object\",\"properties\":{{\"name\":{{\"const\":{}}},\"arguments\":{}}},\
                 \"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}}",
                json!(t.name),
                small_schema(&t.parameters)
            )
        })
        .collect();
    format!("{{\"oneOf\":[{}]}}", branches.join(","))
}

/// Whether a token may open a final answer written as prose: its text starts (after spaces)
/// with a letter or digit. Code fences, braces and tags may not: a model that opens with one
/// is writing its call as text instead of with the call token.
pub fn opens_prose(token_text: &[u8]) -> bool {
    token_text
        .iter()
        .find(|b| **b != b' ')
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b >= 0x80)
}

/// Whether a final answer (no tool offered) is a call of one of `tools` written out as JSON
/// text (`{"name": ..., "arguments": ...}`, perhaps in a code fence) rather than an answer.
/// The same shape with another name is the model's way of stating what it found
/// (`{"name": "demo", "arguments": {"port": 8421}}`), and stays the answer.
pub fn is_call_text(text: &str, tools: &[&str]) -> bool {
    let body = text
        .trim()
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    serde_json::from_str::<Value>(body).is_ok_and(|v| {
        v.get("name")
            .and_then(Value::as_str)
            .is_some_and(|name| tools.contains(&name))
            && v.get("arguments").is_some()
    })
}

/// The model's answer read back: text before a `<tool_call>` is the response's text, the
/// JSON after it the call. `text` holds the call's opening as [`CALL_OPEN`]. An answer
/// without a call is a final answer. `call_number` makes call ids unique.
pub fn from_native_answer(mut response: LlmResponse, call_number: usize) -> LlmResponse {
    response.tool_calls.clear();
    let text = std::mem::take(&mut response.text);
    let (before, call) = match text.split_once(CALL_OPEN) {
        Some(parts) => parts,
        // The call written without its token: the answer is the call's JSON alone.
        None if text.trim_start().starts_with('{') => ("", text.as_str()),
        None => {
            response.text = text;
            return response;
        }
    };
    let body = call.split(CALL_CLOSE).next().unwrap_or("").trim();
    let parsed: Option<(String, Value)> =
        serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| match v {
                Value::Object(mut obj) => {
                    let name = obj.get("name")?.as_str()?.to_string();
                    let arguments = obj.remove("arguments").unwrap_or_else(|| json!({}));
                    Some((name, arguments))
                }
                _ => None,
            });
    let before = before.trim().to_string();
    match parsed {
        Some((name, arguments)) => {
            response.text = before;
            response.tool_calls.push(ToolCall {
                id: format!("native_call_{call_number}"),
                name,
                arguments,
            });
        }
        // Cut off inside the call (the token limit): what was said before it is the answer.
        None => response.text = before,
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, Usage};

    fn tool(name: &str) -> Arc<ToolDefinition> {
        Arc::new(ToolDefinition {
            name: name.into(),
            description: "Write a file.\n\nLong details the model need not read.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file to write, absolute or relative to the working directory."},
                    "description": {"type": "string", "description": "The complete new content of the file."},
                    "start_line": {"type": "integer"}
                },
                "required": ["path", "description"]
            }),
        })
    }

    fn request(messages: Vec<Message>) -> LlmRequest {
        LlmRequest {
            messages: messages.into_iter().map(Arc::new).collect(),
            tools: vec![tool("write_file")],
            options: crate::CallOptions::default(),
        }
    }

    #[test]
    fn the_tool_list_shows_no_schema_description_but_keeps_a_property_named_description() {
        let r = request(vec![Message::system("Be careful."), Message::user("Go.")]);
        let turns = native_messages(&r);
        let system = &turns[0].1;
        assert!(system.starts_with("Be careful.\n\n# Tools"), "{system}");
        assert!(!system.contains("The file to write"), "{system}");
        assert!(!system.contains("complete new content"), "{system}");
        assert!(!system.contains("Long details"), "{system}");
        assert!(!system.contains("Write a file"), "{system}");
        assert!(
            !system.contains("start_line"),
            "optional arguments are not offered: {system}"
        );
        assert!(
            system.contains("\"description\": {\"type\": \"string\"}"),
            "{system}"
        );
        assert!(system.contains("\"name\": \"write_file\""), "{system}");
    }

    #[test]
    fn calls_and_results_are_written_as_trained_and_markers_only_by_the_template() {
        let call = ToolCall {
            id: "c1".into(),
            name: "write_file".into(),
            arguments: json!({"path": "a.txt", "description": "x"}),
        };
        let r = request(vec![
            Message::system("S"),
            Message::user(format!("Task {CALL_OPEN} spelled")),
            Message::assistant("", vec![call]),
            Message::tool_result("c1", "Wrote 1 byte"),
        ]);
        let turns = native_messages(&r);
        assert_eq!(turns[1].1, "Task \u{FFFD} spelled");
        assert_eq!(
            turns[2].1,
            format!(
                "{CALL_OPEN}\n{{\"name\": \"write_file\", \"arguments\": {{\"description\": \"x\", \"path\": \"a.txt\"}}}}\n{CALL_CLOSE}"
            )
            .replace("{\"description\": \"x\", \"path\": \"a.txt\"}", &spaced(&json!({"path": "a.txt", "description": "x"})))
        );
        assert_eq!(
            turns[3],
            (
                "user".to_string(),
                "<tool_response>\nWrote 1 byte\n</tool_response>".to_string()
            )
        );
    }

    #[test]
    fn the_call_schema_lists_name_before_arguments_for_each_tool() {
        let text = call_schema_text(&[tool("write_file"), tool("read_file")]);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["oneOf"].as_array().unwrap().len(), 2);
        let name_at = text.find("\"name\":{\"const\":\"write_file\"}").unwrap();
        let args_at = text.find("\"arguments\"").unwrap();
        assert!(name_at < args_at, "{text}");
        assert!(!text.contains("The file to write"), "{text}");
        assert!(!text.contains("start_line"), "{text}");
    }

    #[test]
    fn prose_opens_with_a_letter_or_digit_never_a_fence_or_brace() {
        for ok in ["The", " port", "8421", "DONE", " Équipe"] {
            assert!(opens_prose(ok.as_bytes()), "{ok}");
        }
        for bad in ["```", "{", " {\"", "<", "[", "", "  ", "\n"] {
            assert!(!opens_prose(bad.as_bytes()), "{bad:?}");
        }
    }

    #[test]
    fn a_call_written_as_text_is_told_from_an_answer() {
        let tools = ["query_and_synthesize", "read_file"];
        let call = "{\"name\": \"query_and_synthesize\", \"arguments\": {\"query\": \"m\"}}";
        assert!(is_call_text(call, &tools));
        let fenced = "```json\n{\"name\": \"read_file\", \"arguments\": {}}\n```";
        assert!(is_call_text(fenced, &tools));
        let found = "{\"name\": \"demo\", \"arguments\": {\"port\": 8421}}";
        assert!(!is_call_text(found, &tools));
        assert!(!is_call_text("{\"port\": 8421}", &tools));
        assert!(!is_call_text("The mascot is Pinchy.", &tools));
    }

    fn answer(text: &str) -> LlmResponse {
        LlmResponse {
            text: text.into(),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            response_id: None,
        }
    }

    #[test]
    fn an_answer_with_a_call_becomes_a_tool_call_and_plain_text_a_final_answer() {
        let r = from_native_answer(
            answer(&format!(
                "Reading it.\n{CALL_OPEN}\n{{\"name\": \"read_file\", \"arguments\": {{\"path\": \"n.md\"}}}}"
            )),
            3,
        );
        assert_eq!(r.text, "Reading it.");
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].id, "native_call_3");
        assert_eq!(r.tool_calls[0].name, "read_file");
        assert_eq!(r.tool_calls[0].arguments, json!({"path": "n.md"}));

        let done = from_native_answer(answer("The port is 8421."), 4);
        assert!(done.tool_calls.is_empty());
        assert_eq!(done.text, "The port is 8421.");

        let bare = from_native_answer(
            answer("{\"name\": \"read_file\", \"arguments\": {\"path\": \"n.md\"}}"),
            6,
        );
        assert_eq!(bare.tool_calls.len(), 1);
        assert_eq!(bare.tool_calls[0].name, "read_file");
        assert_eq!(bare.text, "");

        let cut = from_native_answer(answer(&format!("Hm {CALL_OPEN}\n{{\"name\": \"re")), 5);
        assert!(cut.tool_calls.is_empty());
        assert_eq!(cut.text, "Hm");
    }
}
