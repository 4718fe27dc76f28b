//! Tool outputs as bounded JSON, and the argument and error plumbing every tool shares.

use lsm_sandbox::{ToolContext, ToolError};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::KbError;
use crate::pipeline::{ContextPackage, QueryResponse};
use crate::text::truncate_chars;

/// Largest JSON output of one tool call, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 60 * 1024;

pub(super) fn parse<T: DeserializeOwned>(ctx: &ToolContext) -> Result<T, ToolError> {
    serde_json::from_value(ctx.args.clone()).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

pub(super) fn tool_err(e: KbError) -> ToolError {
    match e {
        KbError::InvalidRequest(m) => ToolError::InvalidArguments(m),
        other => ToolError::Failed(other.to_string()),
    }
}

pub(super) fn to_json(v: &impl serde::Serialize) -> Result<Value, ToolError> {
    serde_json::to_value(v).map_err(|e| ToolError::Failed(format!("cannot serialize: {e}")))
}

/// Serialize `value` within [`MAX_OUTPUT_BYTES`]: cut every string longer than a shrinking
/// limit, then drop array items from the end, noting it in `"truncated"`.
pub fn bounded(value: Value) -> String {
    let text = value.to_string();
    if text.len() <= MAX_OUTPUT_BYTES {
        return text;
    }
    for limit in [1500, 600, 200, 60] {
        let mut v = value.clone();
        cut_strings(&mut v, limit);
        mark_truncated(
            &mut v,
            &format!("texts cut to {limit} characters to fit the output limit"),
        );
        let t = v.to_string();
        if t.len() <= MAX_OUTPUT_BYTES {
            return t;
        }
    }
    let mut v = value;
    cut_strings(&mut v, 60);
    loop {
        if !drop_last_item(&mut v) {
            break;
        }
        mark_truncated(&mut v, "items dropped to fit the output limit");
        let t = v.to_string();
        if t.len() <= MAX_OUTPUT_BYTES {
            return t;
        }
    }
    json!({"truncated": "the output did not fit the limit"}).to_string()
}

fn cut_strings(v: &mut Value, limit: usize) {
    match v {
        Value::String(s) if lsm_sandbox::char_cut(s, limit).is_some() => {
            *s = truncate_chars(s, limit);
        }
        Value::Array(items) => items.iter_mut().for_each(|i| cut_strings(i, limit)),
        Value::Object(map) => map.values_mut().for_each(|i| cut_strings(i, limit)),
        _ => {}
    }
}

fn mark_truncated(v: &mut Value, note: &str) {
    if let Value::Object(map) = v {
        map.insert("truncated".into(), Value::String(note.into()));
    }
}

/// Drop the last item of an array inside the largest member (depth first). Returns whether
/// one was dropped.
fn drop_last_item(v: &mut Value) -> bool {
    match v {
        Value::Array(items) => items.pop().is_some(),
        Value::Object(map) => {
            let mut keys: Vec<(usize, String)> = map
                .iter()
                .map(|(k, x)| (x.to_string().len(), k.clone()))
                .collect();
            keys.sort_by_key(|k| std::cmp::Reverse(k.0));
            keys.into_iter()
                .any(|(_, k)| map.get_mut(&k).is_some_and(drop_last_item))
        }
        _ => false,
    }
}

/// A package trimmed for the model: long source texts are cut.
pub(super) fn package_json(pkg: &ContextPackage) -> Result<Value, ToolError> {
    let mut v = to_json(pkg)?;
    if let Some(cands) = v.get_mut("candidates").and_then(Value::as_array_mut) {
        for c in cands {
            if let Some(t) = c.get_mut("text")
                && let Some(s) = t.as_str()
            {
                *t = Value::String(truncate_chars(s, crate::pipeline::MAX_SOURCE_CHARS));
            }
        }
    }
    Ok(v)
}

pub(super) fn response_json(r: &QueryResponse) -> Result<Value, ToolError> {
    let mut v = to_json(r)?;
    if let Some(obj) = v.as_object_mut() {
        obj.insert("package".into(), package_json(&r.package)?);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_output_fits_and_says_what_it_cut() {
        let big = json!({"candidates": (0..200).map(|i| json!({"i": i, "text": "x".repeat(2000)})).collect::<Vec<_>>()});
        let out = bounded(big);
        assert!(out.len() <= MAX_OUTPUT_BYTES);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert!(v["truncated"].is_string());
        let small = json!({"a": 1});
        assert_eq!(bounded(small), "{\"a\":1}");
    }
}
