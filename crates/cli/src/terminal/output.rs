//! What stdout carries (`--output-format text|json|stream-json`, `--json` its alias for
//! `json`) and the JSON documents commands print. The documents and the stream are stable
//! interfaces, described in docs/OUTPUT.md: fields are only ever added, and `schema_version`
//! changes when one is removed or changes meaning.

use std::io::Write;

use serde_json::{Map, Value};

use lsm_app::secrets;

/// `--output-format`: what stdout carries. The formats and their schemas are stable; see
/// docs/OUTPUT.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Human progress on stderr, the answer on stdout (the default).
    Text,
    /// Only the final result, as one JSON document on stdout (same as `--json`).
    Json,
    /// Every event as one JSON line on stdout as it happens.
    StreamJson,
}

impl OutputFormat {
    /// The format `--json` and `--output-format` ask for together (`--json` is an alias of
    /// `--output-format json`; clap refuses both at once).
    pub fn chosen(json: bool, format: Option<OutputFormat>) -> OutputFormat {
        match (json, format) {
            (true, _) => OutputFormat::Json,
            (false, Some(f)) => f,
            (false, None) => OutputFormat::Text,
        }
    }
}

/// The `schema_version` of the documents of `lsm query`, `lsm ingest` and `lsm llm ping`
/// (an agent run's summary carries the run records' own version).
pub const SCHEMA_VERSION: u32 = 1;

/// `value` (an object) with `schema_version`, unless it has one already.
pub fn versioned(mut value: Value) -> Value {
    if let Value::Object(fields) = &mut value {
        fields
            .entry("schema_version")
            .or_insert_with(|| Value::from(SCHEMA_VERSION));
    }
    value
}

/// One line of a `stream-json` stream: `{"event": event, ...fields}`, flushed at once.
pub fn stream_line(event: &str, fields: Value) {
    let mut line = Map::new();
    line.insert("event".into(), Value::from(event));
    if let Value::Object(f) = fields {
        line.extend(f);
    }
    let text = secrets::clean_json(Value::Object(line));
    let mut out = std::io::stdout().lock();
    // A closed stdout (the reader went away) must not stop the command.
    let _ = writeln!(out, "{}", super::text::json_line(&text)).and_then(|()| out.flush());
}

/// Print `json` (a document, or the lines of one) on stdout as every JSON output of `lsm`
/// is: with what a terminal would act on escaped ([`super::text::json_out`]).
pub fn print_json(json: &str) {
    println!("{}", super::text::json_out(json));
}

/// Print a command's final document as `format` says: `json` pretty-printed, `stream-json`
/// as the stream's last line (`"event": "result"`). `text` prints nothing here.
pub fn print_final(format: OutputFormat, document: Value) {
    match format {
        OutputFormat::Text => {}
        OutputFormat::Json => print_json(&secrets::clean_json_pretty(document)),
        OutputFormat::StreamJson => stream_line("result", document),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_versioned_once_and_json_is_an_alias() {
        let v = versioned(serde_json::json!({"answer": "a"}));
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        let kept = versioned(serde_json::json!({"schema_version": 2}));
        assert_eq!(kept["schema_version"], 2);
        assert_eq!(OutputFormat::chosen(true, None), OutputFormat::Json);
        assert_eq!(
            OutputFormat::chosen(false, Some(OutputFormat::StreamJson)),
            OutputFormat::StreamJson
        );
        assert_eq!(OutputFormat::chosen(false, None), OutputFormat::Text);
    }
}
