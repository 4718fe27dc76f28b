//! Reading structure out of model text: a JSON array of names or a JSON object, found even
//! when the model wraps it in prose or a code fence, with limits on what is kept.
//!
//! Models do not reliably answer "only JSON". These helpers look for the first JSON value of
//! the wanted shape anywhere in the text, fall back to a Markdown list, and never fail: the
//! caller decides what an empty result means.

use serde_json::Value;

/// At most this many `[` / `{` positions are tried, so a pathological text costs little.
const MAX_CANDIDATES: usize = 64;

/// Keys under which a list item given as an object carries its name.
const NAME_KEYS: &[&str] = &[
    "name",
    "title",
    "subtopic",
    "topic",
    "section",
    "suggestion",
];

/// Where a list came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListSource {
    /// A JSON array in the text (possibly empty).
    Json,
    /// Markdown list lines (`- x`, `* x`, `1. x`), when there was no JSON array.
    Lines,
    /// Nothing usable.
    Nothing,
}

/// A cleaned list of names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NameList {
    /// Trimmed, shortened, de-duplicated, at most the requested number.
    pub items: Vec<String>,
    /// How many usable items were cut off by the item limit.
    pub dropped: usize,
    /// Where they came from.
    pub source: ListSource,
}

/// The first JSON value starting at each `open` character of `text`, in order.
fn json_candidates(text: &str, open: char) -> impl Iterator<Item = Value> + '_ {
    text.match_indices(open)
        .take(MAX_CANDIDATES)
        .filter_map(move |(i, _)| {
            serde_json::Deserializer::from_str(&text[i..])
                .into_iter::<Value>()
                .next()
                .and_then(Result::ok)
        })
}

/// A list item as a name: a string, or an object with a name-like string field. (Numbers are
/// not names: `[1]` in prose is a citation, not a list.)
fn item_name(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(map) => NAME_KEYS
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_str))
            .map(str::to_string),
        _ => None,
    }
}

/// Shorten to at most `max_chars` characters, on a character boundary.
pub(crate) fn clip(s: &str, max_chars: usize) -> String {
    s.chars().take(max_chars).collect()
}

/// A Markdown list line's content (`- x`, `* x`, `• x`, `1. x`, `2) x`).
fn list_line(line: &str) -> Option<&str> {
    let t = line.trim_start();
    for bullet in ["- ", "* ", "• "] {
        if let Some(rest) = t.strip_prefix(bullet) {
            return Some(rest);
        }
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 {
        let rest = &t[digits..];
        return rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") "));
    }
    None
}

/// The names listed in `text`: the first JSON array whose items are names, else the Markdown
/// list lines. Items are trimmed (and stripped of surrounding quotes and `**`), clipped to
/// `max_chars`, de-duplicated case-insensitively, and capped at `max_items`.
pub(crate) fn name_list(text: &str, max_items: usize, max_chars: usize) -> NameList {
    let mut raw: Option<(Vec<String>, ListSource)> = None;
    for candidate in json_candidates(text, '[') {
        if let Value::Array(items) = candidate {
            let names: Vec<String> = items.iter().filter_map(item_name).collect();
            if !names.is_empty() || items.is_empty() {
                raw = Some((names, ListSource::Json));
                break;
            }
        }
    }
    let (raw, source) = raw.unwrap_or_else(|| {
        let lines: Vec<String> = text
            .lines()
            .filter_map(list_line)
            .map(str::to_string)
            .collect();
        if lines.is_empty() {
            (Vec::new(), ListSource::Nothing)
        } else {
            (lines, ListSource::Lines)
        }
    });
    let mut items: Vec<String> = Vec::new();
    let mut dropped = 0;
    for name in raw {
        let cleaned = name
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .trim_matches(|c: char| c == '"' || c == '\'' || c == '`' || c == '*')
            .trim()
            .to_string();
        let cleaned = clip(&cleaned, max_chars).trim_end().to_string();
        if cleaned.is_empty()
            || items
                .iter()
                .any(|seen| seen.to_lowercase() == cleaned.to_lowercase())
        {
            continue;
        }
        if items.len() == max_items {
            dropped += 1;
        } else {
            items.push(cleaned);
        }
    }
    NameList {
        items,
        dropped,
        source,
    }
}

/// The first JSON object in `text` that has `key`, else the first JSON object at all.
pub(crate) fn json_object(text: &str, key: &str) -> Option<serde_json::Map<String, Value>> {
    let mut first = None;
    for candidate in json_candidates(text, '{') {
        if let Value::Object(map) = candidate {
            if map.contains_key(key) {
                return Some(map);
            }
            if first.is_none() {
                first = Some(map);
            }
        }
    }
    first
}

/// The first JSON array of objects in `text` (an array of anything else is skipped).
pub(crate) fn json_objects(text: &str) -> Option<Vec<serde_json::Map<String, Value>>> {
    json_candidates(text, '[').find_map(|candidate| match candidate {
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => Some(
            items
                .into_iter()
                .filter_map(|v| match v {
                    Value::Object(map) => Some(map),
                    _ => None,
                })
                .collect(),
        ),
        _ => None,
    })
}

/// A JSON value read as a yes/no: booleans, and the strings `true`/`yes`/`false`/`no`.
pub(crate) fn as_flag(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" => Some(true),
            "false" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The names in a JSON value that should be a list (a single string counts as one name).
pub(crate) fn names_in(v: Option<&Value>, max_items: usize, max_chars: usize) -> NameList {
    match v {
        Some(Value::Array(_)) | Some(Value::String(_)) => {
            let arr = match v {
                Some(Value::String(s)) => Value::Array(vec![Value::String(s.clone())]),
                Some(other) => other.clone(),
                None => Value::Array(Vec::new()),
            };
            name_list(&arr.to_string(), max_items, max_chars)
        }
        _ => NameList {
            items: Vec::new(),
            dropped: 0,
            source: ListSource::Nothing,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_array_is_read() {
        let l = name_list(r#"["a", "b", "c"]"#, 10, 50);
        assert_eq!(l.items, ["a", "b", "c"]);
        assert_eq!(l.source, ListSource::Json);
        assert_eq!(l.dropped, 0);
    }

    #[test]
    fn prose_and_fences_around_the_array_are_ignored() {
        let text = "Sure! Here are the subtopics [as requested]:\n```json\n[\"history\", \"methods\"]\n```\nHope that helps [S1].";
        assert_eq!(name_list(text, 10, 50).items, ["history", "methods"]);
    }

    #[test]
    fn objects_with_a_name_field_count_and_junk_items_are_skipped() {
        let text = r#"[{"name": "one"}, {"title": "two"}, null, ["x"], 3]"#;
        assert_eq!(name_list(text, 10, 50).items, ["one", "two"]);
        let cited = r#"As shown in [1] and [2, 3], the parts are ["a", "b"]."#;
        assert_eq!(name_list(cited, 10, 50).items, ["a", "b"]);
    }

    #[test]
    fn markdown_lists_are_a_fallback() {
        let text = "Subtopics:\n- alpha\n* beta\n1. gamma\n2) delta\nnot a list line";
        let l = name_list(text, 10, 50);
        assert_eq!(l.items, ["alpha", "beta", "gamma", "delta"]);
        assert_eq!(l.source, ListSource::Lines);
    }

    #[test]
    fn plain_prose_gives_nothing() {
        let l = name_list("I think you should research the topic broadly.", 10, 50);
        assert!(l.items.is_empty());
        assert_eq!(l.source, ListSource::Nothing);
    }

    #[test]
    fn an_empty_array_is_json_with_no_items() {
        let l = name_list("[]", 10, 50);
        assert!(l.items.is_empty());
        assert_eq!(l.source, ListSource::Json);
    }

    #[test]
    fn huge_lists_are_capped_cleaned_and_deduplicated() {
        let mut names: Vec<String> = (0..1000).map(|i| format!("  topic   {i} ")).collect();
        names.insert(1, "TOPIC 0".into());
        let text = serde_json::to_string(&names).unwrap();
        let l = name_list(&text, 8, 50);
        assert_eq!(l.items.len(), 8);
        assert_eq!(l.items[0], "topic 0");
        assert_eq!(l.items[1], "topic 1", "the duplicate is gone");
        assert_eq!(l.dropped, 992);
        let long = format!("[\"{}\"]", "x".repeat(500));
        assert_eq!(name_list(&long, 8, 50).items[0].chars().count(), 50);
    }

    #[test]
    fn objects_are_found_in_prose() {
        let text =
            "Review: {\"note\": 1} then {\"sufficient\": false, \"suggestions\": [\"more\"]} done";
        let o = json_object(text, "sufficient").unwrap();
        assert_eq!(as_flag(&o["sufficient"]), Some(false));
        assert_eq!(json_object("{\"a\": 1}", "b").unwrap()["a"], 1);
        assert!(json_object("no json here", "a").is_none());
        assert_eq!(as_flag(&Value::String("Yes".into())), Some(true));
        assert_eq!(as_flag(&Value::Null), None);
    }

    #[test]
    fn names_in_reads_arrays_and_single_strings() {
        let v: Value = serde_json::json!(["a", "b"]);
        assert_eq!(names_in(Some(&v), 5, 10).items, ["a", "b"]);
        let s = Value::String("just one".into());
        assert_eq!(names_in(Some(&s), 5, 10).items, ["just one"]);
        assert!(names_in(Some(&Value::Bool(true)), 5, 10).items.is_empty());
        assert!(names_in(None, 5, 10).items.is_empty());
    }
}
