//! Argument validation against a tool's JSON schema.
//!
//! The schema is compiled once per tool. Errors are turned into short messages that name the
//! argument, because the model reads them to correct its call.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{JsonType, ValidationError};
use serde_json::Value;

/// How many schema errors one message reports at most.
const MAX_REPORTED: usize = 5;

/// A tool's parameters schema does not compile: the tool cannot be registered until its
/// schema is fixed.
#[derive(Debug, thiserror::Error)]
#[error("the parameters schema does not compile: {0}")]
pub(crate) struct SchemaError(Box<ValidationError<'static>>);

/// Arguments that do not fit a tool's schema. The message names the argument, so the
/// model can correct its call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InvalidArguments {
    /// Not a JSON object. Send the arguments as one.
    #[error("the arguments must be a JSON object, got {got}")]
    NotAnObject {
        /// What was sent instead (`an array`, …).
        got: String,
    },
    /// A string over the size limit. Send less.
    #[error("argument '{name}' is {len} bytes, over the limit of {limit}")]
    TooLong {
        /// The argument.
        name: String,
        /// Its length in bytes.
        len: usize,
        /// The limit (`max_string_arg_bytes`).
        limit: usize,
    },
    /// What the schema found wrong, most useful first (at most [`MAX_REPORTED`] and a count
    /// of the rest).
    #[error("{}", .0.join("; "))]
    Schema(Vec<String>),
}

/// A compiled schema.
pub(crate) struct Validator {
    schema: jsonschema::Validator,
    /// The top-level property names, to tell the model what it may send instead.
    known: Vec<String>,
}

impl Validator {
    /// Compile `schema`. Err: why the schema is unusable.
    pub(crate) fn new(schema: &Value) -> Result<Self, SchemaError> {
        let compiled = jsonschema::validator_for(schema).map_err(|e| SchemaError(Box::new(e)))?;
        let known = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| props.keys().cloned().collect())
            .unwrap_or_default();
        Ok(Validator {
            schema: compiled,
            known,
        })
    }

    /// Check `args`: must be an object matching the schema (required, unexpected, JSON types —
    /// an integer is not a bool), and no string anywhere longer than `max_string_bytes`.
    /// Err: one clear message naming the argument.
    pub(crate) fn validate(
        &self,
        args: &Value,
        max_string_bytes: usize,
    ) -> Result<(), InvalidArguments> {
        if !args.is_object() {
            return Err(InvalidArguments::NotAnObject {
                got: describe(args),
            });
        }
        // Before the schema, so a huge string is refused without being looked at further.
        if let Some((name, len)) = oversize_string(args, "", max_string_bytes) {
            return Err(InvalidArguments::TooLong {
                name,
                len,
                limit: max_string_bytes,
            });
        }
        let mut messages: Vec<(u8, String)> = self
            .schema
            .iter_errors(args)
            .map(|e| self.message(&e))
            .collect();
        if messages.is_empty() {
            return Ok(());
        }
        // Most useful first: what is missing or unexpected, then wrong types, then the rest.
        messages.sort_by_key(|(rank, _)| *rank);
        messages.dedup_by(|a, b| a.1 == b.1);
        let total = messages.len();
        let mut text: Vec<String> = messages
            .into_iter()
            .take(MAX_REPORTED)
            .map(|(_, m)| m)
            .collect();
        if total > MAX_REPORTED {
            text.push(format!("and {} more problems", total - MAX_REPORTED));
        }
        Err(InvalidArguments::Schema(text))
    }

    /// A message for one schema error, with its sort rank.
    fn message(&self, error: &ValidationError<'_>) -> (u8, String) {
        let at = argument_name(error.instance_path().as_str());
        match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), str::to_string);
                let name = if at.is_empty() {
                    name
                } else {
                    format!("{at}.{name}")
                };
                (0, format!("missing required argument '{name}'"))
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let names: Vec<String> = unexpected.iter().map(|u| format!("'{u}'")).collect();
                let noun = if names.len() == 1 {
                    "argument"
                } else {
                    "arguments"
                };
                let mut msg = format!("unexpected {noun} {}", names.join(", "));
                if at.is_empty() && !self.known.is_empty() {
                    msg.push_str(&format!(" (expected: {})", self.known.join(", ")));
                } else if !at.is_empty() {
                    msg.push_str(&format!(" in '{at}'"));
                }
                (1, msg)
            }
            ValidationErrorKind::Type { kind } => {
                let wanted = match kind {
                    TypeKind::Single(t) => with_article(*t),
                    TypeKind::Multiple(set) => {
                        // `Option<T>` fields accept null too; "a boolean" reads better than
                        // "a boolean or null" for a model that should send a boolean.
                        let named: Vec<String> = set
                            .iter()
                            .filter(|t| *t != JsonType::Null)
                            .map(with_article)
                            .collect();
                        if named.is_empty() {
                            "null".to_string()
                        } else {
                            named.join(" or ")
                        }
                    }
                };
                let name = if at.is_empty() {
                    "arguments".to_string()
                } else {
                    format!("argument '{at}'")
                };
                (
                    2,
                    format!(
                        "{name} must be {wanted}, got {}",
                        describe(error.instance())
                    ),
                )
            }
            _ => {
                let name = if at.is_empty() {
                    "arguments".to_string()
                } else {
                    format!("argument '{at}'")
                };
                (3, format!("{name} is invalid: {error}"))
            }
        }
    }
}

/// `/a/0/b` (a JSON pointer) → `a[0].b`.
fn argument_name(pointer: &str) -> String {
    let mut name = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            name.push_str(&format!("[{segment}]"));
        } else {
            if !name.is_empty() {
                name.push('.');
            }
            name.push_str(&segment);
        }
    }
    name
}

fn with_article(t: JsonType) -> String {
    match t {
        JsonType::Array | JsonType::Integer | JsonType::Object => format!("an {t}"),
        JsonType::Null => "null".to_string(),
        _ => format!("a {t}"),
    }
}

/// The JSON type of `v` and a short rendering of it, e.g. `integer 5`.
fn describe(v: &Value) -> String {
    let kind = match v {
        Value::Null => return "null".to_string(),
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let mut shown = v.to_string();
    if shown.len() > 40 {
        let mut cut = 37;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("...");
    }
    format!("{kind} {shown}")
}

/// The first string (anywhere in `v`) longer than `max` bytes: its argument name and length.
fn oversize_string(v: &Value, at: &str, max: usize) -> Option<(String, usize)> {
    match v {
        Value::String(s) if s.len() > max => Some((
            if at.is_empty() {
                "arguments".into()
            } else {
                at.to_string()
            },
            s.len(),
        )),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| oversize_string(item, &format!("{at}[{i}]"), max)),
        Value::Object(map) => map.iter().find_map(|(k, item)| {
            // A huge key is as bad as a huge value.
            if k.len() > max {
                return Some((format!("{at}.<key>"), k.len()));
            }
            let name = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            oversize_string(item, &name, max)
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Mirrors what `schema_for` produces for a struct with `deny_unknown_fields`.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        /// A path.
        path: String,
        /// A flag.
        recursive: Option<bool>,
        /// A count.
        count: Option<u64>,
        /// Tags.
        tags: Option<Vec<String>>,
    }

    fn validator() -> Validator {
        Validator::new(&crate::schema_for::<Args>()).unwrap()
    }

    const MAX: usize = 1024;

    #[test]
    fn accepts_valid_args() {
        let v = validator();
        v.validate(&json!({"path": "a"}), MAX).unwrap();
        v.validate(
            &json!({"path": "a", "recursive": true, "count": 3, "tags": ["x"]}),
            MAX,
        )
        .unwrap();
        v.validate(&json!({"path": "a", "recursive": null}), MAX)
            .unwrap();
    }

    #[test]
    fn refuses_non_object() {
        let err = validator()
            .validate(&json!(["a"]), MAX)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "the arguments must be a JSON object, got array [\"a\"]"
        );
    }

    #[test]
    fn names_missing_argument() {
        let err = validator()
            .validate(&json!({}), MAX)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "missing required argument 'path'");
    }

    #[test]
    fn names_unexpected_argument() {
        let err = validator()
            .validate(&json!({"path": "a", "pth": 1}), MAX)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("unexpected argument 'pth'"), "{err}");
        assert!(err.contains("expected: "), "{err}");
    }

    #[test]
    fn integer_is_not_bool_and_string_is_not_integer() {
        let v = validator();
        let err = v
            .validate(&json!({"path": "a", "recursive": 1}), MAX)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "argument 'recursive' must be a boolean, got integer 1");
        let err = v
            .validate(&json!({"path": "a", "count": "3"}), MAX)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "argument 'count' must be an integer, got string \"3\"");
        let err = v
            .validate(&json!({"path": 5}), MAX)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "argument 'path' must be a string, got integer 5");
        let err = v
            .validate(&json!({"path": "a", "tags": [1]}), MAX)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "argument 'tags[0]' must be a string, got integer 1");
    }

    #[test]
    fn other_constraints_name_the_argument() {
        let err = validator()
            .validate(&json!({"path": "a", "count": -1}), MAX)
            .unwrap_err()
            .to_string();
        // The whole text, the library's part included: the model reads it to correct its
        // call, so an upgrade of `jsonschema` that rewords it must show up here.
        assert_eq!(
            err,
            "argument 'count' is invalid: -1 is less than the minimum of 0"
        );
    }

    #[test]
    fn oversize_strings_anywhere() {
        let v = validator();
        let big = "x".repeat(MAX + 1);
        let err = v
            .validate(&json!({"path": big}), MAX)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            format!(
                "argument 'path' is {} bytes, over the limit of {MAX}",
                MAX + 1
            )
        );
        let err = v
            .validate(&json!({"path": "a", "tags": ["ok", big]}), MAX)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("argument 'tags[1]' is 1025 bytes"), "{err}");
        // Exactly at the limit is fine.
        v.validate(&json!({"path": "x".repeat(MAX)}), MAX).unwrap();
    }

    #[test]
    fn several_problems_in_one_message() {
        let err = validator()
            .validate(&json!({"recursive": 1, "extra": true}), MAX)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("missing required argument 'path'; unexpected argument 'extra'"),
            "{err}"
        );
        assert!(err.contains("'recursive' must be a boolean"), "{err}");
    }

    #[test]
    fn bad_schema_is_refused() {
        assert!(Validator::new(&json!({"type": 5})).is_err());
    }

    #[test]
    fn pointer_to_name() {
        assert_eq!(argument_name(""), "");
        assert_eq!(argument_name("/a/0/b~1c"), "a[0].b/c");
    }
}
