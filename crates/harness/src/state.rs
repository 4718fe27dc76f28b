//! [`RunState`]: everything needed to continue a run, and [`RunState::apply`], the fold that
//! rebuilds it from the journal. The live loop changes its state only by applying the events
//! it records, so `state == fold(journal)` holds by construction.

use std::collections::{BTreeMap, VecDeque};

use lsm_phase::{PhaseRequest, PhaseResult, StopReason, ToolCallRecord, ToolOutcome};
use lsm_providers::{Message, ToolCall, Usage};
use serde::{Deserialize, Serialize};

use crate::compaction::{self, Rung, Step};
use crate::contexts::ContextState;
use crate::contract::{Coverage, TaskContract};
use crate::event::{Decision, EventEnvelope, PhaseMode, RunEvent};
use crate::hooks::HookPoint;
use crate::records::{ApprovalEvent, ApprovalsDenials, MemoryCounts};
use crate::stall::{CallIdentity, StallState, fingerprint};
use crate::work_items::{WorkItem, upsert};
use crate::{ContextStrategy, StopMode};

/// What the model sees for a call of a blocked phase.
pub(crate) const NOT_EXECUTED_BLOCKED: &str = "Not executed: the phase is blocked.";
/// What the model sees for a call that started, was not finished by a process that died, and
/// is not run again (its tool is not `read_only`).
pub const INTERRUPTED_CALL: &str = "the call was interrupted and may or may not have taken \
effect (the run was resumed after its process ended); check before repeating it";
/// What the model sees for a call skipped by a stop.
pub(crate) const NOT_EXECUTED_STOPPED: &str = "Not executed: a stop was requested.";

/// Token accounting of a run: every LLM call charged to its [`crate::RunBudget`], the
/// harness's own and those made inside tools. Visible to the harness's owner (the CLI,
/// tests), never to an agent: it is not part of any phase result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
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

impl RunUsage {
    /// Add `calls` calls that used `usage` and cost `cost`.
    pub fn add(&mut self, usage: &Usage, calls: u64, cost: Option<f64>) {
        self.tokens_used = self.tokens_used.saturating_add(usage.total());
        self.input_tokens = self.input_tokens.saturating_add(usage.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(usage.output_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(usage.cached_tokens);
        self.cache_creation_tokens = self
            .cache_creation_tokens
            .saturating_add(usage.cache_creation_tokens);
        self.llm_calls = self.llm_calls.saturating_add(calls);
        if let Some(c) = cost {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
        }
    }
}

/// One context and its label (`None` is the primary context, distinct from every name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabeledContext {
    /// The label.
    pub label: Option<String>,
    /// The conversation.
    pub context: ContextState,
}

/// A tool call recorded as started whose outcome is not recorded yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: serde_json::Value,
    /// The `pre_tool` hooks allowed it (recorded in `hook_decision`).
    #[serde(default)]
    pub hooks_cleared: bool,
}

/// Where the loop is inside the current phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhasePosition {
    /// The phase's index in the run, from 0.
    pub phase: u32,
    /// The request.
    pub request: PhaseRequest,
    /// Model loop or tool-only.
    pub mode: PhaseMode,
    /// Model calls requested in this phase so far.
    pub iteration: u32,
    /// A model call was requested and neither its answer nor its failure is recorded.
    pub awaiting_model: bool,
    /// The last response's text (what the phase returns, unless it ends otherwise).
    pub final_text: String,
    /// The phase's tool calls so far, with their outcomes.
    pub tool_calls: Vec<ToolCallRecord>,
    /// The rest of the current batch of calls: asked for, not started.
    pub batch: VecDeque<ToolCall>,
    /// The call started and not finished, if any.
    pub pending: Option<PendingCall>,
    /// Where the current iteration's calls begin in `tool_calls`.
    #[serde(default)]
    pub iteration_start: usize,
    /// The streak of identical iterations (stall detection).
    #[serde(default)]
    pub stall: StallState,
    /// How often `agent_stop` hooks blocked a stop in this phase.
    #[serde(default)]
    pub agent_stop_blocks: u32,
    /// The `agent_stop` hooks' decision on the stop after iteration `.0`: the block's reason,
    /// or `None` when they allowed it.
    #[serde(default)]
    pub agent_stop_decided: Option<(u32, Option<String>)>,
    /// The iteration in which the model last declared the task complete (`work_complete`).
    #[serde(default)]
    pub work_complete_at: Option<u32>,
    /// The iteration whose stop the task contract was last checked for (its coverage is the
    /// run's `coverage`).
    #[serde(default)]
    pub contract_checked_at: Option<u32>,
    /// How often the completion checks sent the model back in this phase.
    #[serde(default)]
    pub completion_objections: u32,
    /// The last iteration after which the model was sent back to work (a stall nudge, a
    /// completion objection, an `agent_stop` block): its stop is decided, not decided again.
    #[serde(default)]
    pub sent_back_at: Option<u32>,
    /// A compaction of the context under way (before the model call of its iteration).
    #[serde(default)]
    pub compaction: Option<Compacting>,
    /// The iteration whose model call the context was last compacted for (not compacted
    /// again for the same call).
    #[serde(default)]
    pub compacted_at: Option<u32>,
}

/// A compaction under way: where it is on the ladder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compacting {
    /// The model call it makes room for.
    pub iteration: u32,
    /// The prompt's estimate before it.
    pub tokens_before: u64,
    /// The rung it goes to next.
    pub next: Rung,
    /// The rungs applied so far.
    pub steps: Vec<String>,
    /// The summary call (rung b) asked for, not answered: the range it summarizes.
    pub awaiting_summary: Option<(usize, usize)>,
}

impl PhasePosition {
    /// The phase's context label.
    pub fn label(&self) -> &Option<String> {
        &self.request.context_label
    }
}

/// Everything needed to continue a run. Rebuilt from the journal by folding
/// ([`RunState::fold`]); the live loop changes it only through [`RunState::apply`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// `run_started` is recorded.
    pub started: bool,
    /// History trimming, as recorded in `run_started`.
    pub strategy: ContextStrategy,
    /// Every context, in the order first used.
    pub contexts: Vec<LabeledContext>,
    /// The loop's own model calls (the summary's `iterations`).
    pub llm_calls: u64,
    /// Every call charged to the run: the loop's and the tools'.
    pub usage: RunUsage,
    /// Calls per tool (run or refused).
    pub tools_used: BTreeMap<String, u64>,
    /// Tool names in call order.
    pub tool_sequence: Vec<String>,
    /// Permission and policy decisions.
    pub approvals: ApprovalsDenials,
    /// Files written by tools and saved by the agent layer, once each.
    pub artifacts: Vec<String>,
    /// Memory changes reported by tools.
    pub memory: MemoryCounts,
    /// The last standing-memory block recorded.
    pub last_standing: Option<String>,
    /// The last phase's stop reason.
    pub last_stop: Option<StopReason>,
    /// The last error that ended a phase.
    pub last_error: Option<String>,
    /// Phases started so far (the next phase's index).
    pub phases_started: u32,
    /// Each completed phase's result, by index.
    pub phases: BTreeMap<u32, PhaseResult>,
    /// The current phase, while one runs.
    pub current: Option<PhasePosition>,
    /// The run's status once `run_finished` is recorded.
    pub finished: Option<String>,
    /// Which arguments identify a call of which tool, as recorded in `run_started`.
    #[serde(default)]
    pub call_identity: CallIdentity,
    /// The stop mode, as recorded in `run_started`.
    #[serde(default)]
    pub stop_mode: StopMode,
    /// How often the completion checks may object in one phase, as recorded.
    #[serde(default)]
    pub completion_retries: u32,
    /// The task contract, as recorded in `run_started`.
    #[serde(default)]
    pub contract: Option<TaskContract>,
    /// The last coverage ledger of the contract.
    #[serde(default)]
    pub coverage: Option<Coverage>,
    /// The work-item ledger.
    #[serde(default)]
    pub work_items: Vec<WorkItem>,
    /// Tool calls refused so far (by the allowlist, a guard, a hook, the policy or a person).
    #[serde(default)]
    pub denials: u64,
    /// What was still unmet when an `interactive` stop was accepted.
    #[serde(default)]
    pub unmet_accepted: Vec<String>,
}

impl RunState {
    /// The state a journal describes.
    pub fn fold<'a>(journal: impl IntoIterator<Item = &'a EventEnvelope>) -> RunState {
        let mut state = RunState::default();
        for line in journal {
            state.apply(&line.event);
        }
        state
    }

    /// Every tool call of the run so far, in order: the completed phases' and the current
    /// one's (the evidence a task contract is checked against).
    pub fn all_calls(&self) -> Vec<&ToolCallRecord> {
        self.phases
            .values()
            .flat_map(|r| r.tool_calls.iter())
            .chain(self.current.iter().flat_map(|p| p.tool_calls.iter()))
            .collect()
    }

    /// The context of `label`, if it exists.
    pub fn context(&self, label: &Option<String>) -> Option<&ContextState> {
        self.contexts
            .iter()
            .find(|c| &c.label == label)
            .map(|c| &c.context)
    }

    fn context_mut(&mut self, label: &Option<String>) -> Option<&mut ContextState> {
        self.contexts
            .iter_mut()
            .find(|c| &c.label == label)
            .map(|c| &mut c.context)
    }

    /// The current phase's context (LLM mode), if any.
    fn current_context_mut(&mut self) -> Option<&mut ContextState> {
        let label = self.current.as_ref()?.label().clone();
        self.context_mut(&label)
    }

    fn note_decision(&mut self, d: &Decision) {
        let counts = self
            .approvals
            .by_tool
            .entry(d.tool_name.clone())
            .or_default();
        if d.allowed {
            counts.approvals += 1;
            self.approvals.approvals += 1;
        } else {
            counts.denials += 1;
            self.approvals.denials += 1;
        }
        self.approvals.events.push(ApprovalEvent {
            tool_name: d.tool_name.clone(),
            allowed: d.allowed,
            reason: d.reason.clone(),
            timestamp: d.timestamp.clone(),
        });
    }

    fn add_artifact(&mut self, path: &str) {
        if !self.artifacts.iter().any(|a| a == path) {
            self.artifacts.push(path.to_string());
        }
    }

    /// The pending call ends with `outcome`: the phase's record and, in LLM mode, the tool
    /// message the model sees.
    fn finish_call(&mut self, call_id: &str, tool: &str, outcome: ToolOutcome) {
        let Some(pos) = self.current.as_mut() else {
            return;
        };
        let arguments = match pos.pending.take() {
            Some(p) if p.call_id == call_id => p.arguments,
            other => {
                pos.pending = other;
                serde_json::Value::Null
            }
        };
        let for_model = match &outcome {
            ToolOutcome::Result(text) => text.clone(),
            ToolOutcome::Error(message) => format!("Error: {message}"),
        };
        let llm = pos.mode == PhaseMode::Llm;
        pos.tool_calls.push(ToolCallRecord {
            name: tool.to_string(),
            arguments,
            outcome,
        });
        if llm && pos.batch.is_empty() && pos.pending.is_none() {
            // The iteration is complete: its answer and every call's outcome are known.
            let calls = pos
                .tool_calls
                .get(pos.iteration_start..)
                .unwrap_or_default();
            pos.stall
                .observe(fingerprint(&pos.final_text, calls, &self.call_identity));
        }
        if llm && let Some(ctx) = self.current_context_mut() {
            ctx.history.push(Message::tool_result(call_id, for_model));
        }
    }

    /// A `hook_decision`: a `pre_tool` allow clears the pending call; an `agent_stop`
    /// decision is remembered for the iteration; `post_tool` notes are added to the result
    /// the model sees.
    fn hook_decided(
        &mut self,
        hook: HookPoint,
        call_id: Option<&str>,
        decision: &str,
        reason: &Option<String>,
        notes: &[String],
    ) {
        match hook {
            HookPoint::PreTool if decision == "allow" => {
                if let Some(p) = self.current.as_mut().and_then(|p| p.pending.as_mut())
                    && Some(p.call_id.as_str()) == call_id
                {
                    p.hooks_cleared = true;
                }
            }
            HookPoint::AgentStop => {
                if let Some(pos) = self.current.as_mut() {
                    let block = (decision == "block").then(|| reason.clone().unwrap_or_default());
                    pos.agent_stop_decided = Some((pos.iteration, block));
                }
            }
            HookPoint::PostTool if !notes.is_empty() => {
                let Some(id) = call_id else { return };
                if let Some(msg) = self.current_context_mut().and_then(|c| {
                    c.history
                        .iter_mut()
                        .rev()
                        .find(|m| m.tool_call_id.as_deref() == Some(id))
                }) {
                    for note in notes {
                        msg.content
                            .push_str(&format!("\n\n[note from a post_tool hook] {note}"));
                    }
                }
            }
            _ => {}
        }
    }

    /// Answer every call left in the batch with `text` (they will not run).
    fn skip_batch(&mut self, text: &str) {
        let Some(pos) = self.current.as_mut() else {
            return;
        };
        let skipped: Vec<ToolCall> = pos.batch.drain(..).collect();
        let llm = pos.mode == PhaseMode::Llm;
        if llm && let Some(ctx) = self.current_context_mut() {
            for call in skipped {
                ctx.history.push(Message::tool_result(call.id, text));
            }
        }
    }

    /// Fold one event into the state. Events that change nothing (retries, interaction
    /// events, …) are accepted and ignored.
    pub fn apply(&mut self, event: &RunEvent) {
        match event {
            RunEvent::RunStarted {
                context_window_strategy,
                call_identity,
                stop_mode,
                completion_retries,
                contract,
                ..
            } => {
                self.started = true;
                self.strategy = *context_window_strategy;
                self.call_identity.clone_from(call_identity);
                self.stop_mode = *stop_mode;
                self.completion_retries = *completion_retries;
                self.contract.clone_from(contract);
            }
            RunEvent::PhaseStarted {
                phase,
                mode,
                request,
                conversation_id,
                ..
            } => {
                self.phases_started = self.phases_started.max(phase.saturating_add(1));
                let mut batch = VecDeque::new();
                if *mode == PhaseMode::ToolOnly {
                    for (i, call) in request.direct_tool_calls.iter().flatten().enumerate() {
                        batch.push_back(ToolCall {
                            id: direct_call_id(*phase, i),
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                        });
                    }
                }
                if *mode == PhaseMode::Llm
                    && let Some(id) = conversation_id
                {
                    let label = &request.context_label;
                    match self.context_mut(label) {
                        Some(ctx) if &ctx.conversation_id != id => ctx.reset(id.clone()),
                        Some(_) => {}
                        None => self.contexts.push(LabeledContext {
                            label: label.clone(),
                            context: ContextState::new(id.clone()),
                        }),
                    }
                    if let Some(ctx) = self.context_mut(label) {
                        ctx.phase_start = None;
                        if !request.user_message.is_empty() {
                            ctx.phase_start = Some(ctx.history.len());
                            ctx.history
                                .push(Message::user(request.user_message.clone()));
                        }
                    }
                }
                self.current = Some(PhasePosition {
                    phase: *phase,
                    request: request.clone(),
                    mode: *mode,
                    iteration: 0,
                    awaiting_model: false,
                    final_text: String::new(),
                    tool_calls: Vec::new(),
                    batch,
                    pending: None,
                    iteration_start: 0,
                    stall: StallState::default(),
                    agent_stop_blocks: 0,
                    agent_stop_decided: None,
                    work_complete_at: None,
                    contract_checked_at: None,
                    completion_objections: 0,
                    sent_back_at: None,
                    compaction: None,
                    compacted_at: None,
                });
            }
            RunEvent::RunResumed { .. } => {
                // The previous process's unanswered model call is forgotten: the next step
                // requests it again, as the same iteration.
                if let Some(pos) = self.current.as_mut()
                    && pos.awaiting_model
                {
                    pos.awaiting_model = false;
                    pos.iteration = pos.iteration.saturating_sub(1);
                }
            }
            RunEvent::StandingContext { text, .. } => self.last_standing.clone_from(text),
            RunEvent::LlmRequest { iteration, .. } => {
                if let Some(pos) = self.current.as_mut() {
                    pos.iteration = *iteration;
                    pos.awaiting_model = true;
                }
            }
            RunEvent::CompactionStarted {
                iteration,
                tokens_before,
                ..
            } => {
                if let Some(pos) = self.current.as_mut() {
                    pos.compaction = Some(Compacting {
                        iteration: *iteration,
                        tokens_before: *tokens_before,
                        next: Rung::Elide,
                        steps: Vec::new(),
                        awaiting_summary: None,
                    });
                }
            }
            RunEvent::CompactionSummaryRequested { from, to, .. } => {
                if let Some(c) = self.current.as_mut().and_then(|p| p.compaction.as_mut()) {
                    c.next = Rung::Summarize;
                    c.awaiting_summary = Some((*from, *to));
                }
            }
            RunEvent::CompactionSummaryFailed { .. } => {
                if let Some(c) = self.current.as_mut().and_then(|p| p.compaction.as_mut()) {
                    c.awaiting_summary = None;
                    c.next = Rung::Drop;
                }
            }
            RunEvent::CompactionStep {
                step,
                usage,
                cost_usd,
                ..
            } => {
                if let Some(u) = usage {
                    self.usage.add(u, 1, *cost_usd);
                }
                if let Some(c) = self.current.as_mut().and_then(|p| p.compaction.as_mut()) {
                    c.awaiting_summary = None;
                    c.steps.push(step.name().to_string());
                    c.next = match step {
                        Step::ElideToolResults { .. } => Rung::Summarize,
                        Step::Summarize { .. } | Step::DropOldest { .. } => Rung::Drop,
                    };
                }
                if let Some(ctx) = self.current_context_mut() {
                    let removed = compaction::apply(&mut ctx.history, step);
                    if let (Some(p), Step::Summarize { to, .. } | Step::DropOldest { to, .. }) =
                        (ctx.phase_start, step)
                        && p >= *to
                    {
                        ctx.phase_start = Some(p.saturating_sub(removed.unsigned_abs()));
                    }
                }
            }
            RunEvent::CompactionFinished {
                iteration, steps, ..
            } => {
                if let Some(pos) = self.current.as_mut() {
                    pos.compaction = None;
                    pos.compacted_at = Some(*iteration);
                }
                if let Some(ctx) = self.current_context_mut() {
                    ctx.compactions = ctx.compactions.saturating_add(1);
                    if !steps.is_empty() {
                        // A server-side chain still holds what was compacted away: the next
                        // call sends the compacted history in full.
                        ctx.last_response_id = None;
                    }
                }
            }
            RunEvent::LlmResponse {
                text,
                tool_calls,
                usage,
                response_id,
                cost_usd,
                ..
            } => {
                self.llm_calls += 1;
                self.usage.add(usage, 1, *cost_usd);
                if let Some(ctx) = self.current_context_mut() {
                    ctx.iterations += 1;
                    if response_id.is_some() {
                        ctx.last_response_id.clone_from(response_id);
                    }
                    ctx.history
                        .push(Message::assistant(text.clone(), tool_calls.clone()));
                }
                if let Some(pos) = self.current.as_mut() {
                    pos.awaiting_model = false;
                    pos.final_text.clone_from(text);
                    pos.batch = tool_calls.iter().cloned().collect();
                    pos.iteration_start = pos.tool_calls.len();
                    if tool_calls.is_empty() {
                        // An answer alone is a whole iteration.
                        pos.stall
                            .observe(fingerprint(text, &[], &self.call_identity));
                    }
                }
            }
            RunEvent::LlmError { chain_broken, .. } => {
                self.llm_calls += 1;
                if let Some(ctx) = self.current_context_mut() {
                    ctx.iterations += 1;
                    if *chain_broken {
                        ctx.last_response_id = None;
                    }
                }
                if let Some(pos) = self.current.as_mut() {
                    pos.awaiting_model = false;
                }
            }
            RunEvent::LlmChainReset { .. } => {
                if let Some(ctx) = self.current_context_mut() {
                    ctx.last_response_id = None;
                }
            }
            RunEvent::ToolCallStarted {
                call_id,
                tool,
                arguments,
                ..
            } => {
                *self.tools_used.entry(tool.clone()).or_insert(0) += 1;
                self.tool_sequence.push(tool.clone());
                if let Some(pos) = self.current.as_mut() {
                    if let Some(i) = pos.batch.iter().position(|c| &c.id == call_id) {
                        pos.batch.remove(i);
                    }
                    pos.pending = Some(PendingCall {
                        call_id: call_id.clone(),
                        tool: tool.clone(),
                        arguments: arguments.clone(),
                        hooks_cleared: false,
                    });
                }
            }
            RunEvent::ToolDenied {
                call_id,
                tool,
                reason,
                permission,
                ..
            } => {
                if let Some(d) = permission {
                    self.note_decision(d);
                }
                self.denials = self.denials.saturating_add(1);
                self.finish_call(call_id, tool, ToolOutcome::Error(reason.clone()));
            }
            RunEvent::ToolResult {
                call_id,
                tool,
                success,
                content,
                artifacts,
                permission,
                ..
            } => {
                if let Some(d) = permission {
                    self.note_decision(d);
                }
                for path in artifacts {
                    self.add_artifact(path);
                }
                let outcome = if *success {
                    ToolOutcome::Result(content.clone())
                } else {
                    ToolOutcome::Error(content.clone())
                };
                self.finish_call(call_id, tool, outcome);
            }
            RunEvent::ToolUsage {
                llm_calls,
                usage,
                cost_usd,
                ..
            } => self.usage.add(usage, *llm_calls, *cost_usd),
            RunEvent::MemoryWritten(_) => self.memory.written += 1,
            RunEvent::MemoryApproved(_) => self.memory.approved += 1,
            RunEvent::MemoryRemoved(_) => self.memory.removed += 1,
            RunEvent::Blocked { reason, .. } => {
                self.skip_batch(NOT_EXECUTED_BLOCKED);
                if let Some(pos) = self.current.as_mut() {
                    pos.final_text.clone_from(reason);
                }
            }
            RunEvent::StallNudge {
                iteration, message, ..
            } => {
                if let Some(pos) = self.current.as_mut() {
                    pos.stall.nudged_at = Some(*iteration);
                    pos.sent_back_at = Some(*iteration);
                }
                if let Some(ctx) = self.current_context_mut() {
                    ctx.history.push(Message::user(message.clone()));
                }
            }
            RunEvent::HookDecision {
                hook,
                call_id,
                decision,
                reason,
                notes,
                ..
            } => self.hook_decided(*hook, call_id.as_deref(), decision, reason, notes),
            RunEvent::StopBlocked {
                blocks, message, ..
            } => {
                if let Some(pos) = self.current.as_mut() {
                    pos.agent_stop_blocks = *blocks;
                    pos.sent_back_at = Some(pos.iteration);
                }
                if let Some(ctx) = self.current_context_mut() {
                    ctx.history.push(Message::user(message.clone()));
                }
            }
            RunEvent::WorkItemChanged { item, .. } => upsert(&mut self.work_items, item),
            RunEvent::WorkCompleteDeclared {
                iteration, summary, ..
            } => {
                if let Some(pos) = self.current.as_mut() {
                    pos.work_complete_at = Some(*iteration);
                    if pos.final_text.trim().is_empty() {
                        pos.final_text.clone_from(summary);
                    }
                }
            }
            RunEvent::ContractChecked {
                iteration,
                at,
                coverage,
                ..
            } => {
                if at == "stop"
                    && let Some(pos) = self.current.as_mut()
                {
                    pos.contract_checked_at = Some(*iteration);
                }
                self.coverage = Some(coverage.clone());
            }
            RunEvent::CompletionObjected {
                retries, message, ..
            } => {
                if let Some(pos) = self.current.as_mut() {
                    pos.completion_objections = *retries;
                    pos.sent_back_at = Some(pos.iteration);
                }
                if let Some(ctx) = self.current_context_mut() {
                    ctx.history.push(Message::user(message.clone()));
                }
            }
            RunEvent::StopAccepted { unmet, .. } => self.unmet_accepted.clone_from(unmet),
            RunEvent::StopRequested { .. } => {
                self.skip_batch(NOT_EXECUTED_STOPPED);
                if let Some(pos) = self.current.as_mut() {
                    pos.awaiting_model = false;
                }
            }
            RunEvent::Artifact { path } => self.add_artifact(path),
            RunEvent::PhaseEnded {
                phase,
                result,
                error,
                ..
            } => {
                self.last_stop = Some(result.stop_reason);
                if error.is_some() {
                    self.last_error.clone_from(error);
                }
                self.phases.insert(*phase, result.clone());
                self.current = None;
            }
            RunEvent::RunFinished { status, .. } => self.finished = Some(status.clone()),
            RunEvent::LlmRetry { .. }
            | RunEvent::ToolCallRepaired { .. }
            | RunEvent::LlmStream { .. }
            | RunEvent::BudgetExhausted { .. }
            | RunEvent::Stalled { .. }
            | RunEvent::StopForced { .. }
            | RunEvent::ContractUnmet { .. }
            | RunEvent::ToolEvent { .. }
            | RunEvent::InteractionRequest(_)
            | RunEvent::InteractionAcknowledged(_)
            | RunEvent::InteractionTimeout(_)
            | RunEvent::InteractionResponse(_) => {}
        }
    }
}

/// The id of a tool-only phase's `index`th call.
pub(crate) fn direct_call_id(phase: u32, index: usize) -> String {
    format!("direct-{phase}-{index}")
}
