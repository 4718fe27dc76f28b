//! What others hold of a run: the [`EventSink`] that sees its events, the [`RecordHandle`]
//! that appends to its transcript from outside the loop, and the [`RunHandle`] that gives its
//! id, folder and summary back to whoever started it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lsm_run::event::{EventEnvelope, RunEvent};
use lsm_run::summary::RunSummary;
use serde_json::Value;

use crate::error::HarnessError;
use crate::records::Recorder;

/// Receives every event as it is recorded (for live progress and log streams): the journaled
/// ones exactly as written to the transcript, and streamed model output (`llm_stream`,
/// `seq` 0) that is never journaled.
pub trait EventSink: Send + Sync {
    /// One event.
    fn event(&self, event: &EventEnvelope);

    /// The events one step committed, in order, once its lines are written (instead of
    /// [`EventSink::event`] for each). By default, `event` for each; a printer overrides it
    /// to write a step's lines at once (one `write` for a step instead of one per line).
    fn events(&self, batch: &[EventEnvelope]) {
        for event in batch {
            self.event(event);
        }
    }

    /// `event` is about to be written as journal line `seq` (called before the write, under
    /// the journal's lock; nothing by default). For the crash tests: it exists only in builds
    /// with the `crash-points` feature (test builds).
    #[cfg(feature = "crash-points")]
    fn before_journal(&self, seq: u64, event: &RunEvent) {
        let _ = (seq, event);
    }

    /// Whether this sink needs each line written before it hears of the next
    /// ([`EventSink::before_journal`] of line `n` called with every line before `n` already
    /// written, and [`EventSink::event`] of line `n` before line `n + 1` is written). Off by
    /// default: the lines one step commits are then written at once, after
    /// `before_journal` of each and before `event` of each. Crash tests turn it on; it exists
    /// only in builds with the `crash-points` feature.
    #[cfg(feature = "crash-points")]
    fn watches_each_line(&self) -> bool {
        false
    }
}

/// Appends events to one run's transcript from outside its loop; cheap to clone. Events are
/// numbered in one sequence with the loop's own, and reach the event sink as they do.
#[derive(Clone)]
pub struct RecordHandle {
    pub(crate) recorder: Arc<Mutex<Recorder>>,
    pub(crate) events: Option<Arc<dyn EventSink>>,
}

impl std::fmt::Debug for RecordHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordHandle").finish_non_exhaustive()
    }
}

impl RecordHandle {
    /// Append the event named `event` with `fields` (an object) and return the line as
    /// written. For producers outside the harness (the interaction channel) whose events
    /// come by name; see [`RunEvent::from_parts`].
    ///
    /// # Errors
    /// When `event` is not an event of the schema, or the transcript cannot be written (the
    /// message names the file); the caller decides whether that matters — the loop itself
    /// stops at its next record.
    pub fn record(&self, event: &str, fields: Value) -> Result<EventEnvelope, HarnessError> {
        self.record_event(RunEvent::from_parts(event, fields)?)
    }

    /// Append `event` and return the line as written.
    ///
    /// # Errors
    /// When the transcript cannot be written.
    pub fn record_event(&self, event: RunEvent) -> Result<EventEnvelope, HarnessError> {
        record_to(&self.recorder, self.events.as_ref(), event)
    }

    /// Hand `event` to the event sink only (`seq` 0, never journaled), redacted like a
    /// journal line.
    pub fn show(&self, event: RunEvent) {
        let Some(sink) = &self.events else {
            return;
        };
        let envelope = lock_recorder(&self.recorder).envelope(event, 0);
        let shown = serde_json::to_value(&envelope)
            .ok()
            .map(|mut v| {
                lsm_sandbox::redact_json_secrets(&mut v);
                v
            })
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or(envelope);
        sink.event(&shown);
    }
}

pub(crate) fn lock_recorder(recorder: &Mutex<Recorder>) -> MutexGuard<'_, Recorder> {
    // A panic while appending cannot leave the file in a state worse than a torn last line.
    recorder.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn record_to(
    recorder: &Mutex<Recorder>,
    events: Option<&Arc<dyn EventSink>>,
    event: RunEvent,
) -> Result<EventEnvelope, HarnessError> {
    let written = {
        let mut recorder = lock_recorder(recorder);
        #[cfg(feature = "crash-points")]
        if let Some(sink) = events
            && event.is_journaled()
        {
            sink.before_journal(recorder.next_seq(), &event);
        }
        recorder.append_shown(event, events.is_some())?
    };
    if let Some(sink) = events {
        sink.event(&written);
    }
    Ok(written)
}

/// Record the events one step committed, in order: one batch
/// ([`Recorder::append_all`]), unless the sink watches each line (then one at a time, as
/// [`record_to`]).
pub(crate) fn record_all(
    recorder: &Mutex<Recorder>,
    events: Option<&Arc<dyn EventSink>>,
    batch: Vec<RunEvent>,
) -> Result<(), HarnessError> {
    #[cfg(feature = "crash-points")]
    let one_at_a_time = events.is_some_and(|sink| sink.watches_each_line());
    #[cfg(not(feature = "crash-points"))]
    let one_at_a_time = false;
    if batch.len() < 2 || one_at_a_time {
        for event in batch {
            record_to(recorder, events, event)?;
        }
        return Ok(());
    }
    let written = {
        let mut recorder = lock_recorder(recorder);
        #[cfg(feature = "crash-points")]
        if let Some(sink) = events {
            let first = recorder.next_seq();
            for (seq, event) in (first..).zip(&batch) {
                if event.is_journaled() {
                    sink.before_journal(seq, event);
                }
            }
        }
        recorder.append_all(batch, events.is_some())?
    };
    if let Some(sink) = events {
        sink.events(&written);
    }
    Ok(())
}

/// The owner's view of one run, filled in by its harness: the run's id and folder once the
/// harness exists, and the summary, in memory, once the run has finished. Cheap to clone;
/// give it to the harness (or its factory) before the run and read it after.
#[derive(Debug, Clone, Default)]
pub struct RunHandle(Arc<Mutex<HandleState>>);

#[derive(Debug, Default)]
struct HandleState {
    run_id: Option<String>,
    run_dir: Option<PathBuf>,
    summary: Option<RunSummary>,
    records_error: Option<String>,
}

impl RunHandle {
    /// An empty handle.
    pub fn new() -> Self {
        RunHandle::default()
    }

    fn lock(&self) -> MutexGuard<'_, HandleState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The run's id, once its harness exists.
    pub fn run_id(&self) -> Option<String> {
        self.lock().run_id.clone()
    }

    /// The run's log folder, once its harness exists.
    pub fn run_dir(&self) -> Option<PathBuf> {
        self.lock().run_dir.clone()
    }

    /// The run's summary (as written to `run_summary.json`), once it has finished.
    pub fn summary(&self) -> Option<RunSummary> {
        self.lock().summary.clone()
    }

    /// Why the run's records could not be written, if they could not.
    pub fn records_error(&self) -> Option<String> {
        self.lock().records_error.clone()
    }

    pub(crate) fn started(&self, run_id: &str, run_dir: PathBuf) {
        let mut s = self.lock();
        s.run_id = Some(run_id.to_string());
        s.run_dir = Some(run_dir);
        s.summary = None;
        s.records_error = None;
    }

    pub(crate) fn finished(&self, summary: &RunSummary, records_error: Option<String>) {
        let mut s = self.lock();
        s.summary = Some(summary.clone());
        s.records_error = records_error;
    }
}
