//! What a scripted provider plays: lines of a `--provider scripted:<file.jsonl>` script
//! (JSON values) and in-process [`ScriptedResponse`]s, each reporting a small usage (10 tokens
//! in, 5 out) so that budgets count in tests too.

use std::path::{Path, PathBuf};

use lsm_providers::ScriptedResponse;
use serde_json::{Value, json};

/// A script line: the model answers `s` without calling a tool.
pub fn text(s: &str) -> Value {
    json!({"text": s, "usage": {"input_tokens": 10, "output_tokens": 5}})
}

/// A script line: the model calls the tool `name` with `args`.
pub fn call(name: &str, args: Value) -> Value {
    json!({"tool_calls": [{"name": name, "arguments": args}], "usage": {"input_tokens": 10, "output_tokens": 5}})
}

/// Write `lines` as the JSONL script `dir/name`; its path.
///
/// # Errors
/// When the file cannot be written.
pub fn write(dir: &Path, name: &str, lines: &[Value]) -> std::io::Result<PathBuf> {
    let path = dir.join(name);
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The JSON values of a JSONL file, one a line (a script, a run's transcript).
///
/// # Panics
/// When the file cannot be read or a line is not JSON: the test reading it fails, naming
/// the file or the line.
#[allow(clippy::panic)]
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// An in-process response: the model answers `s`.
pub fn text_response(s: &str) -> ScriptedResponse {
    ScriptedResponse::text(s).with_usage(10, 5)
}

/// An in-process response: the model calls the tool `name` with `args`.
pub fn tool_response(name: &str, args: Value) -> ScriptedResponse {
    ScriptedResponse::tool(name, args).with_usage(10, 5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_as_the_scripted_provider_reads_them() {
        let dir = std::env::temp_dir().join(format!("lsm-test-support-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = write(
            &dir,
            "s.jsonl",
            &[call("noop", json!({"n": 1})), text("done")],
        )
        .unwrap();
        let provider = lsm_providers::ScriptedProvider::from_file(&path).unwrap();
        assert_eq!(provider.len(), 2);
        let lines = read_jsonl(&path);
        assert_eq!(lines[0]["tool_calls"][0]["name"], "noop");
        assert_eq!(lines[1]["text"], "done");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
