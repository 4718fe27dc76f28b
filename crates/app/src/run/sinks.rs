//! Event sinks every front end may combine with its own: several sinks as one ([`fanout`]),
//! and the crash points of the crash tests ([`crash_points`]), which exist only in builds
//! with the `crash-points` feature (the end-to-end tests build `lsm` with it): in any other
//! build their variables do nothing.

use std::sync::Arc;

#[cfg(feature = "crash-points")]
use lsm_harness::RunEvent;
use lsm_harness::{EventEnvelope, EventSink};

/// Test-only: abort the process right after journal line N is written.
pub const CRASH_AFTER_SEQ_ENV: &str = "LSM_TEST_CRASH_AFTER_SEQ";
/// Test-only: abort the process right before journal line N is written (for a `tool_result`,
/// after the tool ran).
pub const CRASH_BEFORE_SEQ_ENV: &str = "LSM_TEST_CRASH_BEFORE_SEQ";

/// The crash points their variables ([`CRASH_AFTER_SEQ_ENV`], [`CRASH_BEFORE_SEQ_ENV`]) set,
/// if any; always none in a build without the `crash-points` feature.
#[cfg(not(feature = "crash-points"))]
pub fn crash_points() -> Option<Arc<dyn EventSink>> {
    None
}

/// The crash points their variables ([`CRASH_AFTER_SEQ_ENV`], [`CRASH_BEFORE_SEQ_ENV`]) set,
/// if any.
#[cfg(feature = "crash-points")]
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
#[cfg(feature = "crash-points")]
struct CrashPoint {
    after: Option<u64>,
    before: Option<u64>,
}

#[cfg(feature = "crash-points")]
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

    #[cfg(feature = "crash-points")]
    fn before_journal(&self, seq: u64, event: &RunEvent) {
        for sink in &self.0 {
            sink.before_journal(seq, event);
        }
    }

    #[cfg(feature = "crash-points")]
    fn watches_each_line(&self) -> bool {
        self.0.iter().any(|sink| sink.watches_each_line())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(not(feature = "crash-points"))]
    #[test]
    fn without_the_feature_the_crash_variables_do_nothing() {
        // The variables are read from the environment: the check runs in a child process
        // of this test binary, started with them set.
        let child = std::env::var_os("LSM_SINKS_TEST_CHILD").is_some();
        if child {
            assert!(
                crash_points().is_none(),
                "a shipped build has no crash points"
            );
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let status = std::process::Command::new(exe)
            .args([
                "--exact",
                "run::sinks::tests::without_the_feature_the_crash_variables_do_nothing",
                "--nocapture",
            ])
            .env("LSM_SINKS_TEST_CHILD", "1")
            .env(CRASH_AFTER_SEQ_ENV, "1")
            .env(CRASH_BEFORE_SEQ_ENV, "1")
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[cfg(feature = "crash-points")]
    #[test]
    fn with_the_feature_the_crash_variables_set_crash_points() {
        let child = std::env::var_os("LSM_SINKS_TEST_CHILD").is_some();
        if child {
            assert!(crash_points().is_some());
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let status = std::process::Command::new(exe)
            .args([
                "--exact",
                "run::sinks::tests::with_the_feature_the_crash_variables_set_crash_points",
                "--nocapture",
            ])
            .env("LSM_SINKS_TEST_CHILD", "1")
            .env(CRASH_AFTER_SEQ_ENV, "7")
            .status()
            .unwrap();
        assert!(status.success());
    }
}
