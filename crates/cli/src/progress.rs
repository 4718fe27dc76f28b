//! Human progress on stderr, one line per transcript event worth seeing.

use std::sync::atomic::{AtomicBool, Ordering};

use lsm_harness::EventSink;
use serde_json::Value;

/// Prints a short line for each event of interest; streamed text as it arrives.
#[derive(Debug, Default)]
pub struct StderrProgress {
    /// Streamed text was printed since the last full line.
    mid_line: AtomicBool,
}

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
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
        if s("event") == "llm_stream" && s("kind") == "text_delta" {
            if !self.mid_line.swap(true, Ordering::SeqCst) {
                eprint!("[{}] model: ", s("label"));
            }
            eprint!("{}", s("text"));
            return;
        }
        let streamed = self.mid_line.swap(false, Ordering::SeqCst);
        if streamed {
            eprintln!();
            if s("event") == "llm_response" {
                // The text is on screen already; say only what else the model asked for.
                let calls = e["tool_calls"].as_array().map_or(0, Vec::len);
                if calls > 0 {
                    eprintln!("[{}] model requested {calls} tool call(s)", s("label"));
                }
                return;
            }
        }
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
        "llm_retry" => format!(
            "[{}] LLM call failed (attempt {}), retrying in {} ms: {}",
            s("label"),
            e["attempt"],
            e["delay_ms"],
            clip(s("reason"), 200)
        ),
        "llm_chain_reset" => format!(
            "[{}] the server lost the conversation; resending the full history",
            s("label")
        ),
        "llm_stream" => match s("kind") {
            "tool_call_started" => format!("[{}] model is calling {}…", s("label"), s("name")),
            // Text and argument pieces would flood a log one line each.
            _ => return None,
        },
        "budget_exhausted" => {
            format!("budget exhausted ({}); no further LLM calls", s("reason"))
        }
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
