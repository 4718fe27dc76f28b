//! Where a run's events go besides its transcript: the human progress printer (stderr), the
//! `--output-format stream-json` printer (stdout), and the test-only crash points.

use std::io::Write;
use std::sync::Arc;

use lsm_harness::{EventEnvelope, EventSink, RunEvent};

use crate::agents_cmd::Output;
use crate::progress::StderrProgress;

/// Test-only: abort the process right after journal line N is written.
pub const CRASH_AFTER_SEQ_ENV: &str = "LSM_TEST_CRASH_AFTER_SEQ";
/// Test-only: abort the process right before journal line N is written (for a `tool_result`,
/// after the tool ran).
pub const CRASH_BEFORE_SEQ_ENV: &str = "LSM_TEST_CRASH_BEFORE_SEQ";

/// The sink for `output` (the human progress says how many retries a call gets:
/// `max_retries`), plus the crash points when their variables are set.
pub fn for_output(output: Output, max_retries: Option<u32>) -> Option<Arc<dyn EventSink>> {
    let mut sinks: Vec<Arc<dyn EventSink>> = Vec::new();
    match output {
        Output::Human => sinks.push(Arc::new(StderrProgress::new(max_retries))),
        Output::StreamJson => sinks.push(Arc::new(StreamJson)),
        Output::Json | Output::Silent => {}
    }
    let seq = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse().ok());
    let crash = CrashPoint {
        after: seq(CRASH_AFTER_SEQ_ENV),
        before: seq(CRASH_BEFORE_SEQ_ENV),
    };
    if crash.after.is_some() || crash.before.is_some() {
        sinks.push(Arc::new(crash));
    }
    match sinks.len() {
        0 => None,
        1 => sinks.pop(),
        _ => Some(Arc::new(Fanout(sinks))),
    }
}

/// Every event as one JSON line on stdout, flushed at once (a script reads them as they come).
struct StreamJson;

impl EventSink for StreamJson {
    fn event(&self, event: &EventEnvelope) {
        self.events(std::slice::from_ref(event));
    }

    /// A step's lines in one `write`.
    fn events(&self, batch: &[EventEnvelope]) {
        let mut lines = String::new();
        for event in batch {
            // The envelope is the transcript's line, already redacted; a model's bidirectional
            // override or C1 control in it is escaped ([`crate::text::json_line`]). A line
            // that fails to serialize is left out whole, so no torn line reaches the reader.
            if let Ok(line) = serde_json::to_string(event) {
                lines.push_str(&crate::text::json_line(&line));
                lines.push('\n');
            }
        }
        if lines.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        // A closed stdout (the reader went away) must not stop the run.
        let _ = out.write_all(lines.as_bytes()).and_then(|()| out.flush());
    }
}

/// Simulates a crash: `std::process::abort()` at a journal line (for the crash tests; see
/// [`CRASH_AFTER_SEQ_ENV`]).
struct CrashPoint {
    after: Option<u64>,
    before: Option<u64>,
}

impl EventSink for CrashPoint {
    fn event(&self, event: &EventEnvelope) {
        if event.seq != 0 && Some(event.seq) == self.after {
            std::process::abort();
        }
    }

    fn before_journal(&self, seq: u64, _event: &RunEvent) {
        if Some(seq) == self.before {
            std::process::abort();
        }
    }

    fn watches_each_line(&self) -> bool {
        // "Crash after line n" and "before line n" mean exactly that line.
        true
    }
}

/// Several sinks, in order.
struct Fanout(Vec<Arc<dyn EventSink>>);

impl EventSink for Fanout {
    fn event(&self, event: &EventEnvelope) {
        for sink in &self.0 {
            sink.event(event);
        }
    }

    fn events(&self, batch: &[EventEnvelope]) {
        for sink in &self.0 {
            sink.events(batch);
        }
    }

    fn before_journal(&self, seq: u64, event: &RunEvent) {
        for sink in &self.0 {
            sink.before_journal(seq, event);
        }
    }

    fn watches_each_line(&self) -> bool {
        self.0.iter().any(|sink| sink.watches_each_line())
    }
}
