//! The strict-JSON protocol's instructions, written for small models.
//!
//! What a 135M-parameter model does with a prompt is mostly copying, so the prompt shows
//! nothing it should not copy: no schema (whose `description`s a small model pastes in as
//! argument values), no placeholders where values go. Each tool is one line — name, what it
//! does, its argument names and types — and the call carries exactly one concrete example
//! decision, built from an offered tool's own schema with ordinary values, in the key order
//! the grammar generates ([`crate::DECISION_KEY_ORDER`]). A path-like argument of the example
//! names the first file the task mentions: a small model copies the example's value, so an
//! invented name (`example.txt`) sends it to a file that does not exist.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::task_steps::{self, Next, first_file_name};
use crate::{DONE_ACTION, ToolDefinition, grammar_ready_schema};

/// Longest tool description shown (the first paragraph, cut at a sentence end if possible).
const MAX_DESCRIPTION: usize = 240;

/// The tool an example prefers when it is offered: reading is the safest first step.
const PREFERRED_EXAMPLE: &[&str] = &["read_file", "query_and_synthesize", "find_file"];

/// The protocol's rules and the tool list for the system prompt (`tools` not empty); the
/// example decision goes at the end of the conversation ([`next_example`]).
pub fn protocol_tool_list(tools: &[Arc<ToolDefinition>]) -> String {
    let mut s = format!(
        "Answer with exactly one JSON object: \"action\" is the name of one tool below, or \
         {DONE_ACTION} when the task is finished; \"action_arguments\" are that tool's \
         arguments; \"response\" is one short sentence (with {DONE_ACTION}: your final \
         answer). Use one tool per answer; its result comes back in the next message.\n\nTools:\n"
    );
    for t in tools {
        s.push_str(&tool_line(t));
        s.push('\n');
    }
    s
}

/// The example decision for a conversation in which the tools `done` have already
/// succeeded: the step the task names next ([`task_steps::next_step`]) on the file the task
/// gives for it, or `DONE` once every step it names has succeeded. A task that names no
/// tool gets [`example_decision`] on the first file it mentions, or `DONE` when it mentions
/// none or a tool has already succeeded.
pub fn next_example(tools: &[Arc<ToolDefinition>], task: &str, done: &[&str]) -> Option<String> {
    match task_steps::next_step(tools, task, done) {
        Next::Step(step) => tools
            .iter()
            .find(|t| t.name == step.tool)
            .map(|t| decision_for(t, step.file())),
        Next::Finished => Some(done_decision()),
        Next::Unknown => match first_file_name(task) {
            Some(file) if done.is_empty() => example_decision(tools, Some(file)),
            _ => Some(done_decision()),
        },
    }
}

/// `- name: description Arguments: a (string), b (integer, optional).`
fn tool_line(tool: &ToolDefinition) -> String {
    let schema = grammar_ready_schema(&tool.parameters);
    let required = required_of(&schema);
    let args: Vec<String> = properties_of(&schema)
        .map(|props| {
            props
                .iter()
                .map(|(name, s)| {
                    let mut kind = type_of(s);
                    if !required.contains(&name.as_str()) {
                        kind.push_str(", optional");
                    }
                    format!("{name} ({kind})")
                })
                .collect()
        })
        .unwrap_or_default();
    let description = short_description(&tool.description);
    let args = if args.is_empty() {
        "no arguments".to_string()
    } else {
        args.join(", ")
    };
    format!("- {}: {description} Arguments: {args}.", tool.name)
}

fn properties_of(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

fn required_of(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A schema's `type`, the first that is not `null` when it lists several.
fn json_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(t) => Some(t.as_str()),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null"),
        _ => None,
    }
}

/// A property's type for people: `string`, `integer`, `one of "a", "b"`, `list of string`.
fn type_of(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = values.iter().map(Value::to_string).collect();
        return format!("one of {}", shown.join(", "));
    }
    let base = json_type(schema).unwrap_or("any").to_string();
    if base == "array"
        && let Some(items) = schema.get("items")
    {
        return format!("list of {}", type_of(items));
    }
    base
}

/// The first paragraph of `text`, at most [`MAX_DESCRIPTION`] characters, ending with a
/// full stop.
fn short_description(text: &str) -> String {
    let para = text
        .trim()
        .split("\n\n")
        .next()
        .unwrap_or("")
        .replace('\n', " ");
    let mut out: String = para.chars().take(MAX_DESCRIPTION).collect();
    if out.len() < para.len()
        && let Some(end) = out.rfind(". ")
    {
        out.truncate(end + 1);
    }
    let out = out.trim().to_string();
    if out.ends_with('.') || out.is_empty() {
        out
    } else {
        format!("{out}.")
    }
}

/// One decision calling a preferred offered tool (else the first one that is not `block`)
/// with the argument values an example can know ([`decision_for`]; the path: `file`).
fn example_decision(tools: &[Arc<ToolDefinition>], file: Option<&str>) -> Option<String> {
    let tool = PREFERRED_EXAMPLE
        .iter()
        .find_map(|name| tools.iter().find(|t| t.name == *name))
        .or_else(|| tools.iter().find(|t| t.name != "block"))?;
    Some(decision_for(tool, file))
}

/// The example of a finished task: no `response`, which is the model's own final answer.
fn done_decision() -> String {
    format!(
        "{{\"action\": {}, \"action_arguments\": {{}}}}",
        json!(DONE_ACTION)
    )
}

/// A decision calling `tool` with the required arguments whose values an example can know
/// (a path-like one: `file`; an enum's first value; a number's minimum; a flag), keys in
/// the grammar's order. Free text (a file's content, a query, the `response`) is left out:
/// a small model copies an example's text word for word, so the grammar makes it write
/// those parts itself.
fn decision_for(tool: &ToolDefinition, file: Option<&str>) -> String {
    let schema = grammar_ready_schema(&tool.parameters);
    let mut arguments = Map::new();
    if let Some(props) = properties_of(&schema) {
        for name in required_of(&schema) {
            if let Some(value) = props.get(name).and_then(|s| example_value(name, s, file)) {
                arguments.insert(name.to_string(), value);
            }
        }
    }
    format!(
        "{{\"action\": {}, \"action_arguments\": {}}}",
        json!(tool.name),
        spaced(&Value::Object(arguments))
    )
}

/// A value an example can give an argument called `name` with `schema`, if any.
fn example_value(name: &str, schema: &Value, file: Option<&str>) -> Option<Value> {
    let lower = name.to_ascii_lowercase();
    let path_like = lower.contains("path") || lower.contains("file");
    if path_like && let Some(file) = file {
        return Some(json!(file));
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|v| v.first())
    {
        return Some(first.clone());
    }
    if let Some(c) = schema.get("const") {
        return Some(c.clone());
    }
    match json_type(schema).unwrap_or("string") {
        "integer" | "number" => Some(schema.get("minimum").cloned().unwrap_or(json!(1))),
        "boolean" => Some(json!(true)),
        _ => None,
    }
}

/// JSON with `", "` and `": "` between items, as the grammar writes it.
pub(crate) fn spaced(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", json!(k), spaced(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(spaced).collect();
            format!("[{}]", parts.join(", "))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<std::sync::Arc<ToolDefinition>> {
        vec![
            ToolDefinition {
                name: "write_file".into(),
                description: "Write text to a file, replacing it.\n\nLong details here.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "The file to write, absolute or relative to the working directory."},
                        "content": {"type": "string", "description": "The complete new content of the file."}
                    },
                    "required": ["path", "content"]
                }),
            }.into(),
            ToolDefinition {
                name: "read_file".into(),
                description: "Read a text file.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "The file to read."},
                        "max_bytes": {"type": ["integer", "null"], "minimum": 1, "description": "At most this many bytes."}
                    },
                    "required": ["path"],
                    "$defs": {"Unused": {"description": "Never shown either."}}
                }),
            }.into(),
            ToolDefinition {
                name: "find_file".into(),
                description: "Find files.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "mode": {"$ref": "#/$defs/Mode"},
                        "extensions": {"type": "array", "items": {"type": "string"}}
                    },
                    "required": ["mode"],
                    "$defs": {"Mode": {"type": "string", "enum": ["name", "content"], "description": "How to match."}}
                }),
            }.into(),
        ]
    }

    /// Everything the model reads of a first call on `task` with `tools` offered.
    fn protocol_text(tools: &[Arc<ToolDefinition>], task: &str) -> String {
        let request = crate::LlmRequest {
            messages: vec![
                crate::Message::system("Be careful.").into(),
                crate::Message::user(task).into(),
            ],
            tools: tools.to_vec(),
            ..Default::default()
        };
        let sent = crate::to_protocol_request(&request);
        let texts: Vec<&str> = sent.messages.iter().map(|m| m.content.as_str()).collect();
        texts.join("\n")
    }

    /// Every `description` string anywhere in a schema.
    fn descriptions(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if k == "description"
                        && let Some(s) = x.as_str()
                    {
                        out.push(s.to_string());
                    }
                    descriptions(x, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| descriptions(x, out)),
            _ => {}
        }
    }

    #[test]
    fn no_schema_description_appears_in_the_prompt() {
        let tools = tools();
        let prompt = protocol_text(&tools, "Read notes.md.");
        let mut found = Vec::new();
        for t in &tools {
            descriptions(&t.parameters, &mut found);
        }
        assert_eq!(found.len(), 6, "the fixture has descriptions to leak");
        for d in found {
            assert!(!prompt.contains(&d), "{d:?} leaked into:\n{prompt}");
        }
        assert!(!prompt.contains("Long details"), "{prompt}");
        assert!(!prompt.contains('<'), "no placeholders: {prompt}");
        // Argument order follows the schema map's order, which depends on serde_json's
        // features: check each part.
        for part in [
            "- write_file: Write text to a file, replacing it. Arguments: ",
            "path (string)",
            "content (string)",
            "max_bytes (integer, optional)",
            "mode (one of \"name\", \"content\")",
            "extensions (list of string, optional)",
        ] {
            assert!(prompt.contains(part), "{part:?} missing from:\n{prompt}");
        }
    }

    #[test]
    fn one_example_decision_valid_for_its_tool_in_grammar_order() {
        let tools = tools();
        let prompt = protocol_text(&tools, "Read notes.md.");
        assert_eq!(prompt.matches("Example answer:").count(), 1, "{prompt}");
        assert!(prompt.contains(&example_decision(&tools, Some("notes.md")).unwrap()));
        let example = example_decision(&tools, None).unwrap();
        assert!(
            example.starts_with("{\"action\": \"read_file\", \"action_arguments\": {"),
            "{example}"
        );
        let v: Value = serde_json::from_str(&example).unwrap();
        // No file known: no path is made up, and no free text is shown.
        assert_eq!(v["action_arguments"], json!({}));
        assert!(v.get("response").is_none(), "{example}");
        // Without read_file, the first tool that is not `block`, arguments valid for it.
        let others = [tools[2].clone(), tools[0].clone()];
        let v: Value = serde_json::from_str(&example_decision(&others, None).unwrap()).unwrap();
        assert_eq!(v["action"], "find_file");
        assert_eq!(v["action_arguments"], json!({"mode": "name"}));
        let block_only = [Arc::new(ToolDefinition {
            name: "block".into(),
            description: "Stop.".into(),
            parameters: json!({"type": "object"}),
        })];
        assert_eq!(example_decision(&block_only, None), None);
        // The task's first file name is the example's path.
        let prompt = protocol_text(&tools, "Read notes.md, then write summary.md.");
        assert!(prompt.contains(r#"{"path": "notes.md"}"#), "{prompt}");
    }

    #[test]
    fn the_next_example_is_the_step_the_task_names_next_without_free_text() {
        let tools = tools();
        let task = "Read notes.md, then write a summary to summary.md.";
        let first = next_example(&tools, task, &[]).unwrap();
        assert_eq!(
            first,
            r#"{"action": "read_file", "action_arguments": {"path": "notes.md"}}"#
        );
        let second = next_example(&tools, task, &["read_file"]).unwrap();
        // The file the task gives for writing, and no content for the model to copy.
        assert_eq!(
            second,
            r#"{"action": "write_file", "action_arguments": {"path": "summary.md"}}"#
        );
        let last = next_example(&tools, task, &["read_file", "write_file"]).unwrap();
        assert_eq!(last, r#"{"action": "DONE", "action_arguments": {}}"#);
        // A task naming no tool and no file: DONE; naming a file only: read it first.
        let none = next_example(&tools, "Nothing needs to be done.", &[]).unwrap();
        assert!(none.contains("DONE"), "{none}");
        let file = next_example(&tools, "Fix the typo in main.rs.", &[]).unwrap();
        assert!(file.contains(r#"{"path": "main.rs"}"#), "{file}");
        // A path pinned to the task's files still shows the step's own file.
        let pinned: Vec<std::sync::Arc<ToolDefinition>> = tools
            .iter()
            .map(|t| {
                Arc::new(crate::task_steps::pin_paths(
                    (**t).clone(),
                    &["notes.md".into(), "summary.md".into()],
                ))
            })
            .collect();
        let second = next_example(&pinned, task, &["read_file"]).unwrap();
        assert!(second.contains(r#""path": "summary.md""#), "{second}");
    }
}
