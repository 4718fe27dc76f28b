//! [`AgentHarness`]: the bounded phase loop, tool-only mode, budget, stop and records.
//!
//! The harness is the thin async driver around the pure [`crate::core`]: it carries out
//! each effect the core asks for (standing memory, the provider call and the sandbox call,
//! each raced against the stop token; the files a contract checks), feeds the outcome
//! back as an input, and journals the events of each step before the next effect starts.
//! A failure to journal ends the phase as `error`: nothing runs unrecorded. Provider
//! progress: `llm_retry` and `llm_chain_reset` are journaled, `llm_stream` pieces go to
//! the event sink only. A harness dropped before its agent finished the run still writes
//! the summary.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use chrono::{DateTime, Utc};
use lsm_phase::{AgentIdentity, PhaseExecutor, PhaseRequest, PhaseResult, RunOutcome, StopReason};
use lsm_providers::{CallObserver, LlmRequest, Provider, ProviderEvent, ToolDefinition};
use lsm_run::budget::{Grant, RunBudget};
use lsm_run::contexts::label_name;
use lsm_run::contract::{Coverage, FileFact, TaskContract};
use lsm_run::core::{
    Core, CoreConfig, Effect, Env, Input, Step, ToolDone, ToolEffect, ToolFailure, ToolInvocation,
    ToolRun, ToolSpend,
};
use lsm_run::event::{Decision, RepairAction, RunEvent, RunLaunch, SCHEMA_VERSION};
use lsm_run::guard::ToolCallGuard;
use lsm_run::hooks::{Hook, HookEvent, HookPoint};
use lsm_run::stall::StallConfig;
use lsm_run::state::{RunState, RunUsage};
use lsm_run::summary::{ContextTracking, ContractReport, LabelTracking, RunSummary, TokenUsage};
use lsm_run::{BudgetLimits, HarnessConfig};
use lsm_sandbox::{Caller, Inspection, Sandbox};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::HarnessError;
use crate::handles::{EventSink, RecordHandle, RunHandle, lock_recorder, record_all};
use crate::hooks::run_hooks;
use crate::memory::{MemoryProvider, NoMemory};
use crate::records::{Recorder, extract_constraints, now_stamp, timestamp};
use crate::resume::{ResumePoint, repair_for};
use crate::seams::RunSeams;
use crate::workers::{WorkerJob, WorkerReporter, WorkerSpawner};

mod assemble;
mod builders;
mod effects;
mod ending;
mod run_context;
mod wall;
mod worker_waves;

fn core_step(
    core: &Core,
    state: &mut RunState,
    input: Input,
    env: &Env<'_>,
    out: &mut Vec<RunEvent>,
) -> Effect {
    let Step { events, effect } = core.step(state, input, env);
    out.extend(events);
    effect
}

/// What [`AgentHarness::run`] returns to its owner.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The phase result.
    pub result: PhaseResult,
    /// The summary as written (or as it would have been, when writing failed).
    pub summary: RunSummary,
    /// Where `run_summary.json` is.
    pub summary_path: PathBuf,
    /// Where `transcript.jsonl` is.
    pub transcript_path: PathBuf,
    /// Why the records could not be written, if they could not.
    pub records_error: Option<String>,
}

/// One agent run's executor: a thin async driver over the pure [`Core`]. It carries the
/// core's effects out (standing memory, the provider call raced against the stop token, the
/// sandbox) and journals every event before the effect it describes starts. See the crate
/// documentation.
pub struct AgentHarness {
    identity: AgentIdentity,
    config: HarnessConfig,
    core: Core,
    provider: Arc<dyn Provider>,
    sandbox: Arc<Sandbox>,
    memory: Arc<dyn MemoryProvider>,
    stop: CancellationToken,
    events: Option<Arc<dyn EventSink>>,
    budget: RunBudget,
    state: RunState,
    recorder: Arc<Mutex<Recorder>>,
    run_id: String,
    started_at: DateTime<Utc>,
    started: Instant,
    finished: bool,
    /// Phases the agent asked for in this process (the next one's index).
    phases_requested: u32,
    /// Set on a resumed harness until its first phase: how the run is taken over.
    resume: Option<Takeover>,
    /// The pending call's repair, decided when the run was taken over.
    repair: Option<RepairAction>,
    handles: Vec<RunHandle>,
    /// Worker waves the agent asked for in this process (the next one's index).
    waves_requested: u32,
    /// Who starts worker runs (none: `run_workers` fails every request).
    spawner: Option<Arc<dyn WorkerSpawner>>,
    /// The project's root, canonical (`with_project_root`): where the context providers
    /// read from. `None`: the run has no context providers.
    project_root: Option<PathBuf>,
    /// The run's wall-clock limit (`max_wall_seconds`), if it has one.
    wall: Option<wall::WallClock>,
    /// On a resumed harness until its phase goes on: the result of the deferred call the
    /// run waits for, `(call id, content)`.
    supplied: Option<(String, String)>,
}

/// What a resumed harness records first.
#[derive(Debug, Clone, Copy)]
struct Takeover {
    after_seq: u64,
}

/// What the sandbox finds at each of `paths`, as a contract's [`FileFact`]s.
fn inspect_files(sandbox: &Sandbox, paths: Vec<String>) -> Vec<(String, FileFact)> {
    /// Files larger than this are checked for existence, not read as text.
    const MAX_TEXT_BYTES: u64 = 4 * 1024 * 1024;
    paths
        .into_iter()
        .map(|path| {
            let fact = match sandbox.inspect_file(&path, MAX_TEXT_BYTES) {
                Inspection::Missing => FileFact::Missing,
                Inspection::File { bytes, text } => FileFact::File { bytes, text },
                Inspection::Unusable(reason) => FileFact::Unusable { reason },
            };
            (path, fact)
        })
        .collect()
}

impl std::fmt::Debug for AgentHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentHarness")
            .field("agent", &self.identity.name)
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// A fresh conversation id.
fn new_conversation_id() -> String {
    format!("conv-{}", uuid::Uuid::new_v4().simple())
}

/// A new run id: the UTC start time and 8 random hex digits (`20261125_093000_1a2b3c4d`).
pub fn new_run_id() -> String {
    format!(
        "{}_{}",
        Utc::now().format("%Y%m%d_%H%M%S"),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

impl AgentHarness {
    /// The run's budget (a handle on the same ledger), e.g. for a tool's
    /// [`crate::BudgetedProvider`].
    pub fn budget(&self) -> RunBudget {
        self.budget.clone()
    }

    /// The token that stops this run when cancelled.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// This run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Token accounting so far (of every call charged to the run's budget).
    pub fn usage(&self) -> RunUsage {
        self.budget.usage()
    }

    /// The run's state: what folding its journal gives.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// The run's log folder.
    pub fn run_dir(&self) -> PathBuf {
        self.recorder().run_dir().to_path_buf()
    }

    /// Run the agent's task as one phase of up to `config.max_iterations` iterations with
    /// every allowlisted tool, then write the summary. What single-phase agents use.
    pub async fn run(&mut self, task: &str) -> RunReport {
        self.identity.topic = task.to_string();
        self.core.set_topic(task);
        let request = PhaseRequest::new(task)
            .with_max_iterations(self.config.max_iterations)
            .completing_task();
        let result = self.run_bounded_inner(request).await;
        let outcome = match result.stop_reason {
            StopReason::Done => RunOutcome::Completed,
            other => RunOutcome::Stopped(other),
        };
        self.run_end_hooks(outcome).await;
        let (summary, records_error) = self.finish_inner(outcome);
        // One lock for both: a guard taken inside the struct literal would live to its end.
        let (summary_path, transcript_path) = {
            let recorder = self.recorder();
            (recorder.summary_path(), recorder.transcript_path())
        };
        RunReport {
            result,
            summary,
            summary_path,
            transcript_path,
            records_error,
        }
    }

    fn recorder(&self) -> MutexGuard<'_, Recorder> {
        lock_recorder(&self.recorder)
    }

    /// A handle that appends events to this run's transcript (and sends them to the event
    /// sink) from outside the loop — how the run's interaction channel records requests and
    /// answers while a tool waits on them. Take it after [`AgentHarness::with_event_sink`].
    pub fn record_handle(&self) -> RecordHandle {
        RecordHandle {
            recorder: Arc::clone(&self.recorder),
            events: self.events.clone(),
        }
    }

    /// Record events the core already applied to the state: journal first, then the sink.
    /// Journal a step's events (one write for all of them), then show them.
    fn commit(&self, events: Vec<RunEvent>) -> Result<(), HarnessError> {
        record_all(&self.recorder, self.events.as_ref(), events)
    }

    /// Record an event the driver produces itself (applied, then journaled).
    fn emit(&mut self, event: RunEvent) -> Result<(), HarnessError> {
        self.state.apply(&event);
        self.commit(vec![event])
    }

    fn step(&mut self, input: Input) -> Step {
        self.step_with(|core, state, env, out| core_step(core, state, input, env, out))
    }

    /// A step of the core other than [`Core::step`] (resuming), with the same environment.
    fn step_with(
        &mut self,
        f: impl FnOnce(&Core, &mut RunState, &Env<'_>, &mut Vec<RunEvent>) -> Effect,
    ) -> Step {
        let provider = Arc::clone(&self.provider);
        let estimate = move |r: &LlmRequest| provider.estimate_prompt_tokens(r);
        let env = Env {
            stop: self.stop.is_cancelled(),
            budget: self.budget.snapshot(),
            pricing: self.provider.pricing(),
            estimate: &estimate,
            now: now_stamp(),
        };
        let mut events = Vec::new();
        let effect = f(&self.core, &mut self.state, &env, &mut events);
        Step { events, effect }
    }

    fn step_and_commit_with(
        &mut self,
        f: impl FnOnce(&Core, &mut RunState, &Env<'_>, &mut Vec<RunEvent>) -> Effect,
    ) -> Effect {
        let Step { events, effect } = self.step_with(f);
        self.commit_step(events, effect)
    }

    /// One step and its journaling. A failure to journal ends the phase as `error` (the
    /// `phase_ended` line is best effort: the journal is what failed).
    fn step_and_commit(&mut self, input: Input) -> Effect {
        let Step { events, effect } = self.step(input);
        self.commit_step(events, effect)
    }

    fn commit_step(&mut self, events: Vec<RunEvent>, effect: Effect) -> Effect {
        match self.commit(events) {
            Ok(()) => effect,
            Err(_) if matches!(effect, Effect::Finish(_)) => effect,
            Err(e) => self.record_failed(e),
        }
    }

    fn record_failed(&mut self, error: HarnessError) -> Effect {
        let message = error.to_string();
        tracing::warn!(run_id = %self.run_id, "phase ended in error: {message}");
        let Step { events, effect } = self.step(Input::RecordFailed(message));
        let _ = self.commit(events);
        effect
    }

    async fn run_bounded_inner(&mut self, request: PhaseRequest) -> PhaseResult {
        let index = self.phases_requested;
        self.phases_requested = self.phases_requested.saturating_add(1);
        // A resumed run is taken over; a new one reads its context providers' texts.
        let ready = match self.take_over() {
            Ok(()) => self.load_run_context().await,
            Err(e) => Err(e),
        };
        if let Err(e) = ready {
            return match self.record_failed(e) {
                Effect::Finish(result) => result,
                _ => PhaseResult::empty(StopReason::Error),
            };
        }
        if let Some(recorded) = self.state.phases.get(&index) {
            // Replay: this phase ended before the run was resumed.
            tracing::debug!(run_id = %self.run_id, phase = index, "phase replayed from the journal");
            return recorded.clone();
        }
        let effect = if self
            .state
            .current
            .as_ref()
            .is_some_and(|p| p.phase == index)
        {
            let repair = self.repair.take().unwrap_or(RepairAction::RunAgain);
            match self.supplied.take() {
                Some((call_id, content)) => {
                    self.step_and_commit(Input::Supplied { call_id, content })
                }
                None => self.step_and_commit_with(|core, state, env, out| {
                    core.resume(state, repair, env, out)
                }),
            }
        } else {
            let was_started = self.state.started;
            let effect = self.step_and_commit(Input::Start {
                request,
                conversation_id: new_conversation_id(),
            });
            if !was_started && self.state.started {
                self.observe(HookPoint::RunStart, None).await;
            }
            effect
        };
        self.drive(effect).await
    }

    /// A resumed harness's first act in this process: record that it took the run over.
    fn take_over(&mut self) -> Result<(), HarnessError> {
        if let Some(takeover) = self.resume.take() {
            self.emit(RunEvent::RunResumed {
                pid: std::process::id(),
                after_seq: takeover.after_seq,
            })?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl PhaseExecutor for AgentHarness {
    async fn run_bounded(&mut self, request: PhaseRequest) -> PhaseResult {
        self.run_bounded_inner(request).await
    }

    async fn finish(&mut self, outcome: RunOutcome) {
        self.run_end_hooks(outcome).await;
        self.finish_inner(outcome);
    }

    fn report(&self) -> Option<lsm_phase::TurnReport> {
        self.run_report()
    }

    async fn run_workers(
        &mut self,
        requests: Vec<lsm_phase::WorkerRequest>,
        max_concurrent: usize,
    ) -> Vec<lsm_phase::WorkerOutcome> {
        self.run_workers_inner(requests, max_concurrent).await
    }

    /// Lists the file in the summary's `artifacts_created` and records an `artifact` event.
    fn record_artifact(&mut self, path: &std::path::Path) {
        // Best effort, like `phase_ended`: a transcript failure already ended a phase as
        // `error`.
        let _ = self.emit(RunEvent::Artifact {
            path: path.display().to_string(),
        });
    }
}

impl Drop for AgentHarness {
    /// A run dropped before it finished (its agent failed or panicked) still gets a summary,
    /// if it recorded anything at all.
    fn drop(&mut self) {
        // A resumed harness that never ran a phase changed nothing: the run stays
        // interrupted, to be resumed again.
        if !self.finished && self.state.last_stop.is_some() && self.resume.is_none() {
            self.state.last_error.get_or_insert_with(|| {
                "the run ended without finishing (its agent stopped early or crashed)".to_string()
            });
            self.finish_inner(RunOutcome::Failed);
        }
    }
}
