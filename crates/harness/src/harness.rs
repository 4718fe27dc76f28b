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
use lsm_sandbox::{Caller, Inspection, Sandbox};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::budget::{BudgetLimits, Grant, RunBudget};
use crate::contexts::{label_name, new_conversation_id};
use crate::contract::{Coverage, FileFact, TaskContract};
use crate::core::{Core, CoreConfig, Effect, Env, Input, Step, ToolFailure, ToolRun, ToolSpend};
use crate::event::{Decision, EventEnvelope, RepairAction, RunEvent, RunLaunch, SCHEMA_VERSION};
use crate::hooks::{DEFAULT_AGENT_STOP_MAX_BLOCKS, Hook, HookEvent, HookPoint, run_hooks};
use crate::records::{
    ContextTracking, ContractReport, LabelTracking, Recorder, RunSummary, TokenUsage,
    extract_constraints, now_stamp, timestamp,
};
use crate::resume::{ResumePoint, repair_for};
use crate::stall::StallConfig;
use crate::state::{RunState, RunUsage};
use crate::{HarnessConfig, HarnessError, MemoryProvider, NoMemory};

mod builders;
mod effects;
mod ending;
mod handles;
mod run_context;
mod worker_waves;

pub use handles::{EventSink, RecordHandle, RunHandle};
use handles::{lock_recorder, record_all};

/// Checks a tool call's arguments before the sandbox runs it — for example a knowledge-base
/// mode an agent composed, against the allowed retrieval profiles and URL access (seed 002
/// §13.2). A refusal goes back to the model as the tool's error result and is recorded as a
/// denial; the tool does not run.
pub trait ToolCallGuard: Send + Sync {
    /// `Err(reason)` refuses the call of `tool` with `arguments`; other tools pass.
    ///
    /// # Errors
    /// Why the call is refused, in words the model can act on.
    fn check(&self, tool: &str, arguments: &Value) -> Result<(), String>;
}

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
    spawner: Option<Arc<dyn crate::WorkerSpawner>>,
    /// The project's root, canonical (`with_project_root`): where the context providers
    /// read from. `None`: the run has no context providers.
    project_root: Option<PathBuf>,
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

/// A new run id: the UTC start time and 8 random hex digits (`20261125_093000_1a2b3c4d`).
pub fn new_run_id() -> String {
    format!(
        "{}_{}",
        Utc::now().format("%Y%m%d_%H%M%S"),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

impl AgentHarness {
    /// A harness for one run of `identity`. Nothing is written until the first phase.
    pub fn new(
        identity: AgentIdentity,
        system_prompt: impl Into<String>,
        config: HarnessConfig,
        provider: Arc<dyn Provider>,
        sandbox: Arc<Sandbox>,
    ) -> Self {
        let started_at = Utc::now();
        let run_id = new_run_id();
        let run_dir = config
            .agents_folder
            .join(&identity.name)
            .join("logs")
            .join(&run_id);
        // Calls of these tools can change something outside the run: their start is made
        // durable before they run.
        let side_effects = sandbox
            .registry()
            .iter()
            .filter(|t| t.risk() != lsm_sandbox::RiskLevel::ReadOnly)
            .map(|t| t.name().to_string())
            .collect();
        let recorder = Recorder::new(
            run_dir,
            run_id.clone(),
            identity.name.clone(),
            config.write_records,
        )
        .with_fsync(config.journal_fsync, side_effects);
        let limits = BudgetLimits::from_config(&config);
        let budget = RunBudget::new(limits);
        let tools = sandbox
            .registry()
            .iter()
            .map(|t| {
                Arc::new(ToolDefinition {
                    name: t.name().to_string(),
                    description: t.description().to_string(),
                    parameters: t.parameters(),
                })
            })
            .collect();
        let call_identity = sandbox
            .registry()
            .iter()
            .filter_map(|t| {
                t.identity_args().map(|args| {
                    (
                        t.name().to_string(),
                        args.iter().map(|a| (*a).to_string()).collect(),
                    )
                })
            })
            .collect();
        let core = Core::new(CoreConfig {
            agent: identity.name.clone(),
            topic: identity.topic.clone(),
            system_prompt: system_prompt.into(),
            allowlist: identity.tool_allowlist.iter().cloned().collect(),
            allowlist_order: identity.tool_allowlist.clone(),
            tools,
            offer_block_tool: config.offer_block_tool,
            offer_complete_tool: config.offer_complete_tool,
            strategy: config.context_window_strategy,
            limits,
            provider: provider.name().to_string(),
            model: provider.model().to_string(),
            guards: Vec::new(),
            launch: None,
            stall: StallConfig::default(),
            call_identity,
            hooks: Vec::new(),
            agent_stop_max_blocks: DEFAULT_AGENT_STOP_MAX_BLOCKS,
            stop_mode: config.stop_mode,
            completion_retries: config.completion_retries,
            contract: None,
            work_items: config.work_items,
            compaction: config.compaction,
            window: config
                .compaction
                .window(provider.context_window(), config.max_output_tokens),
            // No memory until `with_memory` gives one.
            standing_memory: false,
            // None until the driver loads them for a new run (`with_project_root`).
            run_context: crate::context::RunContext::default(),
        });
        AgentHarness {
            identity,
            config,
            core,
            provider,
            sandbox,
            memory: Arc::new(NoMemory),
            stop: CancellationToken::new(),
            events: None,
            budget,
            state: RunState::default(),
            recorder: Arc::new(Mutex::new(recorder)),
            run_id,
            started_at,
            started: Instant::now(),
            finished: false,
            phases_requested: 0,
            resume: None,
            repair: None,
            handles: Vec::new(),
            waves_requested: 0,
            spawner: None,
            project_root: None,
        }
    }

    /// A harness that continues the interrupted run `point` (see [`crate::ResumePoint`] for
    /// the rules): same run id, folder and transcript (`seq` continuing), the state folded
    /// from the journal, the budget restored to what it records as spent. The system prompt
    /// and the allowlist come from the caller, as for a new run.
    pub fn resumed(
        point: ResumePoint,
        identity: AgentIdentity,
        system_prompt: impl Into<String>,
        config: HarnessConfig,
        provider: Arc<dyn Provider>,
        sandbox: Arc<Sandbox>,
    ) -> Self {
        let mut h = AgentHarness::new(identity, system_prompt, config, provider, sandbox);
        let after_seq = point.last_seq();
        let repair = point
            .state
            .current
            .as_ref()
            .and_then(|p| p.pending.as_ref())
            .map(|pending| repair_for(pending, &point.journal, &h.sandbox));
        let side_effects = h.recorder().side_effects().clone();
        let recorder = Recorder::new(
            point.run_dir.clone(),
            point.run_id.clone(),
            h.identity.name.clone(),
            h.config.write_records,
        )
        .with_fsync(h.config.journal_fsync, side_effects)
        .continuing(after_seq, point.writer);
        h.recorder = Arc::new(Mutex::new(recorder));
        h.run_id = point.run_id;
        if let Ok(t) = DateTime::parse_from_rfc3339(&point.started.started_at) {
            h.started_at = t.with_timezone(&Utc);
        }
        h.state = point.state;
        h.budget.restore(h.state.tree_usage());
        h.resume = Some(Takeover { after_seq });
        h.repair = repair;
        h
    }

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
            self.step_and_commit_with(|core, state, env, out| core.resume(state, repair, env, out))
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
