//! [`AgentHarness`]: the bounded phase loop, tool-only mode, budget, stop and records.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use chrono::{DateTime, Utc};
use lsm_phase::{
    AgentIdentity, DirectToolCall, PhaseExecutor, PhaseRequest, PhaseResult, RunOutcome,
    StopReason, ToolCallRecord, ToolOutcome,
};
use lsm_providers::{
    CallObserver, CallOptions, LlmRequest, Message, Provider, ProviderEvent, ToolDefinition,
};
use lsm_sandbox::{Caller, Sandbox, ToolEvent, ToolEventKind};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::budget::{BudgetLimits, RunBudget};
use crate::contexts::{Contexts, apply_strategy, label_name};
use crate::records::{
    ApprovalEvent, ApprovalsDenials, ContextTracking, LabelTracking, MemoryCounts, Recorder,
    RunSummary, TokenUsage, extract_constraints, timestamp,
};
use crate::{HarnessConfig, MemoryProvider, NoMemory};

/// The reserved control tool: the model calls `block{reason}` to say it cannot proceed.
pub const BLOCK_TOOL: &str = "block";

/// Receives every transcript event as it is recorded (for live progress and log streams).
pub trait EventSink: Send + Sync {
    /// One event, exactly as written to the transcript.
    fn event(&self, event: &Value);
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
    /// Append `event` with `fields` (an object) and return the line as written.
    ///
    /// # Errors
    /// When the transcript cannot be written (the message names the file); the caller
    /// decides whether that matters — the loop itself stops at its next record.
    pub fn record(&self, event: &str, fields: Value) -> Result<Value, String> {
        record_to(&self.recorder, self.events.as_ref(), event, fields)
    }
}

fn lock_recorder(recorder: &Mutex<Recorder>) -> MutexGuard<'_, Recorder> {
    // A panic while appending cannot leave the file in a state worse than a torn last line.
    recorder.lock().unwrap_or_else(PoisonError::into_inner)
}

fn record_to(
    recorder: &Mutex<Recorder>,
    events: Option<&Arc<dyn EventSink>>,
    event: &str,
    fields: Value,
) -> Result<Value, String> {
    let written = lock_recorder(recorder).append(event, fields)?;
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

/// Token accounting of a run: every LLM call charged to its [`RunBudget`], the harness's own
/// and those made inside tools. Visible to the harness's owner (the CLI, tests), never to an
/// agent: it is not part of any phase result.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunUsage {
    /// Input + output tokens.
    pub tokens_used: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_creation_tokens: u64,
    /// LLM calls charged (the harness's own and those made inside tools).
    pub llm_calls: u64,
    /// What the calls cost in US dollars (`None` while the provider has no prices).
    pub cost_usd: Option<f64>,
}

/// Forwards a provider's progress events to the harness loop, which records them.
struct ForwardEvents(tokio::sync::mpsc::UnboundedSender<ProviderEvent>);

impl CallObserver for ForwardEvents {
    fn on_event(&self, event: ProviderEvent) {
        // The loop outlives the call; a closed channel only means the phase already ended.
        let _ = self.0.send(event);
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

/// One agent run's executor. See the crate documentation.
pub struct AgentHarness {
    identity: AgentIdentity,
    allowlist: HashSet<String>,
    system_prompt: String,
    config: HarnessConfig,
    provider: Arc<dyn Provider>,
    sandbox: Arc<Sandbox>,
    memory: Arc<dyn MemoryProvider>,
    stop: CancellationToken,
    events: Option<Arc<dyn EventSink>>,
    guards: Vec<Arc<dyn ToolCallGuard>>,
    budget: RunBudget,
    contexts: Contexts,
    /// The loop's own LLM calls (the summary's `iterations`).
    llm_calls: u64,
    recorder: Arc<Mutex<Recorder>>,
    run_id: String,
    started_at: DateTime<Utc>,
    started: Instant,
    tools_used: BTreeMap<String, u64>,
    tool_sequence: Vec<String>,
    approvals: ApprovalsDenials,
    artifacts: Vec<String>,
    memory_counts: MemoryCounts,
    last_standing: Option<String>,
    last_stop: Option<StopReason>,
    last_error: Option<String>,
    finished: bool,
}

impl std::fmt::Debug for AgentHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentHarness")
            .field("agent", &self.identity.name)
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

/// The phase's running output, kept outside the loop so an error keeps what was done.
#[derive(Default)]
struct PhaseState {
    final_text: String,
    tool_calls: Vec<ToolCallRecord>,
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
        let recorder = Recorder::new(run_dir, run_id.clone(), config.write_records);
        let budget = RunBudget::new(BudgetLimits::from_config(&config));
        AgentHarness {
            allowlist: identity.tool_allowlist.iter().cloned().collect(),
            identity,
            system_prompt: system_prompt.into(),
            config,
            provider,
            sandbox,
            memory: Arc::new(NoMemory),
            stop: CancellationToken::new(),
            events: None,
            guards: Vec::new(),
            budget,
            contexts: Contexts::default(),
            llm_calls: 0,
            recorder: Arc::new(Mutex::new(recorder)),
            run_id,
            started_at,
            started: Instant::now(),
            tools_used: BTreeMap::new(),
            tool_sequence: Vec::new(),
            approvals: ApprovalsDenials::default(),
            artifacts: Vec::new(),
            memory_counts: MemoryCounts::default(),
            last_standing: None,
            last_stop: None,
            last_error: None,
            finished: false,
        }
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

    /// Check every tool call with `guard` before the sandbox runs it.
    pub fn with_call_guard(mut self, guard: Arc<dyn ToolCallGuard>) -> Self {
        self.guards.push(guard);
        self
    }

    /// Gate and charge every LLM call of this run to `budget` instead of a budget of its
    /// own (whose limits come from the config). Give the same budget to the
    /// [`crate::BudgetedProvider`] of the run's tools, so their calls share the ceiling.
    /// Its limits replace the config's `max_tokens_budget`, `max_cost_usd`,
    /// `max_output_tokens` and `reserve_prompt_estimate`.
    pub fn with_budget(mut self, budget: RunBudget) -> Self {
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

    /// The run's log folder.
    pub fn run_dir(&self) -> PathBuf {
        self.recorder().run_dir().to_path_buf()
    }

    /// Run the agent's task as one phase of up to `config.max_iterations` iterations with
    /// every allowlisted tool, then write the summary. What single-phase agents use.
    pub async fn run(&mut self, task: &str) -> RunReport {
        self.identity.topic = task.to_string();
        let request = PhaseRequest::new(task).with_max_iterations(self.config.max_iterations);
        let result = self.run_bounded_inner(request).await;
        let outcome = match result.stop_reason {
            StopReason::Done => RunOutcome::Completed,
            other => RunOutcome::Stopped(other),
        };
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

    fn record_exhausted(
        &mut self,
        label: &str,
        reason: &str,
        estimate: Option<u64>,
    ) -> Result<(), String> {
        let usage = self.budget.usage();
        let limits = self.budget.limits();
        self.record(
            "budget_exhausted",
            json!({"label": label, "reason": reason, "tokens_used": usage.tokens_used,
                   "max_tokens_budget": limits.max_tokens,
                   "cost_usd": usage.cost_usd, "max_cost_usd": limits.max_cost_usd,
                   "prompt_tokens_estimate": estimate}),
        )
    }

    /// Record a provider's progress event: retries and chain resets go to the transcript,
    /// streamed text and tool-call progress only to the event sink.
    fn provider_event(
        &mut self,
        label: &Option<String>,
        event: ProviderEvent,
    ) -> Result<(), String> {
        let lname = label_name(label).to_string();
        match event {
            ProviderEvent::Retry {
                attempt,
                delay,
                reason,
            } => self.record(
                "llm_retry",
                json!({"label": lname, "attempt": attempt,
                       "delay_ms": u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                       "reason": reason}),
            ),
            ProviderEvent::ChainReset { reason } => {
                self.contexts.get_or_create(label).last_response_id = None;
                self.record("llm_chain_reset", json!({"label": lname, "reason": reason}))
            }
            other => {
                if let Some(sink) = &self.events {
                    let mut v = serde_json::to_value(&other).unwrap_or(Value::Null);
                    if let Value::Object(o) = &mut v {
                        o.insert("event".into(), json!("llm_stream"));
                        o.insert("label".into(), json!(lname));
                        o.insert("run_id".into(), json!(self.run_id));
                    }
                    sink.event(&v);
                }
                Ok(())
            }
        }
    }

    /// Record an event (transcript + sink).
    fn record(&mut self, event: &str, fields: Value) -> Result<(), String> {
        record_to(&self.recorder, self.events.as_ref(), event, fields).map(|_| ())
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

    /// Tool definitions offered in a phase: allowlisted, registered, within `tool_names`.
    fn offered_tools(&self, tool_names: Option<&[String]>) -> Vec<ToolDefinition> {
        let mut tools: Vec<ToolDefinition> = self
            .sandbox
            .registry()
            .iter()
            .filter(|t| self.allowlist.contains(t.name()))
            .filter(|t| tool_names.is_none_or(|names| names.iter().any(|n| n == t.name())))
            .filter(|t| t.name() != BLOCK_TOOL)
            .map(|t| ToolDefinition {
                name: t.name().to_string(),
                description: t.description().to_string(),
                parameters: t.parameters(),
            })
            .collect();
        if self.config.offer_block_tool {
            tools.push(block_tool_definition());
        }
        tools
    }

    async fn run_bounded_inner(&mut self, request: PhaseRequest) -> PhaseResult {
        let label = request.context_label.clone();
        let mode = if request.direct_tool_calls.is_some() {
            "tool_only"
        } else {
            "llm"
        };
        let mut state = PhaseState::default();
        let started = self.record(
            "phase_start",
            json!({
                "label": label_name(&label),
                "mode": mode,
                "user_message": request.user_message,
                "tool_names": request.tool_names,
                "max_iterations": request.max_iterations,
                "continue_context": request.continue_context,
            }),
        );
        let outcome = match started {
            Err(e) => Err(e),
            Ok(()) => match request.direct_tool_calls {
                Some(calls) => self.run_tool_only(calls, &mut state).await,
                None => {
                    self.run_llm_phase(
                        label.clone(),
                        request.user_message,
                        request.tool_names,
                        request.max_iterations,
                        request.continue_context,
                        &mut state,
                    )
                    .await
                }
            },
        };
        let stop_reason = match outcome {
            Ok(reason) => reason,
            Err(message) => {
                tracing::warn!(run_id = %self.run_id, "phase ended in error: {message}");
                self.last_error = Some(message.clone());
                state.final_text = message;
                StopReason::Error
            }
        };
        self.last_stop = Some(stop_reason);
        // Best effort: if the transcript itself is what failed, there is nowhere to say so
        // but the result and the summary.
        let _ = self.record(
            "phase_end",
            json!({
                "label": label_name(&label),
                "stop_reason": stop_reason,
                "tool_calls": state.tool_calls.len(),
                "final_text": state.final_text,
            }),
        );
        PhaseResult {
            final_text: state.final_text,
            tool_calls: state.tool_calls,
            stop_reason,
        }
    }

    /// Tool-only mode: no LLM call, no budget check; stop checked at entry and between calls.
    async fn run_tool_only(
        &mut self,
        calls: Vec<DirectToolCall>,
        state: &mut PhaseState,
    ) -> Result<StopReason, String> {
        if self.stop.is_cancelled() {
            self.record("stop_requested", json!({"where": "tool_only"}))?;
            return Ok(StopReason::StopRequested);
        }
        for call in calls {
            if self.stop.is_cancelled() {
                self.record("stop_requested", json!({"where": "tool_only"}))?;
                return Ok(StopReason::StopRequested);
            }
            let outcome = self
                .execute_tool(&call.name, &call.arguments, None, None)
                .await?;
            state.tool_calls.push(ToolCallRecord {
                name: call.name,
                arguments: call.arguments,
                outcome,
            });
        }
        Ok(StopReason::Done)
    }

    async fn run_llm_phase(
        &mut self,
        label: Option<String>,
        user_message: String,
        tool_names: Option<Vec<String>>,
        max_iterations: u32,
        continue_context: bool,
        state: &mut PhaseState,
    ) -> Result<StopReason, String> {
        {
            let ctx = self.contexts.get_or_create(&label);
            if !continue_context {
                ctx.reset();
            }
            if !user_message.is_empty() {
                ctx.history.push(Message::user(user_message));
            }
        }
        let offered = self.offered_tools(tool_names.as_deref());
        let lname = label_name(&label).to_string();
        let cache_key = format!("{}:{}", self.identity.name, lname);
        let provider = Arc::clone(&self.provider);
        let stop = self.stop.clone();

        for iteration in 1..=max_iterations {
            if let Some(exhausted) = self.budget.exhausted() {
                self.record_exhausted(&lname, &exhausted.reason, None)?;
                return Ok(StopReason::BudgetExhausted);
            }
            if stop.is_cancelled() {
                self.record("stop_requested", json!({"label": lname}))?;
                return Ok(StopReason::StopRequested);
            }

            // Assemble: system prompt, standing memory, this label's history.
            let topic = self
                .contexts
                .get_or_create(&label)
                .last_user_message()
                .to_string();
            let standing = self
                .memory
                .standing_context(&self.identity.name, &topic)
                .await;
            let has_standing = standing.is_some();
            if standing != self.last_standing {
                // What the model is told from memory is part of the record; written when it
                // changes, not repeated with every call.
                self.record(
                    "standing_context",
                    json!({"label": lname, "iteration": iteration, "text": standing}),
                )?;
                self.last_standing.clone_from(&standing);
            }
            let mut messages = Vec::new();
            if !self.system_prompt.is_empty() {
                messages.push(Message::system(self.system_prompt.clone()));
            }
            if let Some(block) = standing {
                messages.push(Message::system(block));
            }
            let strategy = self.config.context_window_strategy;
            let ctx = self.contexts.get_or_create(&label);
            messages.extend_from_slice(apply_strategy(strategy, &mut ctx.history));
            let previous_response_id = ctx.last_response_id.clone();
            let mut request = LlmRequest {
                messages,
                tools: offered.clone(),
                options: CallOptions {
                    previous_response_id,
                    prompt_cache_key: Some(cache_key.clone()),
                    ..CallOptions::default()
                },
            };
            let estimate = provider.estimate_prompt_tokens(&request);
            let pricing = provider.pricing();
            // The same gate as a tool's calls: output capped to what is left (the config's
            // max_output_tokens is the budget's per-call limit).
            let permit = match self.budget.begin(estimate, pricing, None) {
                Ok(permit) => permit,
                Err(exhausted) => {
                    self.record_exhausted(&lname, &exhausted.reason, Some(estimate))?;
                    return Ok(StopReason::BudgetExhausted);
                }
            };
            request.options.max_output_tokens = Some(permit.max_output_tokens());
            self.record(
                "llm_request",
                json!({
                    "label": lname,
                    "iteration": iteration,
                    "provider": provider.name(),
                    "model": provider.model(),
                    "messages": request.messages.len(),
                    "standing_context": has_standing,
                    "tools": request.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
                    "max_output_tokens": request.options.max_output_tokens,
                    "previous_response_id": request.options.previous_response_id,
                    "prompt_cache_key": request.options.prompt_cache_key,
                    "prompt_tokens_estimate": estimate,
                }),
            )?;

            // The call, raced against the stop token; its progress events are recorded as
            // they arrive. Dropping the call future aborts a request in flight.
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let observer = ForwardEvents(tx);
            let response = {
                let call = provider.complete_observed(&request, &observer);
                tokio::pin!(call);
                loop {
                    tokio::select! {
                        biased;
                        () = stop.cancelled() => {
                            while let Ok(ev) = rx.try_recv() {
                                self.provider_event(&label, ev)?;
                            }
                            self.record("stop_requested", json!({"label": lname, "where": "llm_call"}))?;
                            return Ok(StopReason::StopRequested);
                        }
                        Some(ev) = rx.recv() => self.provider_event(&label, ev)?,
                        r = &mut call => break r,
                    }
                }
            };
            while let Ok(ev) = rx.try_recv() {
                self.provider_event(&label, ev)?;
            }
            self.llm_calls += 1;
            self.contexts.get_or_create(&label).iterations += 1;
            let response = match response {
                Ok(r) => r,
                Err(e) => {
                    // Not charged: the phase ends here as an error.
                    drop(permit);
                    if e.breaks_chain() {
                        self.contexts.get_or_create(&label).last_response_id = None;
                    }
                    // Providers scrub their own key; this catches the rest (another
                    // registered key, a masked echo) before the message becomes the phase's
                    // error, the run's summary and the agent's log.
                    let message =
                        lsm_sandbox::redact_secrets(&format!("LLM call failed: {e}")).into_owned();
                    self.record("llm_error", json!({"label": lname, "error": message}))?;
                    return Err(message);
                }
            };
            let cost = permit.charge(&response.usage);
            let totals = self.budget.usage();
            self.record(
                "llm_response",
                json!({
                    "label": lname,
                    "iteration": iteration,
                    "text": response.text,
                    "tool_calls": response.tool_calls,
                    "usage": response.usage,
                    "response_id": response.response_id,
                    "tokens_used": totals.tokens_used,
                    "cost_usd": cost,
                    "total_cost_usd": totals.cost_usd,
                }),
            )?;
            {
                let ctx = self.contexts.get_or_create(&label);
                if response.response_id.is_some() {
                    ctx.last_response_id.clone_from(&response.response_id);
                }
                ctx.history.push(Message::assistant(
                    response.text.clone(),
                    response.tool_calls.clone(),
                ));
            }
            state.final_text.clone_from(&response.text);

            if let Some(block) = response.tool_calls.iter().find(|c| c.name == BLOCK_TOOL) {
                let reason = block
                    .arguments
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("the model gave no reason")
                    .to_string();
                self.record("blocked", json!({"label": lname, "reason": reason}))?;
                let ctx = self.contexts.get_or_create(&label);
                for call in &response.tool_calls {
                    ctx.history.push(Message::tool_result(
                        call.id.clone(),
                        "Not executed: the phase is blocked.",
                    ));
                }
                state.final_text = reason;
                return Ok(StopReason::Blocked);
            }
            if response.tool_calls.is_empty() {
                return Ok(StopReason::Done);
            }

            let mut calls = response.tool_calls.into_iter();
            while let Some(call) = calls.next() {
                if stop.is_cancelled() {
                    let ctx = self.contexts.get_or_create(&label);
                    for skipped in std::iter::once(call).chain(calls.by_ref()) {
                        ctx.history.push(Message::tool_result(
                            skipped.id,
                            "Not executed: a stop was requested.",
                        ));
                    }
                    self.record("stop_requested", json!({"label": lname, "where": "tools"}))?;
                    return Ok(StopReason::StopRequested);
                }
                let outcome = self
                    .execute_tool(
                        &call.name,
                        &call.arguments,
                        tool_names.as_deref(),
                        Some(&lname),
                    )
                    .await?;
                let for_model = match &outcome {
                    ToolOutcome::Result(text) => text.clone(),
                    ToolOutcome::Error(message) => format!("Error: {message}"),
                };
                self.contexts
                    .get_or_create(&label)
                    .history
                    .push(Message::tool_result(call.id.clone(), for_model));
                state.tool_calls.push(ToolCallRecord {
                    name: call.name,
                    arguments: call.arguments,
                    outcome,
                });
            }
        }
        Ok(StopReason::MaxIterations)
    }

    /// One tool call: allowlist, the phase's `tool_names`, then the sandbox. Every outcome is a
    /// value; only a failure to record is an `Err`.
    async fn execute_tool(
        &mut self,
        name: &str,
        arguments: &Value,
        tool_names: Option<&[String]>,
        label: Option<&str>,
    ) -> Result<ToolOutcome, String> {
        *self.tools_used.entry(name.to_string()).or_insert(0) += 1;
        self.tool_sequence.push(name.to_string());
        self.record(
            "tool_call",
            json!({"label": label, "tool": name, "arguments": arguments}),
        )?;

        let refusal = if !self.allowlist.contains(name) {
            Some(format!("Tool '{name}' is not allowed for this harness run"))
        } else if tool_names.is_some_and(|names| !names.iter().any(|n| n == name)) {
            Some(format!(
                "Tool '{name}' is not in the requested tool_names list"
            ))
        } else {
            self.guards
                .iter()
                .find_map(|g| g.check(name, arguments).err())
                .map(|reason| format!("Tool '{name}' was refused: {reason}"))
        };
        if let Some(message) = refusal {
            self.note_decision(name, false, &message);
            self.record(
                "tool_denied",
                json!({"label": label, "tool": name, "reason": message}),
            )?;
            return Ok(ToolOutcome::Error(message));
        }

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
        if after.llm_calls > before.llm_calls {
            let cost = after
                .cost_usd
                .map(|total| total - before.cost_usd.unwrap_or(0.0));
            self.record(
                "tool_usage",
                json!({"label": label, "tool": name,
                       "llm_calls": after.llm_calls - before.llm_calls,
                       "tokens": after.tokens_used.saturating_sub(before.tokens_used),
                       "cost_usd": cost,
                       "tokens_used": after.tokens_used,
                       "total_cost_usd": after.cost_usd}),
            )?;
        }
        let Some(execution) = execution else {
            let message = format!("Tool '{name}' was interrupted: a stop was requested");
            self.record(
                "tool_result",
                json!({"label": label, "tool": name, "error": message}),
            )?;
            return Ok(ToolOutcome::Error(message));
        };
        if let Some(event) = &execution.permission {
            self.note_decision(&event.tool_name, event.allowed, &event.reason);
        }
        for path in &execution.artifacts {
            let path = path.display().to_string();
            if !self.artifacts.contains(&path) {
                self.artifacts.push(path);
            }
        }
        for event in &execution.events {
            self.record_tool_event(name, label, event)?;
        }
        match execution.outcome {
            Ok(text) => {
                self.record(
                    "tool_result",
                    json!({"label": label, "tool": name, "result": text,
                           "artifacts": execution.artifacts,
                           "permission": execution.permission}),
                )?;
                Ok(ToolOutcome::Result(text))
            }
            Err(err) => {
                let message = err.to_string();
                let event = if err.is_denial() {
                    "tool_denied"
                } else {
                    "tool_result"
                };
                let key = if err.is_denial() { "reason" } else { "error" };
                self.record(event, json!({"label": label, "tool": name, key: message}))?;
                Ok(ToolOutcome::Error(message))
            }
        }
    }

    /// A tool's side effect: a transcript event named after its kind, and the summary's count.
    fn record_tool_event(
        &mut self,
        tool: &str,
        label: Option<&str>,
        event: &ToolEvent,
    ) -> Result<(), String> {
        match event.kind {
            ToolEventKind::MemoryWritten => self.memory_counts.written += 1,
            ToolEventKind::MemoryApproved => self.memory_counts.approved += 1,
            ToolEventKind::MemoryRemoved => self.memory_counts.removed += 1,
            _ => {}
        }
        let mut fields = serde_json::Map::new();
        if let Value::Object(data) = &event.data {
            // The record's own keys are not the tool's to set.
            fields.extend(
                data.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "seq" | "ts" | "run_id" | "event"))
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        } else if !event.data.is_null() {
            fields.insert("data".into(), event.data.clone());
        }
        fields.insert("label".into(), json!(label));
        fields.insert("tool".into(), json!(tool));
        self.record(event.kind.as_str(), Value::Object(fields))
    }

    fn note_decision(&mut self, tool: &str, allowed: bool, reason: &str) {
        let counts = self.approvals.by_tool.entry(tool.to_string()).or_default();
        if allowed {
            counts.approvals += 1;
            self.approvals.approvals += 1;
        } else {
            counts.denials += 1;
            self.approvals.denials += 1;
        }
        self.approvals.events.push(ApprovalEvent {
            tool_name: tool.to_string(),
            allowed,
            reason: reason.to_string(),
            timestamp: timestamp(Utc::now()),
        });
    }

    /// The summary as of now.
    pub fn summary(&self, status: &str, run_outcome: &str) -> RunSummary {
        let finished_at = Utc::now();
        let mut tracking = ContextTracking::default();
        for label in &self.contexts.seen {
            let name = label_name(label).to_string();
            tracking.context_labels_seen.push(name.clone());
            if let Some(ctx) = self.contexts.get(label) {
                tracking.per_label.insert(
                    name,
                    LabelTracking {
                        iterations: ctx.iterations,
                        conversation_id: Some(ctx.conversation_id.clone()),
                        response_id: ctx.last_response_id.clone(),
                    },
                );
            }
        }
        RunSummary {
            run_id: self.run_id.clone(),
            agent_name: self.identity.name.clone(),
            topic: self.identity.topic.clone(),
            status: status.to_string(),
            run_outcome: run_outcome.to_string(),
            error: self.last_error.clone(),
            started_at: timestamp(self.started_at),
            finished_at: timestamp(finished_at),
            duration_seconds: self.started.elapsed().as_secs_f64(),
            provider: self.provider.name().to_string(),
            model: self.provider.model().to_string(),
            tools_used: self.tools_used.clone(),
            tool_sequence: self.tool_sequence.clone(),
            approvals_denials: self.approvals.clone(),
            artifacts_created: self.artifacts.clone(),
            token_usage: {
                let usage = self.budget.usage();
                let limits = self.budget.limits();
                TokenUsage {
                    tokens_used: usage.tokens_used,
                    max_tokens_budget: limits.max_tokens,
                    iterations: self.llm_calls,
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
            memory: self.memory_counts,
        }
    }

    /// Write the summary for `outcome` (once). Returns it, and why writing failed if it did.
    fn finish_inner(&mut self, outcome: RunOutcome) -> (RunSummary, Option<String>) {
        let last = self.last_stop.map_or("done", StopReason::as_str);
        let (status, run_outcome) = match outcome {
            RunOutcome::Completed => ("completed", last),
            RunOutcome::Stopped(StopReason::Error) => ("failed", "error"),
            RunOutcome::Stopped(reason) => ("stopped", reason.as_str()),
            RunOutcome::Failed => ("failed", if last == "done" { "error" } else { last }),
        };
        let summary = self.summary(status, run_outcome);
        if self.finished {
            return (summary, None);
        }
        self.finished = true;
        let _ = self.record(
            "run_end",
            json!({"status": status, "run_outcome": run_outcome,
                   "tokens_used": self.budget.usage().tokens_used}),
        );
        let error = self.recorder().write_summary(&summary).err();
        if let Some(e) = &error {
            tracing::error!(run_id = %self.run_id, "{e}");
        }
        (summary, error)
    }
}

fn block_tool_definition() -> ToolDefinition {
    ToolDefinition {
        name: BLOCK_TOOL.to_string(),
        description: "Call this when you cannot proceed with the task at all (missing \
                      information, a contradiction, no permitted way forward). Give the reason."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {"reason": {"type": "string", "description": "Why you cannot proceed."}},
            "required": ["reason"],
            "additionalProperties": false
        }),
    }
}

#[async_trait::async_trait]
impl PhaseExecutor for AgentHarness {
    async fn run_bounded(&mut self, request: PhaseRequest) -> PhaseResult {
        self.run_bounded_inner(request).await
    }

    async fn finish(&mut self, outcome: RunOutcome) {
        self.finish_inner(outcome);
    }

    /// Lists the file in the summary's `artifacts_created` and records an `artifact` event.
    fn record_artifact(&mut self, path: &std::path::Path) {
        let path = path.display().to_string();
        if !self.artifacts.contains(&path) {
            self.artifacts.push(path.clone());
        }
        // Best effort, like `phase_end`: a transcript failure already ended a phase as `error`.
        let _ = self.record("artifact", json!({"path": path}));
    }
}

impl Drop for AgentHarness {
    /// A run dropped before it finished (its agent failed or panicked) still gets a summary,
    /// if it recorded anything at all.
    fn drop(&mut self) {
        if !self.finished && self.last_stop.is_some() {
            self.last_error.get_or_insert_with(|| {
                "the run ended without finishing (its agent stopped early or crashed)".to_string()
            });
            self.finish_inner(RunOutcome::Failed);
        }
    }
}
