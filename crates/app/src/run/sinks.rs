//! Event sinks every front end may combine with its own: several sinks as one ([`fanout`]),
//! and the test-only crash points ([`crash_points`]).

use std::sync::Arc;

use lsm_harness::{EventEnvelope, EventSink, RunEvent};

/// Test-only: abort the process right after journal line N is written.
pub const CRASH_AFTER_SEQ_ENV: &str = "LSM_TEST_CRASH_AFTER_SEQ";
/// Test-only: abort the process right before journal line N is written (for a `tool_result`,
/// after the tool ran).
pub const CRASH_BEFORE_SEQ_ENV: &str = "LSM_TEST_CRASH_BEFORE_SEQ";

/// The crash points their variables ([`CRASH_AFTER_SEQ_ENV`], [`CRASH_BEFORE_SEQ_ENV`]) set,
/// if any.
pub fn crash_points() -> Option<Arc<dyn EventSink>> {
    let seq = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse().ok());
    let crash = CrashPoint {
        after: seq(CRASH_AFTER_SEQ_ENV),
        before: seq(CRASH_BEFORE_SEQ_ENV),
    };
    (crash.after.is_some() || crash.before.is_some()).then(|| Arc::new(crash) as _)
}

/// `sinks` as one sink, in order (`None` when there is none).
pub fn fanout(mut sinks: Vec<Arc<dyn EventSink>>) -> Option<Arc<dyn EventSink>> {
    match sinks.len() {
        0 => None,
        1 => sinks.pop(),
        _ => Some(Arc::new(Fanout(sinks))),
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
