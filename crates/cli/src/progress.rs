//! Human progress on stderr: one line per run event worth seeing, streamed text as it
//! arrives, and — on a terminal — a spinner with the elapsed time while a model call is
//! under way. [`ProgressView`] decides what to show from the events and a [`Clock`]; the
//! printer only draws it, so the view is tested with a fake clock.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lsm_harness::{EventEnvelope, EventSink, RunEvent};
use serde_json::Value;

/// The harness's label of a run's primary context: an internal name, never shown.
const DEFAULT_LABEL: &str = "__default__";

/// Time since some fixed start.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Duration;
}

/// The real clock.
#[derive(Debug)]
pub struct SystemClock(Instant);

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock(Instant::now())
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// `[label] ` for a named context; nothing for the primary one.
fn prefix(label: &str) -> String {
    if label.is_empty() || label == DEFAULT_LABEL {
        String::new()
    } else {
        format!("[{label}] ")
    }
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

/// A wait as people say it: `2 s`, `0.5 s`, `1.5 s`.
fn seconds(ms: u64) -> String {
    if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// The announcement of a retry: `429 from openai, retry 2/4 in 2 s` — what failed (the HTTP
/// status, or the kind of failure), whose server, which retry of how many, and the wait.
pub fn retry_line(reason: &str, attempt: u32, delay_ms: u64, max_retries: Option<u32>) -> String {
    let (provider, detail) = reason.split_once(": ").unwrap_or(("the server", reason));
    let status = detail
        .split(|c: char| !c.is_ascii_digit())
        .find(|w| w.len() == 3 && (w.starts_with('4') || w.starts_with('5')))
        .map(str::to_string);
    let what = match status {
        Some(code) => code,
        None if detail.contains("timed out") => "a timeout".to_string(),
        None if detail.contains("cannot reach") || detail.contains("connect") => {
            "no connection".to_string()
        }
        None => clip(detail, 60),
    };
    let of = max_retries.map(|m| format!("/{m}")).unwrap_or_default();
    format!(
        "{what} from {provider}, retry {attempt}{of} in {}",
        seconds(delay_ms)
    )
}

/// A model call under way.
#[derive(Debug, Clone)]
struct Call {
    label: String,
    iteration: u64,
    started: Duration,
    /// Its text is being streamed: the text is the progress, no spinner.
    streaming: bool,
}

/// What the person sees, decided from the run's events.
#[derive(Debug, Default)]
pub struct ProgressView {
    max_retries: Option<u32>,
    call: Option<Call>,
    mid_line: bool,
}

/// The spinner's frames.
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

impl ProgressView {
    /// A view that says how many retries a call gets (`[llm] max_retries`).
    pub fn new(max_retries: Option<u32>) -> Self {
        ProgressView {
            max_retries,
            ..ProgressView::default()
        }
    }

    /// What to print for `e` at `now`: text to write as is (streamed pieces, full lines
    /// ending in a newline).
    pub fn on_event(&mut self, e: &EventEnvelope, now: Duration) -> String {
        let mut out = String::new();
        if let RunEvent::LlmStream { label, data } = &e.event
            && data.get("kind").and_then(Value::as_str) == Some("text_delta")
        {
            if let Some(call) = self.call.as_mut() {
                call.streaming = true;
            }
            if !self.mid_line {
                self.mid_line = true;
                out.push_str(&format!("{}model: ", prefix(label)));
            }
            out.push_str(data.get("text").and_then(Value::as_str).unwrap_or(""));
            return out;
        }
        let streamed = std::mem::take(&mut self.mid_line);
        match &e.event {
            RunEvent::LlmRequest {
                label, iteration, ..
            } => {
                self.call = Some(Call {
                    label: label.clone(),
                    iteration: u64::from(*iteration),
                    started: now,
                    streaming: false,
                });
            }
            RunEvent::LlmError { .. } => self.call = None,
            RunEvent::LlmResponse { .. } => {
                if let Some(call) = self.call.take() {
                    let took = now.saturating_sub(call.started);
                    // A slow call says how long it took (the spinner is gone now).
                    if took >= Duration::from_secs(1) && !streamed {
                        out.push_str(&format!(
                            "{}model answered in {:.1} s\n",
                            prefix(&call.label),
                            took.as_secs_f64()
                        ));
                    }
                }
            }
            _ => {}
        }
        if streamed {
            out.push('\n');
            if let RunEvent::LlmResponse {
                label, tool_calls, ..
            } = &e.event
            {
                // The text is on screen already; say only what else the model asked for.
                if !tool_calls.is_empty() {
                    out.push_str(&format!(
                        "{}model requested {} tool call(s)\n",
                        prefix(label),
                        tool_calls.len()
                    ));
                }
                return out;
            }
        }
        let line = match &e.event {
            RunEvent::LlmRetry {
                label,
                attempt,
                delay_ms,
                reason,
            } => Some(format!(
                "{}{}",
                prefix(label),
                retry_line(reason, *attempt, *delay_ms, self.max_retries)
            )),
            // Shown once, at the end, as the run's error.
            RunEvent::LlmError { .. } => None,
            // The spinner shows a call under way; its line is not needed.
            RunEvent::LlmRequest { .. } => None,
            _ => describe(e),
        };
        if let Some(line) = line {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    /// The spinner line at `now` while a model call is under way and nothing streams.
    pub fn spinner(&self, now: Duration) -> Option<String> {
        let call = self.call.as_ref().filter(|c| !c.streaming)?;
        let elapsed = now.saturating_sub(call.started);
        let frame = FRAMES[usize::try_from(elapsed.as_millis() / 100).unwrap_or(0) % FRAMES.len()];
        Some(format!(
            "{frame} {}waiting for the model (call {}) {:.1} s",
            prefix(&call.label),
            call.iteration,
            elapsed.as_secs_f64()
        ))
    }
}

/// Prints the view on stderr; on a terminal, redraws the spinner every 100 ms.
pub struct StderrProgress {
    view: Arc<Mutex<ProgressView>>,
    clock: Arc<dyn Clock>,
    terminal: bool,
    stop: Arc<AtomicBool>,
}

impl StderrProgress {
    /// Progress for a run whose calls get `max_retries` retries.
    pub fn new(max_retries: Option<u32>) -> Self {
        let progress = StderrProgress {
            view: Arc::new(Mutex::new(ProgressView::new(max_retries))),
            clock: Arc::new(SystemClock::default()),
            terminal: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            stop: Arc::new(AtomicBool::new(false)),
        };
        if progress.terminal {
            progress.spin();
        }
        progress
    }

    /// The spinner's thread: redraws the line in place while a call is under way.
    fn spin(&self) {
        let (view, clock, stop) = (
            Arc::clone(&self.view),
            Arc::clone(&self.clock),
            Arc::clone(&self.stop),
        );
        let spawned = std::thread::Builder::new()
            .name("lsm-spinner".into())
            .spawn(move || {
                let mut shown = false;
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(100));
                    let Ok(view) = view.lock() else { return };
                    let mut err = std::io::stderr().lock();
                    match view.spinner(clock.now()) {
                        Some(line) => {
                            let _ = write!(err, "\r\x1b[2K{line}");
                            shown = true;
                        }
                        None if shown => {
                            let _ = write!(err, "\r\x1b[2K");
                            shown = false;
                        }
                        None => {}
                    }
                    let _ = err.flush();
                }
            });
        if let Err(e) = spawned {
            tracing::debug!("no spinner: {e}");
        }
    }
}

impl Drop for StderrProgress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl EventSink for StderrProgress {
    fn event(&self, e: &EventEnvelope) {
        let Ok(mut view) = self.view.lock() else {
            return;
        };
        let text = view.on_event(e, self.clock.now());
        if text.is_empty() {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.terminal && view.spinner(self.clock.now()).is_none() {
            // Clear a spinner left on the line.
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = write!(err, "{text}");
        let _ = err.flush();
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
            "{}llm call {iteration} ({messages} messages, {} tools)",
            prefix(label),
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
                    "{}model requested {} tool call(s)",
                    prefix(label),
                    tool_calls.len()
                )
            } else {
                format!("{}model: {}", prefix(label), clip(text, 160))
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
            "{}{}",
            prefix(label),
            retry_line(reason, *attempt, *delay_ms, None)
        ),
        RunEvent::LlmChainReset { label, .. } => format!(
            "{}the server lost the conversation; resending the full history",
            prefix(label)
        ),
        RunEvent::LlmStream { label, data } => match data.get("kind").and_then(Value::as_str) {
            Some("tool_call_started") => {
                format!("{}model is calling {}…", prefix(label), field(data, "name"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An envelope of `event` with `fields`.
    fn ev(event: &str, fields: Value) -> Box<EventEnvelope> {
        let mut v = json!({"seq": 1, "ts": "2026-01-01T00:00:00.000Z", "run_id": "r",
                           "schema_version": 2, "event": event});
        if let (Some(o), Value::Object(f)) = (v.as_object_mut(), fields) {
            o.extend(f);
        }
        Box::new(serde_json::from_value(v).unwrap())
    }

    fn request(label: &str, iteration: u32) -> Box<EventEnvelope> {
        ev(
            "llm_request",
            json!({"label": label, "iteration": iteration, "provider": "openai",
                   "model": "m", "messages": 3, "standing_context": false, "tools": ["read_file"],
                   "max_output_tokens": 100, "previous_response_id": null,
                   "prompt_cache_key": null, "prompt_tokens_estimate": 10}),
        )
    }

    fn response(label: &str, text: &str, calls: usize) -> Box<EventEnvelope> {
        let tool_calls: Vec<Value> = (0..calls)
            .map(|i| json!({"id": format!("c{i}"), "name": "read_file", "arguments": {"path": "a.md"}}))
            .collect();
        ev(
            "llm_response",
            json!({"label": label, "iteration": 1, "text": text, "tool_calls": tool_calls,
                   "usage": {"input_tokens": 10, "output_tokens": 5, "cached_tokens": 0,
                             "cache_creation_tokens": 0},
                   "response_id": null, "tokens_used": 15, "cost_usd": null,
                   "total_cost_usd": null}),
        )
    }

    /// What a person sees: each event's text at its time, and the spinner when sampled.
    enum Step {
        Event(u64, Box<EventEnvelope>),
        Spin(u64),
    }

    fn screen(steps: Vec<Step>) -> String {
        let mut view = ProgressView::new(Some(4));
        let mut out = String::new();
        for step in steps {
            match step {
                Step::Event(ms, e) => {
                    let text = view.on_event(&e, Duration::from_millis(ms));
                    if !text.is_empty() {
                        let text = text.strip_suffix('\n').unwrap_or(&text);
                        out.push_str(&format!(
                            "@{ms:>5} ms | {}\n",
                            text.replace('\n', "\n           | ")
                        ));
                    }
                }
                Step::Spin(ms) => {
                    let line = view
                        .spinner(Duration::from_millis(ms))
                        .unwrap_or_else(|| "(no spinner)".into());
                    out.push_str(&format!("@{ms:>5} ms ~ {line}\n"));
                }
            }
        }
        out
    }

    #[test]
    fn a_run_with_a_slow_call_a_retry_streamed_text_and_an_error() {
        use Step::{Event, Spin};
        let shown = screen(vec![
            Event(0, request("__default__", 1)),
            Spin(0),
            Spin(1_250),
            Event(
                1_300,
                ev(
                    "llm_retry",
                    json!({"label": "__default__", "attempt": 2,
                "delay_ms": 2000, "reason": "openai: HTTP 429 Too Many Requests: slow down"}),
                ),
            ),
            Spin(3_400),
            Event(4_200, response("__default__", "", 1)),
            Spin(4_300),
            Event(
                4_300,
                ev(
                    "tool_call_started",
                    json!({"label": null, "call_id": "c0",
                "tool": "read_file", "arguments": {"path": "a.md"}}),
                ),
            ),
            Event(
                4_310,
                ev(
                    "tool_result",
                    json!({"label": null, "call_id": "c0",
                "tool": "read_file", "success": true, "content": "hi", "summary": "2 bytes"}),
                ),
            ),
            Event(4_400, request("subtopic:soil", 2)),
            Spin(5_000),
            Event(
                5_100,
                ev(
                    "llm_stream",
                    json!({"label": "subtopic:soil", "kind": "text_delta", "text": "Soil "}),
                ),
            ),
            Spin(5_150),
            Event(
                5_200,
                ev(
                    "llm_stream",
                    json!({"label": "subtopic:soil", "kind": "text_delta", "text": "holds carbon."}),
                ),
            ),
            Event(5_300, response("subtopic:soil", "Soil holds carbon.", 0)),
            Event(6_000, request("__default__", 3)),
            Event(
                6_100,
                ev(
                    "llm_retry",
                    json!({"label": "__default__", "attempt": 1,
                "delay_ms": 500, "reason": "openai: cannot reach http://127.0.0.1:9/v1 after 1 attempt(s): connection refused"}),
                ),
            ),
            Event(
                9_000,
                ev(
                    "llm_error",
                    json!({"label": "__default__",
                "error": "openai: cannot reach http://127.0.0.1:9/v1 after 5 attempt(s)"}),
                ),
            ),
            Spin(9_100),
        ]);
        assert!(!shown.contains("__default__"), "{shown}");
        assert!(
            !shown.contains("cannot reach http"),
            "the error is printed once, at the end: {shown}"
        );
        insta::assert_snapshot!(shown);
    }

    #[test]
    fn retry_lines_say_what_failed_where_and_which_retry() {
        assert_eq!(
            retry_line("api: HTTP 429 Too Many Requests", 2, 2000, Some(4)),
            "429 from api, retry 2/4 in 2 s"
        );
        assert_eq!(
            retry_line(
                "openai: https://x/v1 timed out (no answer within 60s)",
                1,
                500,
                None
            ),
            "a timeout from openai, retry 1 in 0.5 s"
        );
        assert_eq!(
            retry_line("anthropic: server error 503: overloaded", 3, 1500, Some(4)),
            "503 from anthropic, retry 3/4 in 1.5 s"
        );
    }
}
