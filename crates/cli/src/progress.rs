//! Human progress on stderr, one line per transcript event worth seeing.

use lsm_harness::EventSink;
use serde_json::Value;

/// Prints a short line for each event of interest.
#[derive(Debug, Default)]
pub struct StderrProgress;

fn clip(s: &str, max: usize) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max).collect();
    cut.push('…');
    cut
}

impl EventSink for StderrProgress {
    fn event(&self, e: &Value) {
        if let Some(line) = describe(e) {
            eprintln!("{line}");
        }
    }
}

/// One human line for a transcript event worth seeing, or `None`.
pub fn describe(e: &Value) -> Option<String> {
    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
    let line = match s("event") {
        "llm_request" => format!(
            "[{}] llm call {} ({} messages, {} tools)",
            s("label"),
            e["iteration"],
            e["messages"],
            e["tools"].as_array().map_or(0, Vec::len)
        ),
        "llm_response" => {
            let text = s("text");
            let calls = e["tool_calls"].as_array().map_or(0, Vec::len);
            if text.is_empty() {
                format!("[{}] model requested {calls} tool call(s)", s("label"))
            } else {
                format!("[{}] model: {}", s("label"), clip(text, 160))
            }
        }
        "tool_call" => format!(
            "  -> {} {}",
            s("tool"),
            clip(&e["arguments"].to_string(), 160)
        ),
        "tool_result" => match e.get("error") {
            Some(err) => format!(
                "  <- {} failed: {}",
                s("tool"),
                clip(err.as_str().unwrap_or(""), 200)
            ),
            None => format!("  <- {}: {}", s("tool"), clip(s("result"), 160)),
        },
        "tool_denied" => format!("  <- {} refused: {}", s("tool"), clip(s("reason"), 200)),
        "llm_error" => format!("LLM error: {}", s("error")),
        "budget_exhausted" => "token budget exhausted; no further LLM calls".to_string(),
        "stop_requested" => "stop requested".to_string(),
        "blocked" => format!("blocked: {}", s("reason")),
        "interaction_request" => format!(
            "  ?? {} [{}] waiting for an answer: {}",
            s("request_type"),
            s("request_id"),
            clip(s("prompt"), 160)
        ),
        "interaction_acknowledged" => format!("  ?? [{}] shown to the user", s("request_id")),
        "interaction_timeout" => {
            format!("  ?? [{}] timed out after {}", s("request_id"), s("after"))
        }
        "interaction_response" => {
            let message = s("user_message");
            let tail = if message.is_empty() {
                String::new()
            } else {
                format!(": {}", clip(message, 160))
            };
            format!(
                "  ?? [{}] {} ({}){tail}",
                s("request_id"),
                s("decision"),
                s("source")
            )
        }
        _ => return None,
    };
    Some(line)
}
