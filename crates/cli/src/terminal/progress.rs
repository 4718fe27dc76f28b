//! Human progress on stderr: one line per run event worth seeing, streamed text as it
//! arrives, and — on a terminal — a spinner with the elapsed time while a model call is
//! under way. [`ProgressView`] decides what to show from the events and a [`Clock`]; the
//! printer only draws it, so the view is tested with a fake clock.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::text::{clip, clip_into, clip_json_into, one_line, one_line_from, terminal_text};
use lsm_app::protocol::{EventEnvelope, EventSink, RunEvent};
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
fn prefix(label: &str) -> Prefix<'_> {
    Prefix(label)
}

/// [`prefix`]'s text, written where it goes (no string of its own for each line).
struct Prefix<'a>(&'a str);

impl std::fmt::Display for Prefix<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() || self.0 == DEFAULT_LABEL {
            Ok(())
        } else {
            write!(f, "[{}] ", self.0)
        }
    }
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
    /// The spinner's line is on screen (a terminal's printer clears it before writing).
    spinner_drawn: bool,
}

/// Back to the start of the line and erase it (a terminal's spinner line).
const CLEAR_LINE: &str = "\r\x1b[2K";

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
    #[cfg(test)]
    pub fn on_event(&mut self, e: &EventEnvelope, now: Duration) -> String {
        let mut out = String::new();
        self.on_event_into(e, now, &mut out);
        out
    }

    /// [`ProgressView::on_event`]'s text appended to `out`.
    fn on_event_into(&mut self, e: &EventEnvelope, now: Duration, out: &mut String) {
        if let RunEvent::LlmStream { label, data } = &e.event
            && data.get("kind").and_then(Value::as_str) == Some("text_delta")
        {
            if let Some(call) = self.call.as_mut() {
                call.streaming = true;
            }
            if !self.mid_line {
                self.mid_line = true;
                let _ = write!(out, "{}model: ", prefix(label));
            }
            out.push_str(&terminal_text(
                data.get("text").and_then(Value::as_str).unwrap_or(""),
            ));
            return;
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
            // A call that failed, or was abandoned (a stop, the wall-clock limit), is over:
            // no spinner is left drawing after it.
            RunEvent::LlmError { .. }
            | RunEvent::StopRequested { .. }
            | RunEvent::WallTimeExceeded(_)
            | RunEvent::PhaseEnded { .. } => self.call = None,
            RunEvent::LlmResponse { .. } => {
                if let Some(call) = self.call.take() {
                    let took = now.saturating_sub(call.started);
                    // A slow call says how long it took (the spinner is gone now).
                    if took >= Duration::from_secs(1) && !streamed {
                        let _ = writeln!(
                            out,
                            "{}model answered in {:.1} s",
                            prefix(&call.label),
                            took.as_secs_f64()
                        );
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
                    let _ = writeln!(
                        out,
                        "{}model requested {} tool call(s)",
                        prefix(label),
                        tool_calls.len()
                    );
                }
                return;
            }
        }
        let wrote = match &e.event {
            RunEvent::LlmRetry {
                label,
                attempt,
                delay_ms,
                reason,
            } => {
                out.push_str(&one_line(format!(
                    "{}{}",
                    prefix(label),
                    retry_line(reason, *attempt, *delay_ms, self.max_retries)
                )));
                true
            }
            // Shown once, at the end, as the run's error.
            RunEvent::LlmError { .. } => false,
            // The spinner shows a call under way; its line is not needed.
            RunEvent::LlmRequest { .. } => false,
            _ => describe_into(e, out),
        };
        if wrote {
            out.push('\n');
        }
    }

    /// What to write for the events of one step at `now`, at once: their text, after a
    /// spinner line on screen is cleared (it is drawn again below while the call lasts; a
    /// line of streamed text is left as it is). Empty when there is nothing to show.
    pub fn print(&mut self, batch: &[EventEnvelope], now: Duration) -> String {
        // Room for a step's usual lines (a call asked for, started, answered) at once.
        let mut text = String::with_capacity(512);
        for e in batch {
            self.on_event_into(e, now, &mut text);
        }
        if !text.is_empty() && std::mem::take(&mut self.spinner_drawn) {
            text.insert_str(0, CLEAR_LINE);
        }
        text
    }

    /// What the spinner's thread writes at `now` (on a terminal): the spinner line drawn
    /// in place while a call is under way and nothing streams, its line cleared once the
    /// call is over, nothing otherwise.
    pub fn redraw(&mut self, now: Duration) -> Option<String> {
        match self.spinner(now) {
            Some(line) => {
                self.spinner_drawn = true;
                Some(format!("{CLEAR_LINE}{line}"))
            }
            None if self.spinner_drawn => {
                self.spinner_drawn = false;
                Some(CLEAR_LINE.to_string())
            }
            None => None,
        }
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
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(100));
                    let Ok(mut view) = view.lock() else { return };
                    if let Some(text) = view.redraw(clock.now()) {
                        let mut err = std::io::stderr().lock();
                        let _ = err.write_all(text.as_bytes());
                        let _ = err.flush();
                    }
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
        self.events(std::slice::from_ref(e));
    }

    /// A step's lines in one `write`.
    fn events(&self, batch: &[EventEnvelope]) {
        let Ok(mut view) = self.view.lock() else {
            return;
        };
        let text = view.print(batch, self.clock.now());
        if text.is_empty() {
            return;
        }
        // One `write` for the step's lines (stderr is not buffered).
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }
}

/// One human line for a run event worth seeing, or `None`.
pub fn describe(e: &EventEnvelope) -> Option<String> {
    let mut line = String::new();
    describe_into(e, &mut line).then_some(line)
}

/// [`describe`]'s line appended to `out` (without a line break); whether there is one. The
/// lines of every model call (a tool call asked for, started, answered) are written in place,
/// part by part, each part cleaned as it is written; the others are made as strings first
/// and cleaned whole.
pub fn describe_into(e: &EventEnvelope, out: &mut String) -> bool {
    let start = out.len();
    match &e.event {
        RunEvent::LlmResponse {
            label,
            text,
            tool_calls,
            ..
        } if text.is_empty() => {
            let _ = write!(
                out,
                "{}model requested {} tool call(s)",
                prefix(label),
                tool_calls.len()
            );
            // The label is the configuration's, not clipped: the short line is cleaned whole.
            one_line_from(out, start);
        }
        // The tool's name comes from the model: cleaned, not clipped.
        RunEvent::ToolCallStarted {
            tool, arguments, ..
        } => {
            out.push_str("  -> ");
            clip_into(out, tool, usize::MAX);
            out.push(' ');
            clip_json_into(out, arguments, 160);
        }
        RunEvent::ToolResult {
            tool,
            success,
            summary,
            ..
        } => {
            let (said, max) = if *success {
                (": ", 160)
            } else {
                (" failed: ", 200)
            };
            out.push_str("  <- ");
            clip_into(out, tool, usize::MAX);
            out.push_str(said);
            clip_into(out, summary, max);
        }
        _ => match described(e) {
            Some(line) => {
                out.push_str(&line);
                // Tool and item names, reasons and errors come from the model or a server
                // unclipped.
                one_line_from(out, start);
            }
            None => return false,
        },
    }
    true
}

/// The line of an event [`describe_into`] does not write in place, before it is cleaned.
fn described(e: &EventEnvelope) -> Option<String> {
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
        RunEvent::BudgetExhausted(lsm_app::protocol::event::BudgetExhausted { reason, .. }) => {
            format!("budget exhausted ({reason}); no further LLM calls")
        }
        RunEvent::StopRequested { .. } => "stop requested".to_string(),
        RunEvent::ToolDeferred(d) => format!(
            "{} is handled outside lsm: the run waits for the result of call {} (`lsm runs \
             resume RUN --tool-result {}=FILE`)",
            d.tool, d.call_id, d.call_id
        ),
        RunEvent::WallTimeExceeded(e) => format!(
            "wall-clock limit reached ({:.0} s of {} s); the run pauses here: resume it with a \
             higher --max-wall-seconds",
            e.elapsed_seconds, e.max_wall_seconds
        ),
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
mod tests;
