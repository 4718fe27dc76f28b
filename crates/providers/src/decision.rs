//! The JSON schema of one strict-JSON decision, for constrained generation.
//!
//! A local model is not asked nicely to answer in the strict-JSON protocol: its sampler is
//! constrained by a grammar so that it *cannot* answer anything else. The grammar is derived
//! (by llguidance, in the `local` feature) from the schema
//! built here: a union with one branch per offered tool —
//! `{"action": "<that tool>", "action_arguments": <that tool's schema>, "response": string}` —
//! and one for `{"action": "DONE", "action_arguments": {}, "response": string}`. Every answer
//! is therefore one JSON object naming an offered tool with arguments valid for that tool's
//! schema, or `DONE`.
//!
//! The grammar asks for the action *first* ([`DECISION_KEY_ORDER`]), though the protocol's
//! prompt shows `response` first (key order does not matter to the parser): a small model
//! that has to start with prose tends to copy the prompt's placeholder text and then answer
//! `DONE`; made to choose the action first, it calls tools.
//!
//! Tool schemas are made self-contained and tightened first ([`grammar_ready_schema`]):
//! `$ref`s are inlined, keywords the converter does not understand are dropped, and objects
//! that list their properties accept no others. Tightening only removes answers, so whatever
//! the tightened schema accepts, the tool's own schema accepts too.
//!
//! This module needs no model and no feature: its tests run in every build.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::ToolDefinition;

/// The action that ends the phase.
pub const DONE_ACTION: &str = "DONE";

/// Keywords kept from a tool's schema: what a grammar converter understands (everything
/// else, such as `description`, `title`, `default` or `examples`, does not constrain the
/// answer and is dropped).
const KEPT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "enum",
    "const",
    "oneOf",
    "anyOf",
    "allOf",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "format",
];

/// String formats the converter enforces; any other `format` (such as schemars' `uint64`) is
/// dropped, as it does not constrain a JSON value's shape.
const KEPT_FORMATS: &[&str] = &["date", "time", "date-time", "uuid"];

/// The order in which a constrained answer writes the decision's keys.
pub const DECISION_KEY_ORDER: [&str; 3] = ["action", "action_arguments", "response"];

/// How deep `$ref`s are followed before a recursive schema is cut off (to "any JSON value").
const MAX_REF_DEPTH: usize = 16;

/// The schema of one decision over `tools`: a `oneOf` with a branch per tool and one for
/// [`DONE_ACTION`]. As a JSON map it has no key order; [`decision_schema_text`] writes the
/// keys in [`DECISION_KEY_ORDER`].
pub fn decision_schema(tools: &[Arc<ToolDefinition>]) -> Value {
    let mut branches: Vec<Value> = tools
        .iter()
        .map(|t| branch(&t.name, grammar_ready_schema(&t.parameters)))
        .collect();
    branches.push(branch(
        DONE_ACTION,
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    ));
    json!({ "oneOf": branches })
}

fn branch(action: &str, arguments: Value) -> Value {
    // Key order is imposed when the schema is written out (`decision_schema_text`):
    // serde_json's map keeps insertion order only with its `preserve_order` feature.
    let mut properties = Map::new();
    properties.insert("response".into(), json!({"type": "string"}));
    properties.insert("action".into(), json!({"const": action}));
    properties.insert("action_arguments".into(), arguments);
    json!({
        "type": "object",
        "properties": Value::Object(properties),
        "required": ["response", "action", "action_arguments"],
        "additionalProperties": false,
    })
}

/// [`decision_schema`] as JSON text whose decision `properties` are in [`DECISION_KEY_ORDER`]
/// whatever order the JSON map keeps: the grammar generates properties in the order the text
/// lists them.
pub fn decision_schema_text(tools: &[Arc<ToolDefinition>]) -> String {
    ordered_text(&decision_schema(tools))
}

/// Serialize `value`, writing the keys of every object that holds exactly the decision's
/// three keys in [`DECISION_KEY_ORDER`], and all other keys as the map iterates them.
fn ordered_text(value: &Value) -> String {
    const ORDER: [&str; 3] = DECISION_KEY_ORDER;
    match value {
        Value::Object(map) => {
            let protocol = ORDER.iter().all(|k| map.contains_key(*k)) && map.len() == ORDER.len();
            let keys: Vec<&String> = if protocol {
                ORDER
                    .iter()
                    .filter_map(|k| map.get_key_value(*k).map(|(k, _)| k))
                    .collect()
            } else {
                map.keys().collect()
            };
            let parts: Vec<String> = keys
                .into_iter()
                .filter_map(|k| {
                    map.get(k)
                        .map(|v| format!("{}:{}", Value::String(k.clone()), ordered_text(v)))
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(ordered_text).collect();
            format!("[{}]", parts.join(","))
        }
        other => other.to_string(),
    }
}

/// A tool's argument schema made self-contained and tight for grammar conversion: `$ref`s
/// into the schema's own `$defs`/`definitions` are inlined (recursion is cut off after
/// [`MAX_REF_DEPTH`] levels), only the keywords in [`KEPT_KEYWORDS`] are kept, unknown string
/// formats are dropped, and an object schema that lists `properties` gets
/// `additionalProperties: false`. A schema that is not an object (or `true`) means any JSON
/// object of arguments.
pub fn grammar_ready_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(_) => {
            let mut out = clean(schema, schema, 0);
            if let Value::Object(map) = &mut out
                && !map.contains_key("type")
                && !map.contains_key("oneOf")
                && !map.contains_key("anyOf")
                && !map.contains_key("allOf")
            {
                map.insert("type".into(), json!("object"));
            }
            out
        }
        _ => json!({"type": "object"}),
    }
}

/// The schema `reference` points at inside `root` (`#/$defs/Name`, `#/definitions/Name`, any
/// JSON pointer), if any.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

fn clean(node: &Value, root: &Value, depth: usize) -> Value {
    let Value::Object(map) = node else {
        // `true`/`false` schemas and stray values: keep booleans, anything else is "any".
        return match node {
            Value::Bool(b) => Value::Bool(*b),
            _ => json!({}),
        };
    };
    if let Some(Value::String(reference)) = map.get("$ref") {
        if depth >= MAX_REF_DEPTH {
            return json!({});
        }
        return match resolve(root, reference) {
            Some(target) => clean(target, root, depth + 1),
            None => json!({}),
        };
    }
    let mut out = Map::new();
    for (key, value) in map {
        if !KEPT_KEYWORDS.contains(&key.as_str()) {
            continue;
        }
        let cleaned = match key.as_str() {
            "properties" => match value {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), clean(s, root, depth)))
                        .collect(),
                ),
                _ => continue,
            },
            "items" | "additionalProperties" => match value {
                Value::Object(_) => clean(value, root, depth),
                Value::Bool(b) => Value::Bool(*b),
                _ => continue,
            },
            "oneOf" | "anyOf" | "allOf" | "prefixItems" => match value {
                Value::Array(items) => {
                    Value::Array(items.iter().map(|s| clean(s, root, depth)).collect())
                }
                _ => continue,
            },
            "format" => match value {
                Value::String(f) if KEPT_FORMATS.contains(&f.as_str()) => value.clone(),
                _ => continue,
            },
            _ => value.clone(),
        };
        out.insert(key.clone(), cleaned);
    }
    if out.contains_key("properties") {
        out.insert("additionalProperties".into(), Value::Bool(false));
        if !out.contains_key("type") {
            out.insert("type".into(), json!("object"));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, parameters: Value) -> Arc<ToolDefinition> {
        std::sync::Arc::new(ToolDefinition {
            name: name.into(),
            description: format!("The {name} tool."),
            parameters,
        })
    }

    #[test]
    fn one_branch_per_tool_and_one_for_done_action_first() {
        let tools = [
            tool(
                "read_file",
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ),
            tool(
                "block",
                json!({"type": "object", "properties": {"reason": {"type": "string"}}}),
            ),
        ];
        let schema = decision_schema(&tools);
        let branches = schema["oneOf"].as_array().unwrap();
        assert_eq!(branches.len(), 3);
        let actions: Vec<&Value> = branches
            .iter()
            .map(|b| &b["properties"]["action"]["const"])
            .collect();
        assert_eq!(
            actions,
            [&json!("read_file"), &json!("block"), &json!("DONE")]
        );
        for b in branches {
            assert_eq!(b["additionalProperties"], json!(false));
            assert_eq!(
                b["required"],
                json!(["response", "action", "action_arguments"])
            );
            assert_eq!(b["properties"]["response"], json!({"type": "string"}));
        }
        assert_eq!(
            branches[0]["properties"]["action_arguments"],
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": false})
        );
        assert_eq!(
            branches[2]["properties"]["action_arguments"],
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );

        let text = decision_schema_text(&tools);
        let reparsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(reparsed, schema, "the ordered text is the same schema");
        // Each branch lists its properties action first, response last.
        let action_first = "\"properties\":{\"action\":{\"const\":";
        let response_last = "\"response\":{\"type\":\"string\"}}";
        assert_eq!(text.matches(action_first).count(), 3, "{text}");
        assert_eq!(text.matches(response_last).count(), 3, "{text}");
    }

    #[test]
    fn no_tools_leaves_only_done() {
        let schema = decision_schema(&[]);
        let branches = schema["oneOf"].as_array().unwrap();
        assert_eq!(branches.len(), 1);
        assert_eq!(branches[0]["properties"]["action"]["const"], "DONE");
    }

    #[test]
    fn refs_are_inlined_and_unknown_keywords_and_formats_dropped() {
        let schemars_like = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args",
            "description": "Arguments.",
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Where.", "examples": ["a.md"]},
                "limit": {"type": ["integer", "null"], "format": "uint64", "minimum": 0, "default": 10},
                "when": {"type": "string", "format": "date"},
                "mode": {"$ref": "#/$defs/Mode"},
                "nested": {"$ref": "#/definitions/Nested"}
            },
            "required": ["path"],
            "$defs": {"Mode": {"type": "string", "enum": ["a", "b"], "description": "A mode."}},
            "definitions": {"Nested": {"properties": {"x": {"type": "boolean"}}}}
        });
        let ready = grammar_ready_schema(&schemars_like);
        assert_eq!(
            ready,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "limit": {"type": ["integer", "null"], "minimum": 0},
                    "when": {"type": "string", "format": "date"},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "nested": {"type": "object", "properties": {"x": {"type": "boolean"}}, "additionalProperties": false}
                },
                "required": ["path"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn recursive_and_dangling_refs_end_in_any_value() {
        let recursive = json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/Node"}, "gone": {"$ref": "#/$defs/Missing"}},
            "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}}
        });
        let ready = grammar_ready_schema(&recursive);
        assert_eq!(ready["properties"]["gone"], json!({}));
        let mut depth = 0;
        let mut node = &ready["properties"]["node"];
        while let Some(child) = node.get("properties").and_then(|p| p.get("child")) {
            node = child;
            depth += 1;
        }
        assert_eq!(depth, MAX_REF_DEPTH, "cut off after the limit");
        assert_eq!(node, &json!({}));
    }

    #[test]
    fn a_missing_or_odd_schema_means_any_object() {
        assert_eq!(
            grammar_ready_schema(&json!(null)),
            json!({"type": "object"})
        );
        assert_eq!(
            grammar_ready_schema(&json!(true)),
            json!({"type": "object"})
        );
        assert_eq!(grammar_ready_schema(&json!({})), json!({"type": "object"}));
        assert_eq!(
            grammar_ready_schema(&json!({"anyOf": [{"type": "object"}]})),
            json!({"anyOf": [{"type": "object"}]})
        );
    }

    #[test]
    fn items_and_additional_property_schemas_are_cleaned_too() {
        let s = json!({
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string", "title": "Tag"}, "maxItems": 8}},
            "additionalProperties": {"type": "string", "description": "ignored"}
        });
        let ready = grammar_ready_schema(&s);
        assert_eq!(
            ready["properties"]["tags"],
            json!({"type": "array", "items": {"type": "string"}, "maxItems": 8})
        );
        assert_eq!(
            ready["additionalProperties"],
            json!(false),
            "listed properties close the object"
        );
        let map_only =
            json!({"type": "object", "additionalProperties": {"type": "integer", "title": "n"}});
        assert_eq!(
            grammar_ready_schema(&map_only)["additionalProperties"],
            json!({"type": "integer"})
        );
    }
}
