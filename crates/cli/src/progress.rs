//! Human progress on stderr, one line per run event worth seeing.

use std::sync::atomic::{AtomicBool, Ordering};

use lsm_harness::{EventEnvelope, EventSink, RunEvent};
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
    fn event(&self, e: &EventEnvelope) {
        if let RunEvent::LlmStream { label, data } = &e.event
            && data.get("kind").and_then(Value::as_str) == Some("text_delta")
        {
            if !self.mid_line.swap(true, Ordering::SeqCst) {
                eprint!("[{label}] model: ");
            }
            eprint!("{}", data.get("text").and_then(Value::as_str).unwrap_or(""));
            return;
        }
        let streamed = self.mid_line.swap(false, Ordering::SeqCst);
        if streamed {
            eprintln!();
            if let RunEvent::LlmResponse {
                label, tool_calls, ..
            } = &e.event
            {
                // The text is on screen already; say only what else the model asked for.
                if !tool_calls.is_empty() {
                    eprintln!(
                        "[{label}] model requested {} tool call(s)",
                        tool_calls.len()
                    );
                }
                return;
            }
        }
        if let Some(line) = describe(e) {
            eprintln!("{line}");
        }
    }
}

/// One human line for a run event worth seeing, or `None`.
pub fn describe(e: &EventEnvelope) -> Option<String> {
    let field = |m: &serde_json::Map<String, Value>, k: &str| -> String {
        m.get(k).and_then(Value::as_str).unwrap_or("").to_string()
    };
    let line = match &e.event {
        RunEvent::LlmRequest {
            label,
            iteration,
            messages,
            tools,
            ..
        } => format!(
            "[{label}] llm call {iteration} ({messages} messages, {} tools)",
            tools.len()
        ),
        RunEvent::LlmResponse {
            label,
            text,
            tool_calls,
            ..
        } => {
            if text.is_empty() {
                format!(
                    "[{label}] model requested {} tool call(s)",
                    tool_calls.len()
                )
            } else {
                format!("[{label}] model: {}", clip(text, 160))
            }
        }
        RunEvent::ToolCallStarted {
            tool, arguments, ..
        } => format!("  -> {tool} {}", clip(&arguments.to_string(), 160)),
        RunEvent::ToolResult {
            tool,
            success,
            summary,
            ..
        } => {
            if *success {
                format!("  <- {tool}: {}", clip(summary, 160))
            } else {
                format!("  <- {tool} failed: {}", clip(summary, 200))
            }
        }
        RunEvent::ToolDenied { tool, reason, .. } => {
            format!("  <- {tool} refused: {}", clip(reason, 200))
        }
        RunEvent::LlmError { error, .. } => format!("LLM error: {error}"),
        RunEvent::LlmRetry {
            label,
            attempt,
            delay_ms,
            reason,
        } => format!(
            "[{label}] LLM call failed (attempt {attempt}), retrying in {delay_ms} ms: {}",
            clip(reason, 200)
        ),
        RunEvent::LlmChainReset { label, .. } => {
            format!("[{label}] the server lost the conversation; resending the full history")
        }
        RunEvent::LlmStream { label, data } => match data.get("kind").and_then(Value::as_str) {
            Some("tool_call_started") => {
                format!("[{label}] model is calling {}…", field(data, "name"))
            }
            // Text and argument pieces would flood a log one line each.
            _ => return None,
        },
        RunEvent::BudgetExhausted { reason, .. } => {
            format!("budget exhausted ({reason}); no further LLM calls")
        }
        RunEvent::StopRequested { .. } => "stop requested".to_string(),
        RunEvent::Blocked { reason, .. } => format!("blocked: {reason}"),
        RunEvent::InteractionRequest(m) => format!(
            "  ?? {} [{}] waiting for an answer: {}",
            field(m, "request_type"),
            field(m, "request_id"),
            clip(&field(m, "prompt"), 160)
        ),
        RunEvent::InteractionAcknowledged(m) => {
            format!("  ?? [{}] shown to the user", field(m, "request_id"))
        }
        RunEvent::InteractionTimeout(m) => format!(
            "  ?? [{}] timed out after {}",
            field(m, "request_id"),
            field(m, "after")
        ),
        RunEvent::InteractionResponse(m) => {
            let message = field(m, "user_message");
            let tail = if message.is_empty() {
                String::new()
            } else {
                format!(": {}", clip(&message, 160))
            };
            format!(
                "  ?? [{}] {} ({}){tail}",
                field(m, "request_id"),
                field(m, "decision"),
                field(m, "source")
            )
        }
        RunEvent::WorkersRequested { requests, .. } => format!(
            "  => dispatching {} worker(s): {}",
            requests.len(),
            requests
                .iter()
                .map(|r| format!("{} ({})", r.item_id, r.capability))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        RunEvent::WorkerStarted {
            item_id,
            capability,
            agent,
            worker_run_id,
            ..
        } => format!("  [{item_id}:{capability}] started: {agent} run {worker_run_id}"),
        RunEvent::WorkerProgress {
            item_id,
            capability,
            update,
            ..
        } => format!("  [{item_id}:{capability}] {}", clip(update, 160)),
        RunEvent::WorkerCompleted {
            item_id, outcome, ..
        } => format!(
            "  [{item_id}:{}] completed: {} finding(s)",
            outcome.capability,
            outcome.report.findings.len()
        ),
        RunEvent::WorkerFailed {
            item_id, outcome, ..
        } => format!(
            "  [{item_id}:{}] failed ({}): {}",
            outcome.capability,
            outcome.stop_reason,
            clip(
                &outcome
                    .report
                    .escalations
                    .first()
                    .cloned()
                    .unwrap_or_default(),
                160
            )
        ),
        _ => return None,
    };
    Some(line)
}
