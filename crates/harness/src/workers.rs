//! Worker runs (seed 003): a parent run (the conductor) asks its executor for worker agent
//! runs through [`lsm_phase::PhaseExecutor::run_workers`]; the harness starts them through a
//! [`WorkerSpawner`] the composition root provides (only it can build a worker's harness,
//! sandbox and agent), at most `max_concurrent` at once, and records each worker's start,
//! findings, learnings and end in the parent's journal.
//!
//! - **One budget for the tree.** Every worker gets a [`RunBudget::child`] of the
//!   parent's budget: the same ceiling and ledger, so no model call of any worker starts
//!   once the tree's budget is spent, and each call's output is capped to what is left when
//!   it starts (its reservation holds until it is charged).
//! - **One stop.** Every worker gets a child of the parent's stop token.
//! - **Durable.** A wave of workers is recorded (`workers_requested`, `worker_started` with
//!   the worker's run folder, `worker_completed` / `worker_failed`, `workers_finished`); a
//!   resumed parent replays a finished wave, and for an unfinished one resumes each worker
//!   that started and did not end, and starts the others.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use lsm_phase::{WorkerOutcome, WorkerRequest};
use tokio_util::sync::CancellationToken;

use lsm_run::event::{EventEnvelope, RunEvent};
use lsm_run::{RunBudget, RunState, RunUsage};

use crate::handles::RecordHandle;
use crate::journal::read_journal;

pub use lsm_run::wave::{StartedWorker, Wave};

/// Starts (or continues) one worker run and waits for its end. Implemented by the
/// composition root.
#[async_trait::async_trait]
pub trait WorkerSpawner: Send + Sync {
    /// Run `job` to its end. Never panics, never errors: a worker that cannot run is an
    /// outcome ([`WorkerOutcome::failed`]).
    async fn run(&self, job: WorkerJob) -> WorkerOutcome;
}

/// One worker run to carry out.
pub struct WorkerJob {
    /// What the parent asked for.
    pub request: WorkerRequest,
    /// The parent's run id.
    pub parent_run_id: String,
    /// The worker's budget: a child of the parent's (give it to the worker's harness and its
    /// tools' providers).
    pub budget: RunBudget,
    /// The worker's stop token: a child of the parent's.
    pub stop: CancellationToken,
    /// The run folder of this worker's earlier run, started and not ended, to continue.
    pub resume: Option<PathBuf>,
    /// How the worker tells the parent it started and how it progresses.
    pub reporter: WorkerReporter,
}

impl std::fmt::Debug for WorkerJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerJob")
            .field("request", &self.request)
            .field("parent_run_id", &self.parent_run_id)
            .field("resume", &self.resume)
            .finish_non_exhaustive()
    }
}

/// A worker's line back to its parent's records.
#[derive(Clone)]
pub struct WorkerReporter {
    pub(crate) record: RecordHandle,
    pub(crate) wave: u32,
    pub(crate) item_id: String,
    pub(crate) capability: String,
    pub(crate) parent_run_id: String,
    pub(crate) recorded: Arc<Mutex<Vec<EventEnvelope>>>,
    pub(crate) worker_run_id: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for WorkerReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerReporter")
            .field("item_id", &self.item_id)
            .finish_non_exhaustive()
    }
}

impl WorkerReporter {
    /// The worker's run exists: record its id, agent and folder in the parent's journal
    /// (made durable before the worker's first step, so a resumed parent finds it).
    pub fn started(
        &self,
        worker_run_id: &str,
        agent: &str,
        run_dir: &std::path::Path,
        objective: &str,
    ) {
        *self
            .worker_run_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(worker_run_id.to_string());
        self.record(RunEvent::WorkerStarted {
            wave: self.wave,
            item_id: self.item_id.clone(),
            capability: self.capability.clone(),
            agent: agent.to_string(),
            worker_run_id: worker_run_id.to_string(),
            parent_run_id: self.parent_run_id.clone(),
            run_dir: run_dir.display().to_string(),
            objective: objective.to_string(),
        });
    }

    /// One of the worker's own events, shown to whoever watches the parent (progress
    /// output, the TUI, `stream-json`) as a `worker_progress` line; not journaled.
    pub fn progress(&self, event: &EventEnvelope) {
        let Some(update) = progress_line(&event.event) else {
            return;
        };
        self.record.show(RunEvent::WorkerProgress {
            item_id: self.item_id.clone(),
            capability: self.capability.clone(),
            worker_run_id: event.run_id.clone(),
            parent_run_id: self.parent_run_id.clone(),
            worker_event: event.event.name().to_string(),
            update,
        });
    }

    /// The worker's run id, once it started.
    pub fn worker_run_id(&self) -> Option<String> {
        self.worker_run_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn record(&self, event: RunEvent) {
        match self.record.record_event(event) {
            Ok(envelope) => self
                .recorded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(envelope),
            Err(e) => tracing::warn!("cannot record a worker's event in its parent's journal: {e}"),
        }
    }
}

/// What a worker's event says in one line, for its parent's watchers; `None` for events not
/// worth showing.
fn progress_line(event: &RunEvent) -> Option<String> {
    let line = match event {
        RunEvent::PhaseStarted { label, .. } => format!("phase started ({label})"),
        RunEvent::LlmRequest { iteration, .. } => format!("model call {iteration}"),
        RunEvent::ToolCallStarted { tool, .. } => format!("tool {tool}"),
        RunEvent::ToolResult {
            tool,
            success,
            summary,
            ..
        } => {
            let short: String = summary.chars().take(80).collect();
            format!("{tool} {}: {short}", if *success { "ok" } else { "failed" })
        }
        RunEvent::ToolDenied { tool, reason, .. } => format!("{tool} refused: {reason}"),
        RunEvent::WorkReported { report, .. } => {
            format!("reported: {} finding(s)", report.findings.len())
        }
        RunEvent::PhaseEnded { result, .. } => format!("phase ended: {}", result.stop_reason),
        RunEvent::CompactionFinished { tokens_after, .. } => {
            format!("context compacted to {tokens_after} tokens")
        }
        _ => return None,
    };
    Some(line)
}

/// How a worker run that already ended (its journal holds `run_finished`) ended, read from
/// its journal — for a resumed parent whose own record stops between the worker's end and
/// its `worker_completed`; what the run spent is charged to `budget` (the job's). `None`
/// when the run has not ended (resume it) or cannot be read.
pub fn ended_outcome(
    request: &WorkerRequest,
    run_dir: &std::path::Path,
    budget: &RunBudget,
) -> Option<WorkerOutcome> {
    let journal = read_journal(&run_dir.join("transcript.jsonl")).ok()?;
    ended_outcome_of(request, &journal.events, budget)
}

/// [`ended_outcome`] of a worker run's journal lines, whichever store kept them.
pub fn ended_outcome_of(
    request: &WorkerRequest,
    events: &[EventEnvelope],
    budget: &RunBudget,
) -> Option<WorkerOutcome> {
    let state = RunState::fold(events);
    state.finished.as_ref()?;
    budget.restore(state.tree_usage());
    Some(WorkerOutcome {
        item_id: request.item_id.clone(),
        capability: request.capability.clone(),
        worker_run_id: events.first().map(|e| e.run_id.clone()),
        stop_reason: state.last_stop.unwrap_or(lsm_phase::StopReason::Error),
        report: state.turn_report().unwrap_or_default(),
        error: None,
    })
}

/// The events that end a worker in its parent's journal: its findings, its learnings, then
/// `worker_completed` (it did what it was asked) or `worker_failed`.
pub(crate) fn ending_events(
    wave: u32,
    parent_run_id: &str,
    outcome: &WorkerOutcome,
    usage: RunUsage,
) -> Vec<RunEvent> {
    let mut events = Vec::new();
    let worker_run_id = outcome.worker_run_id.clone();
    for finding in &outcome.report.findings {
        events.push(RunEvent::WorkerFinding {
            wave,
            item_id: outcome.item_id.clone(),
            worker_run_id: worker_run_id.clone(),
            parent_run_id: parent_run_id.to_string(),
            finding: finding.clone(),
        });
    }
    for learning in &outcome.report.learnings {
        events.push(RunEvent::WorkerLearning {
            wave,
            item_id: outcome.item_id.clone(),
            worker_run_id: worker_run_id.clone(),
            parent_run_id: parent_run_id.to_string(),
            learning: learning.clone(),
        });
    }
    let end = if outcome.succeeded() {
        RunEvent::WorkerCompleted {
            wave,
            item_id: outcome.item_id.clone(),
            worker_run_id,
            parent_run_id: parent_run_id.to_string(),
            outcome: outcome.clone(),
            usage,
        }
    } else {
        RunEvent::WorkerFailed {
            wave,
            item_id: outcome.item_id.clone(),
            worker_run_id,
            parent_run_id: parent_run_id.to_string(),
            outcome: outcome.clone(),
            usage,
        }
    };
    events.push(end);
    events
}
