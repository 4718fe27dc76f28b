//! [`AgentHarness`]: the bounded phase loop, tool-only mode, budget, stop and records.

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
    extract_constraints, timestamp,
};
use crate::resume::{ResumePoint, repair_for};
use crate::stall::StallConfig;
use crate::state::{RunState, RunUsage};
use crate::{HarnessConfig, HarnessError, MemoryProvider, NoMemory};

/// Receives every event as it is recorded (for live progress and log streams): the journaled
/// ones exactly as written to the transcript, and streamed model output (`llm_stream`,
/// `seq` 0) that is never journaled.
pub trait EventSink: Send + Sync {
    /// One event.
    fn event(&self, event: &EventEnvelope);

    /// `event` is about to be written as journal line `seq` (called before the write, under
    /// the journal's lock; nothing by default). For observers that must act before a line
    /// is durable, such as crash tests.
    fn before_journal(&self, seq: u64, event: &RunEvent) {
        let _ = (seq, event);
    }
}

/// Appends events to one run's transcript from outside its loop; cheap to clone. Events are
/// numbered in one sequence with the loop's own, and reach the event sink as they do.
#[derive(Clone)]
pub struct RecordHandle {
    recorder: Arc<Mutex<Recorder>>,
    events: Option<Arc<dyn EventSink>>,
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
}

fn lock_recorder(recorder: &Mutex<Recorder>) -> MutexGuard<'_, Recorder> {
    // A panic while appending cannot leave the file in a state worse than a torn last line.
    recorder.lock().unwrap_or_else(PoisonError::into_inner)
}

fn record_to(
    recorder: &Mutex<Recorder>,
    events: Option<&Arc<dyn EventSink>>,
    event: RunEvent,
) -> Result<EventEnvelope, HarnessError> {
    let written = {
        let mut recorder = lock_recorder(recorder);
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

/// Forwards a provider's progress events to the harness loop, which records them.
struct ForwardEvents(tokio::sync::mpsc::UnboundedSender<ProviderEvent>);

impl CallObserver for ForwardEvents {
    fn on_event(&self, event: ProviderEvent) {
        // The loop outlives the call; a closed channel only means the phase already ended.
        let _ = self.0.send(event);
    }
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

    fn started(&self, run_id: &str, run_dir: PathBuf) {
        let mut s = self.lock();
        s.run_id = Some(run_id.to_string());
        s.run_dir = Some(run_dir);
        s.summary = None;
        s.records_error = None;
    }

    fn finished(&self, summary: &RunSummary, records_error: Option<String>) {
        let mut s = self.lock();
        s.summary = Some(summary.clone());
        s.records_error = records_error;
    }
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
        let run_id = format!(
            "{}_{}",
            started_at.format("%Y%m%d_%H%M%S"),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
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
        let recorder = Recorder::new(run_dir, run_id.clone(), config.write_records)
            .with_fsync(config.journal_fsync, side_effects);
        let limits = BudgetLimits::from_config(&config);
        let budget = RunBudget::new(limits);
        let tools = sandbox
            .registry()
            .iter()
            .map(|t| ToolDefinition {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
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
            h.config.write_records,
        )
        .with_fsync(h.config.journal_fsync, side_effects)
        .continuing(after_seq, point.lock);
        h.recorder = Arc::new(Mutex::new(recorder));
        h.run_id = point.run_id;
        if let Ok(t) = DateTime::parse_from_rfc3339(&point.started.started_at) {
            h.started_at = t.with_timezone(&Utc);
        }
        h.state = point.state;
        h.budget.restore(h.state.usage);
        h.resume = Some(Takeover { after_seq });
        h.repair = repair;
        h
    }

    /// Fill `handle` in with this run's id and folder now, and its summary when it finishes.
    pub fn with_run_handle(mut self, handle: RunHandle) -> Self {
        handle.started(&self.run_id, self.run_dir());
        self.handles.push(handle);
        self
    }

    /// Record how the owner started the run in `run_started` (so it can be rebuilt to be
    /// resumed).
    pub fn with_launch(mut self, launch: RunLaunch) -> Self {
        self.core.config_mut().launch = Some(launch);
        self
    }

    /// Use this memory provider for standing context.
    pub fn with_memory(mut self, memory: Arc<dyn MemoryProvider>) -> Self {
        self.memory = memory;
        self
    }

    /// Stop when this token is cancelled.
    pub fn with_stop_token(mut self, stop: CancellationToken) -> Self {
        self.stop = stop;
        self
    }

    /// Send every recorded event to `sink` as well.
    pub fn with_event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.events = Some(sink);
        self
    }

    /// Stall detection's settings (on, threshold 3, by default).
    pub fn with_stall(mut self, stall: StallConfig) -> Self {
        self.core.config_mut().stall = stall;
        self
    }

    /// Tell `hook` of the run's moments (see [`crate::hooks`]); hooks run in the order
    /// added.
    pub fn with_hook(mut self, hook: Arc<dyn Hook>) -> Self {
        self.core.config_mut().hooks.push(hook);
        self
    }

    /// How often `agent_stop` hooks may block a stop in one phase (2 by default) before the
    /// stop is forced.
    pub fn with_agent_stop_max_blocks(mut self, max: u32) -> Self {
        self.core.config_mut().agent_stop_max_blocks = max;
        self
    }

    /// Hold the run to `contract` (checked when a phase that completes the task stops, and at
    /// the end of the run for the summary). A resumed run keeps the contract its journal
    /// recorded.
    pub fn with_contract(mut self, contract: TaskContract) -> Self {
        self.core.config_mut().contract = Some(contract);
        self
    }

    /// Check every tool call with `guard` before the sandbox runs it.
    pub fn with_call_guard(mut self, guard: Arc<dyn ToolCallGuard>) -> Self {
        self.core.config_mut().guards.push(guard);
        self
    }

    /// Gate and charge every LLM call of this run to `budget` instead of a budget of its
    /// own (whose limits come from the config). Give the same budget to the
    /// [`crate::BudgetedProvider`] of the run's tools, so their calls share the ceiling.
    /// Its limits replace the config's `max_tokens_budget`, `max_cost_usd`,
    /// `max_output_tokens` and `reserve_prompt_estimate`.
    pub fn with_budget(mut self, budget: RunBudget) -> Self {
        self.core.config_mut().limits = budget.limits();
        if self.resume.is_some() {
            // A resumed run continues with what its journal records as spent.
            budget.restore(self.state.usage);
        }
        self.budget = budget;
        self
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
    fn commit(&self, events: Vec<RunEvent>) -> Result<(), HarnessError> {
        for event in events {
            record_to(&self.recorder, self.events.as_ref(), event)?;
        }
        Ok(())
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
            now: timestamp(Utc::now()),
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
        if let Some(takeover) = self.resume.take() {
            let resumed = RunEvent::RunResumed {
                pid: std::process::id(),
                after_seq: takeover.after_seq,
            };
            if let Err(e) = self.emit(resumed) {
                return match self.record_failed(e) {
                    Effect::Finish(result) => result,
                    _ => PhaseResult::empty(StopReason::Error),
                };
            }
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

    /// Carry effects out until the phase ends.
    async fn drive(&mut self, mut effect: Effect) -> PhaseResult {
        loop {
            let input = match effect {
                Effect::Finish(result) => {
                    if result.stop_reason == StopReason::Error {
                        tracing::warn!(run_id = %self.run_id, "phase ended in error: {}", result.final_text);
                    }
                    return result;
                }
                Effect::FetchStanding { topic } => Input::Standing(
                    self.memory
                        .standing_context(&self.identity.name, &topic)
                        .await,
                ),
                Effect::CallModel { request, grant } => {
                    match self.call_model(&request, grant).await {
                        Ok(input) => input,
                        Err(e) => {
                            effect = self.record_failed(e);
                            continue;
                        }
                    }
                }
                Effect::RunTool {
                    call_id: _,
                    tool,
                    arguments,
                } => self.run_tool(&tool, &arguments).await,
                Effect::RunHooks(mut event) => {
                    event.run_id.clone_from(&self.run_id);
                    let runs = run_hooks(&self.core.config().hooks, &event).await;
                    Input::HooksAnswered { event, runs }
                }
                Effect::CheckFiles(paths) => Input::FilesChecked(self.check_files(paths).await),
            };
            effect = self.step_and_commit(input);
        }
    }

    /// Progress during a call: retries and chain resets are journaled, the rest goes to the
    /// event sink only.
    fn provider_event(&mut self, event: ProviderEvent) -> Result<(), HarnessError> {
        let events = self.core.progress(&mut self.state, &event);
        if !events.is_empty() {
            return self.commit(events);
        }
        if let Some(sink) = &self.events {
            let data = match serde_json::to_value(&event) {
                Ok(Value::Object(map)) => map,
                _ => serde_json::Map::new(),
            };
            let label = self
                .state
                .current
                .as_ref()
                .map_or_else(String::new, |p| label_name(p.label()).to_string());
            let envelope = self
                .recorder()
                .envelope(RunEvent::LlmStream { label, data }, 0);
            sink.event(&envelope);
        }
        Ok(())
    }

    /// The model call, raced against the stop token; its progress events are recorded as
    /// they arrive. Dropping the call future aborts a request in flight.
    async fn call_model(
        &mut self,
        request: &LlmRequest,
        grant: Grant,
    ) -> Result<Input, HarnessError> {
        let permit = self.budget.reserve(grant);
        let provider = Arc::clone(&self.provider);
        let stop = self.stop.clone();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let observer = ForwardEvents(tx);
        let response = {
            let call = provider.complete_observed(request, &observer);
            tokio::pin!(call);
            loop {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => {
                        while let Ok(ev) = rx.try_recv() {
                            self.provider_event(ev)?;
                        }
                        return Ok(Input::StoppedDuringCall);
                    }
                    Some(ev) = rx.recv() => self.provider_event(ev)?,
                    r = &mut call => break r,
                }
            }
        };
        while let Ok(ev) = rx.try_recv() {
            self.provider_event(ev)?;
        }
        Ok(match response {
            Ok(response) => {
                let cost = permit.charge(&response.usage);
                Input::Answered {
                    response,
                    cost,
                    totals: self.budget.usage(),
                }
            }
            Err(e) => {
                // Not charged: the phase ends here as an error.
                drop(permit);
                Input::ModelFailed {
                    // Redacted before it enters the state: a server may echo a key.
                    error: lsm_sandbox::redact_secrets(&e.to_string()).into_owned(),
                    chain_broken: e.breaks_chain(),
                }
            }
        })
    }

    /// One tool call through the sandbox, raced against the stop token.
    async fn run_tool(&mut self, name: &str, arguments: &Value) -> Input {
        let sandbox = Arc::clone(&self.sandbox);
        let stop = self.stop.clone();
        let caller = Caller::new(self.identity.name.clone(), self.run_id.clone());
        let before = self.budget.usage();
        let execution = tokio::select! {
            biased;
            () = stop.cancelled() => None,
            e = sandbox.execute_as(&caller, name, arguments) => Some(e),
        };
        // What the tool's own LLM calls (through a BudgetedProvider) charged to the run.
        let after = self.budget.usage();
        let spend = (after.llm_calls > before.llm_calls).then(|| ToolSpend {
            llm_calls: after.llm_calls - before.llm_calls,
            usage: lsm_providers::Usage {
                input_tokens: after.input_tokens.saturating_sub(before.input_tokens),
                output_tokens: after.output_tokens.saturating_sub(before.output_tokens),
                cached_tokens: after.cached_tokens.saturating_sub(before.cached_tokens),
                cache_creation_tokens: after
                    .cache_creation_tokens
                    .saturating_sub(before.cache_creation_tokens),
            },
            cost_usd: after
                .cost_usd
                .map(|total| total - before.cost_usd.unwrap_or(0.0)),
            totals: after,
        });
        let run = match execution {
            None => ToolRun::Interrupted,
            Some(execution) => {
                let now = timestamp(Utc::now());
                ToolRun::Ran {
                    outcome: execution.outcome.map_err(|err| ToolFailure {
                        message: err.to_string(),
                        denial: err.is_denial(),
                    }),
                    artifacts: execution
                        .artifacts
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect(),
                    permission: execution.permission.map(|p| Decision {
                        tool_name: p.tool_name,
                        allowed: p.allowed,
                        reason: p.reason,
                        timestamp: now,
                    }),
                    events: execution.events,
                }
            }
        };
        Input::ToolDone { run, spend }
    }

    /// Look at the files a task contract names, through the sandbox's read confinement, off
    /// the async workers.
    async fn check_files(&self, paths: Vec<String>) -> Vec<(String, FileFact)> {
        let sandbox = Arc::clone(&self.sandbox);
        let work = move || inspect_files(&sandbox, paths);
        match tokio::task::spawn_blocking(work).await {
            Ok(facts) => facts,
            Err(e) => {
                tracing::warn!(run_id = %self.run_id, "checking the contract's files failed: {e}");
                Vec::new()
            }
        }
    }

    /// The contract's coverage at the end of the run, for the summary (recorded as
    /// `contract_checked` with `at: run_end`).
    fn final_coverage(&mut self) {
        let Some(contract) = self.state.contract.clone() else {
            return;
        };
        let files = inspect_files(&self.sandbox, contract.file_paths());
        let coverage = crate::core::coverage(&self.state, &contract, &files);
        let _ = self.emit(RunEvent::ContractChecked {
            label: None,
            iteration: 0,
            at: "run_end".to_string(),
            coverage,
        });
    }

    /// Run the hooks that observe `point` (`run_start`, `run_end`) and record what they
    /// said. Best effort: they decide nothing.
    async fn observe(&mut self, point: HookPoint, status: Option<&str>) {
        if !self.core.hooks_match(point, None) {
            return;
        }
        let event = HookEvent {
            hook: point,
            run_id: self.run_id.clone(),
            agent: self.identity.name.clone(),
            tool: None,
            call_id: None,
            arguments: None,
            result: None,
            success: None,
            final_text: None,
            status: status.map(str::to_string),
        };
        let runs = run_hooks(&self.core.config().hooks, &event).await;
        let record = self.core.observed(&event, runs);
        let _ = self.emit(record);
    }

    /// `run_end` hooks, before the run's summary is written (once).
    async fn run_end_hooks(&mut self, outcome: RunOutcome) {
        if !self.finished && self.state.started {
            let (status, _) = self.status_of(outcome);
            self.observe(HookPoint::RunEnd, Some(status)).await;
        }
    }

    fn status_of(&self, outcome: RunOutcome) -> (&'static str, &'static str) {
        let last = self.state.last_stop.map_or("done", StopReason::as_str);
        match outcome {
            RunOutcome::Completed => ("completed", last),
            RunOutcome::Stopped(StopReason::Error) => ("failed", "error"),
            RunOutcome::Stopped(reason) => ("stopped", reason.as_str()),
            RunOutcome::Failed => ("failed", if last == "done" { "error" } else { last }),
        }
    }

    /// The summary as of now.
    pub fn summary(&self, status: &str, run_outcome: &str) -> RunSummary {
        let finished_at = Utc::now();
        let mut tracking = ContextTracking::default();
        for c in &self.state.contexts {
            let name = label_name(&c.label).to_string();
            tracking.context_labels_seen.push(name.clone());
            tracking.per_label.insert(
                name,
                LabelTracking {
                    compactions: c.context.compactions,
                    iterations: c.context.iterations,
                    conversation_id: Some(c.context.conversation_id.clone()),
                    response_id: c.context.last_response_id.clone(),
                },
            );
        }
        RunSummary {
            run_id: self.run_id.clone(),
            agent_name: self.identity.name.clone(),
            topic: self.identity.topic.clone(),
            status: status.to_string(),
            run_outcome: run_outcome.to_string(),
            error: self.state.last_error.clone(),
            schema_version: SCHEMA_VERSION,
            final_text: self
                .state
                .phases
                .last_key_value()
                .map(|(_, r)| r.final_text.clone())
                .unwrap_or_default(),
            started_at: timestamp(self.started_at),
            finished_at: timestamp(finished_at),
            duration_seconds: self.started.elapsed().as_secs_f64(),
            provider: self.provider.name().to_string(),
            model: self.provider.model().to_string(),
            tools_used: self.state.tools_used.clone(),
            tool_sequence: self.state.tool_sequence.clone(),
            approvals_denials: self.state.approvals.clone(),
            artifacts_created: self.state.artifacts.clone(),
            token_usage: {
                let usage = self.budget.usage();
                let limits = self.budget.limits();
                TokenUsage {
                    tokens_used: usage.tokens_used,
                    max_tokens_budget: limits.max_tokens,
                    iterations: self.state.llm_calls,
                    input_tokens: usage.input_tokens,
                    output_tokens: usage.output_tokens,
                    cached_tokens: usage.cached_tokens,
                    cache_creation_tokens: usage.cache_creation_tokens,
                    cost_usd: usage.cost_usd,
                    max_cost_usd: limits.max_cost_usd,
                }
            },
            constraints: extract_constraints(&self.identity.topic),
            context_tracking: tracking,
            memory: self.state.memory,
            stop_mode: self.state.stop_mode,
            work_items: self.state.work_items.clone(),
            contract: self.state.contract.as_ref().map(|c| ContractReport {
                description: c.description.clone(),
                satisfied: self.state.coverage.as_ref().is_some_and(|v| v.satisfied),
                unmet: self
                    .state
                    .coverage
                    .as_ref()
                    .map(Coverage::unmet)
                    .unwrap_or_default(),
                coverage: self
                    .state
                    .coverage
                    .as_ref()
                    .map(|v| v.items.clone())
                    .unwrap_or_default(),
            }),
            unmet_checks: self.state.unmet_accepted.clone(),
        }
    }

    /// Write the summary for `outcome` (once). Returns it, and why writing failed if it did.
    fn finish_inner(&mut self, outcome: RunOutcome) -> (RunSummary, Option<String>) {
        let (status, run_outcome) = self.status_of(outcome);
        if self.finished {
            return (self.summary(status, run_outcome), None);
        }
        self.finished = true;
        self.final_coverage();
        let summary = self.summary(status, run_outcome);
        let _ = self.emit(RunEvent::RunFinished {
            status: status.to_string(),
            run_outcome: run_outcome.to_string(),
            tokens_used: self.budget.usage().tokens_used,
        });
        let error = self
            .recorder()
            .write_summary(&summary)
            .err()
            .map(|e| e.to_string());
        if let Some(e) = &error {
            tracing::error!(run_id = %self.run_id, "{e}");
        }
        self.recorder().release_lock();
        for handle in &self.handles {
            handle.finished(&summary, error.clone());
        }
        (summary, error)
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
