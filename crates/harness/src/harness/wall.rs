//! The run's wall-clock limit in the driver (`[agents] max_wall_seconds`): the time the run
//! has spent, its earlier processes' included, and the deadline every effect is raced
//! against. The core decides what a passed deadline means ([`Input::OutOfTime`]); the clock
//! is tokio's, so tests run it paused.

use std::time::Duration;

use lsm_run::event::{EventEnvelope, RunEvent};

use super::*;

/// The limit and where this process's share of the run began.
#[derive(Debug, Clone, Copy)]
pub(super) struct WallClock {
    started: tokio::time::Instant,
    spent_before: Duration,
    limit_seconds: u64,
}

impl WallClock {
    /// A clock for a limit of `limit_seconds` (none: no clock), starting now, the run having
    /// spent `spent_before` in earlier processes.
    pub(super) fn new(limit_seconds: Option<u64>, spent_before: Duration) -> Option<WallClock> {
        limit_seconds.map(|limit_seconds| WallClock {
            started: tokio::time::Instant::now(),
            spent_before,
            limit_seconds,
        })
    }

    fn elapsed(&self) -> Duration {
        self.spent_before + self.started.elapsed()
    }

    fn deadline(&self) -> tokio::time::Instant {
        let left = Duration::from_secs(self.limit_seconds).saturating_sub(self.spent_before);
        self.started + left
    }

    fn passed(&self) -> bool {
        tokio::time::Instant::now() >= self.deadline()
    }

    /// What the core is told when the deadline passed during `at`.
    fn out_of_time(&self, at: &str) -> Input {
        Input::OutOfTime {
            at: at.to_string(),
            elapsed_seconds: (self.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
            max_wall_seconds: self.limit_seconds,
        }
    }
}

/// The wall-clock time the processes that wrote `journal` spent on the run: from each
/// one's first line (`run_started`, `run_resumed`) to its last, summed. The time between
/// a process's end and the next one's start (the run lying interrupted) is not counted.
pub(super) fn time_spent(journal: &[EventEnvelope]) -> Duration {
    let stamp = |e: &EventEnvelope| {
        DateTime::parse_from_rfc3339(&e.ts)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    };
    let mut total = Duration::ZERO;
    let mut segment: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
    for line in journal {
        let Some(ts) = stamp(line) else { continue };
        let begins = matches!(
            line.event,
            RunEvent::RunStarted(_) | RunEvent::RunResumed { .. }
        );
        segment = match segment {
            Some((first, last)) if begins => {
                total += (last - first).to_std().unwrap_or_default();
                Some((ts, ts))
            }
            Some((first, _)) => Some((first, ts)),
            None => Some((ts, ts)),
        };
    }
    if let Some((first, last)) = segment {
        total += (last - first).to_std().unwrap_or_default();
    }
    total
}

impl AgentHarness {
    /// The input that stands for the deadline having passed before the next effect, if it
    /// has.
    pub(super) fn out_of_time_before(&self) -> Option<Input> {
        self.wall
            .filter(WallClock::passed)
            .map(|w| w.out_of_time("between"))
    }

    /// `work`'s input, or [`Input::OutOfTime`] at `at` when the deadline passes first (the
    /// work is dropped: a tool's process is killed, a model call abandoned).
    pub(super) async fn until_deadline(
        &self,
        at: &str,
        work: impl std::future::Future<Output = Input>,
    ) -> Input {
        let Some(wall) = self.wall else {
            return work.await;
        };
        tokio::select! {
            biased;
            input = work => input,
            () = tokio::time::sleep_until(wall.deadline()) => wall.out_of_time(at),
        }
    }

    /// Resolves when the deadline passes; never, without a limit.
    pub(super) async fn deadline(&self) -> Input {
        match self.wall {
            Some(wall) => {
                tokio::time::sleep_until(wall.deadline()).await;
                wall.out_of_time("llm_call")
            }
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, ts: &str, event: RunEvent) -> EventEnvelope {
        EventEnvelope {
            seq,
            ts: ts.to_string(),
            run_id: "r".into(),
            schema_version: lsm_run::event::SCHEMA_VERSION,
            event,
        }
    }

    fn resumed() -> RunEvent {
        RunEvent::RunResumed {
            pid: 1,
            after_seq: 0,
        }
    }

    fn other() -> RunEvent {
        RunEvent::Artifact { path: "a".into() }
    }

    #[test]
    fn the_time_spent_sums_each_process_from_its_first_line_to_its_last() {
        let journal = [
            line(1, "2030-01-01T10:00:00.000Z", resumed()),
            line(2, "2030-01-01T10:00:07.500Z", other()),
            // An hour interrupted is not spent.
            line(3, "2030-01-01T11:00:00.000Z", resumed()),
            line(4, "2030-01-01T11:00:02.000Z", other()),
            line(5, "bad stamp", other()),
        ];
        assert_eq!(time_spent(&journal), Duration::from_millis(9_500));
        assert_eq!(time_spent(&journal[..1]), Duration::ZERO);
        assert_eq!(time_spent(&[]), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_is_the_limit_less_what_was_spent_before() {
        let clock = WallClock::new(Some(10), Duration::from_secs(8)).unwrap();
        assert!(!clock.passed());
        tokio::time::advance(Duration::from_millis(1_999)).await;
        assert!(!clock.passed());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(clock.passed());
        let Input::OutOfTime {
            elapsed_seconds,
            max_wall_seconds,
            ..
        } = clock.out_of_time("tools")
        else {
            panic!("an out-of-time input")
        };
        assert_eq!((elapsed_seconds, max_wall_seconds), (10.0, 10));
        assert!(WallClock::new(None, Duration::ZERO).is_none());
    }
}
