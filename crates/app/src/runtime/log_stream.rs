//! A run's live log: the last `limit` lines, oldest dropped first and counted. A line is an
//! event as the front end's [`Describe`] shows it (this crate does not decide what a person
//! reads), or an agent's own log line.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use lsm_harness::{EventEnvelope, EventSink, RunEvent};

/// How a front end shows a run event as one line of a run's log (`None`: not shown).
pub type Describe = fn(&EventEnvelope) -> Option<String>;

/// One line of a run's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Position in the run's log, from 1; never reused, so gaps show what was dropped.
    pub seq: u64,
    /// The transcript event's name.
    pub event: String,
    /// The line as shown.
    pub text: String,
}

/// A worker run of this run (a conductor's), as its events say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLine {
    /// The agenda item.
    pub item_id: String,
    /// Its capability.
    pub capability: String,
    /// `running`, `done`, or the stop reason it failed with.
    pub status: String,
}

/// What a reader gets: the lines kept, and how many older ones were dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogSnapshot {
    /// Oldest first.
    pub lines: Vec<LogLine>,
    /// Lines dropped to keep within the limit.
    pub dropped: u64,
}

#[derive(Default)]
struct Inner {
    lines: VecDeque<LogLine>,
    dropped: u64,
    next_seq: u64,
    workers: Vec<WorkerLine>,
}

/// A bounded per-run log. Receives the run's transcript events ([`EventSink`]); readers take
/// snapshots.
pub struct LogStream {
    limit: usize,
    describe: Describe,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for LogStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStream")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl LogStream {
    /// Keep at most `limit` lines (at least 1), events shown as `describe` says.
    pub fn new(limit: usize, describe: Describe) -> Self {
        LogStream {
            limit: limit.max(1),
            describe,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Append a line; drops (and counts) the oldest when full.
    pub fn push(&self, event: &str, text: String) {
        let mut inner = self.lock();
        inner.next_seq += 1;
        let seq = inner.next_seq;
        if inner.lines.len() == self.limit {
            inner.lines.pop_front();
            inner.dropped += 1;
        }
        inner.lines.push_back(LogLine {
            seq,
            event: event.to_string(),
            text,
        });
    }

    /// The run's workers, in the order they started, with their status now.
    pub fn workers(&self) -> Vec<WorkerLine> {
        self.lock().workers.clone()
    }

    fn worker_status(&self, item_id: &str, capability: &str, status: String) {
        let mut inner = self.lock();
        match inner.workers.iter_mut().find(|w| w.item_id == item_id) {
            Some(w) => w.status = status,
            None => inner.workers.push(WorkerLine {
                item_id: item_id.to_string(),
                capability: capability.to_string(),
                status,
            }),
        }
    }

    /// The lines kept and the dropped count.
    pub fn snapshot(&self) -> LogSnapshot {
        let inner = self.lock();
        LogSnapshot {
            lines: inner.lines.iter().cloned().collect(),
            dropped: inner.dropped,
        }
    }
}

impl EventSink for LogStream {
    fn event(&self, e: &EventEnvelope) {
        match &e.event {
            RunEvent::WorkerStarted {
                item_id,
                capability,
                ..
            } => self.worker_status(item_id, capability, "running".into()),
            RunEvent::WorkerCompleted {
                item_id, outcome, ..
            } => {
                self.worker_status(item_id, &outcome.capability, "done".into());
            }
            RunEvent::WorkerFailed {
                item_id, outcome, ..
            } => {
                self.worker_status(
                    item_id,
                    &outcome.capability,
                    outcome.stop_reason.to_string(),
                );
            }
            _ => {}
        }
        if let Some(text) = (self.describe)(e) {
            self.push(e.event.name(), text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool call as `-> tool`, nothing else.
    fn tool_calls(e: &EventEnvelope) -> Option<String> {
        match &e.event {
            RunEvent::ToolCallStarted { tool, .. } => Some(format!("-> {tool}")),
            _ => None,
        }
    }

    #[test]
    fn the_oldest_lines_are_dropped_and_counted() {
        let log = LogStream::new(3, tool_calls);
        for i in 1..=5 {
            log.push("note", format!("line {i}"));
        }
        let s = log.snapshot();
        assert_eq!(s.dropped, 2);
        let texts: Vec<_> = s.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["line 3", "line 4", "line 5"]);
        assert_eq!(s.lines[0].seq, 3);
    }

    #[test]
    fn events_become_the_lines_the_front_end_describes_them_as() {
        let log = LogStream::new(10, tool_calls);
        let envelope = |event| EventEnvelope {
            seq: 1,
            ts: String::new(),
            run_id: "r".into(),
            schema_version: lsm_harness::SCHEMA_VERSION,
            event,
        };
        log.event(&envelope(lsm_harness::RunEvent::ToolCallStarted {
            label: None,
            call_id: "c1".into(),
            tool: "read_file".into(),
            arguments: serde_json::json!({"path": "a"}),
        }));
        log.event(&envelope(lsm_harness::RunEvent::Artifact {
            path: "a".into(),
        }));
        let s = log.snapshot();
        assert_eq!(s.lines.len(), 1, "{s:?}");
        assert!(s.lines[0].text.contains("-> read_file"));
    }

    #[test]
    fn a_conductor_s_workers_are_tracked_with_their_status() {
        let log = LogStream::new(10, tool_calls);
        let envelope = |event| EventEnvelope {
            seq: 1,
            ts: String::new(),
            run_id: "r".into(),
            schema_version: lsm_harness::SCHEMA_VERSION,
            event,
        };
        let started = |item: &str, capability: &str| RunEvent::WorkerStarted {
            wave: 0,
            item_id: item.into(),
            capability: capability.into(),
            agent: capability.into(),
            worker_run_id: format!("w-{item}"),
            parent_run_id: "r".into(),
            run_dir: String::new(),
            objective: String::new(),
        };
        log.event(&envelope(started("a1", "researcher")));
        log.event(&envelope(started("a2", "terminal")));
        let request = lsm_phase::WorkerRequest {
            item_id: "a2".into(),
            capability: "terminal".into(),
            objective: String::new(),
        };
        let mut outcome = lsm_phase::WorkerOutcome::failed(&request, "down");
        outcome.stop_reason = lsm_phase::StopReason::Blocked;
        log.event(&envelope(RunEvent::WorkerFailed {
            wave: 0,
            item_id: "a2".into(),
            worker_run_id: None,
            parent_run_id: "r".into(),
            outcome,
            usage: lsm_harness::RunUsage::default(),
        }));
        let w = log.workers();
        assert_eq!(
            w.iter()
                .map(|w| (w.item_id.as_str(), w.status.as_str()))
                .collect::<Vec<_>>(),
            [("a1", "running"), ("a2", "blocked")]
        );
    }
}
