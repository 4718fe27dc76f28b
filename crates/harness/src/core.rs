//! The pure core of the loop: given the [`RunState`] and one [`Input`], the events to record
//! and the next [`Effect`]. No I/O, no clock, no randomness: the driver
//! ([`crate::AgentHarness`]) supplies what it learned (a standing block, a model answer, a
//! tool's outcome, a stop, the time, a fresh conversation id) and carries the effect out.
//!
//! Every event the core emits is applied to the state at once ([`RunState::apply`], the
//! fold); the driver appends the same events to the journal before it performs the effect,
//! so after each step the state is the fold of the journal.

use std::collections::HashSet;
use std::sync::Arc;

use lsm_phase::{PhaseRequest, PhaseResult, StopReason};
use lsm_providers::{
    CallOptions, LlmRequest, LlmResponse, Message, Pricing, ProviderEvent, ToolDefinition, Usage,
};
use lsm_sandbox::{ToolEvent, ToolEventKind};
use serde_json::Value;

use crate::budget::{BudgetLimits, BudgetSnapshot, Grant, exhausted, gate};
use crate::contexts::{label_name, sent_messages};
use crate::contract::{Coverage, Evidence, FileFact, TaskContract, evaluate};
use crate::control::{BLOCK_TOOL, WORK_COMPLETE_TOOL, control_tool_definition, is_control_tool};
use crate::event::{
    Decision, PhaseMode, RepairAction, RunEvent, RunLaunch, ToolSideEffect, summarize,
    without_reserved,
};
use crate::hooks::{Hook, HookEvent, HookPoint, HookRun};
use crate::stall::{CallIdentity, STALL_NUDGE, StallConfig};
use crate::state::{INTERRUPTED_CALL, RunState, RunUsage};
use crate::stop::{
    self, Completion, ContractState, Ending, HardStop, HookVerdict, Objection, Signal, StopFacts,
    Verdict,
};
use crate::work_items::{self, WORK_ITEM_TOOLS};
use crate::{ContextStrategy, StopMode, ToolCallGuard};

/// What the core needs to know about the run that never changes while it runs.
pub struct CoreConfig {
    /// The agent.
    pub agent: String,
    /// The task or topic (recorded in `run_started`).
    pub topic: String,
    /// The run's system prompt.
    pub system_prompt: String,
    /// The tools the agent may ever call.
    pub allowlist: HashSet<String>,
    /// The allowlist in the agent's order (for the record).
    pub allowlist_order: Vec<String>,
    /// Every registered tool's definition (the sandbox's registry).
    pub tools: Vec<ToolDefinition>,
    /// Offer the `block` control tool.
    pub offer_block_tool: bool,
    /// History trimming.
    pub strategy: ContextStrategy,
    /// The run's budget ceilings.
    pub limits: BudgetLimits,
    /// Provider name.
    pub provider: String,
    /// Model.
    pub model: String,
    /// Argument checks run after the allowlist and `tool_names`.
    pub guards: Vec<Arc<dyn ToolCallGuard>>,
    /// How the owner started the run (recorded in `run_started`).
    pub launch: Option<RunLaunch>,
    /// Stall detection.
    pub stall: StallConfig,
    /// Which arguments identify a call of which tool (recorded in `run_started`).
    pub call_identity: CallIdentity,
    /// Hooks (the driver runs them; the core decides on their answers).
    pub hooks: Vec<Arc<dyn Hook>>,
    /// How often `agent_stop` hooks may block a stop in one phase.
    pub agent_stop_max_blocks: u32,
    /// The stop mode (recorded in `run_started`; a resumed run uses the recorded one).
    pub stop_mode: StopMode,
    /// How often the completion checks may object in one phase (recorded likewise).
    pub completion_retries: u32,
    /// The task contract (recorded likewise).
    pub contract: Option<TaskContract>,
    /// Offer the work-item tools to the agent whatever its allowlist says.
    pub work_items: bool,
    /// Context compaction's settings.
    pub compaction: crate::compaction::CompactionConfig,
    /// The model's window and compaction's marks (from the settings and the provider).
    pub window: crate::compaction::Window,
}

impl std::fmt::Debug for CoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreConfig")
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

/// What the driver knows at the moment of a step, besides its input.
pub struct Env<'a> {
    /// A stop was requested.
    pub stop: bool,
    /// The budget as it is now.
    pub budget: BudgetSnapshot,
    /// The model's prices.
    pub pricing: Option<Pricing>,
    /// The provider's prompt-token estimate of a request (a pure computation).
    pub estimate: &'a dyn Fn(&LlmRequest) -> u64,
    /// Now (RFC 3339, UTC), for decisions' timestamps.
    pub now: String,
}

/// What a tool call did, as the sandbox reported it.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolRun {
    /// The tool ran (or the sandbox refused it).
    Ran {
        /// The output, or why there is none and whether that is a denial.
        outcome: Result<String, ToolFailure>,
        /// Files the call wrote.
        artifacts: Vec<String>,
        /// The permission decision, if one was made.
        permission: Option<Decision>,
        /// Side effects the tool reported.
        events: Vec<ToolEvent>,
    },
    /// A stop was requested while the tool ran; its outcome is unknown.
    Interrupted,
}

/// Why a tool call has no output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// The message the model gets.
    pub message: String,
    /// A permission or policy refusal (recorded as `tool_denied`).
    pub denial: bool,
}

/// What the tool's own model calls charged to the run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolSpend {
    /// Calls.
    pub llm_calls: u64,
    /// Their usage.
    pub usage: Usage,
    /// Their cost.
    pub cost_usd: Option<f64>,
    /// The run's totals after the tool.
    pub totals: RunUsage,
}

/// One thing the driver learned.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The agent asks for a phase; `conversation_id` is used if the phase starts a context.
    Start {
        /// The request.
        request: PhaseRequest,
        /// A fresh conversation id.
        conversation_id: String,
    },
    /// The standing-memory block for the next call.
    Standing(Option<String>),
    /// The model answered; the call was charged `cost` and the run's totals are `totals`.
    Answered {
        /// The answer.
        response: LlmResponse,
        /// The call's cost.
        cost: Option<f64>,
        /// The run's totals after it.
        totals: RunUsage,
    },
    /// The model call failed after the provider's retries.
    ModelFailed {
        /// What went wrong.
        error: String,
        /// The stored response id is no longer valid.
        chain_broken: bool,
    },
    /// A stop was requested while the model call was in flight (the call was abandoned).
    StoppedDuringCall,
    /// A tool call ended.
    ToolDone {
        /// What it did.
        run: ToolRun,
        /// What its own model calls spent, if it made any.
        spend: Option<ToolSpend>,
    },
    /// The driver could not record the last events: the phase ends as `error`.
    RecordFailed(String),
    /// What the driver found at the paths of an [`Effect::CheckFiles`], in its order.
    FilesChecked(Vec<(String, FileFact)>),
    /// The hooks of `event` ran (those that match it, in order, up to the first refusal).
    HooksAnswered {
        /// What they were told (as in [`Effect::RunHooks`]).
        event: HookEvent,
        /// Their answers.
        runs: Vec<HookRun>,
    },
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Ask the memory provider for the standing block about `topic`.
    FetchStanding {
        /// The last user message of the phase's context.
        topic: String,
    },
    /// Call the model with `request` (its output cap set), holding `grant` of the budget.
    CallModel {
        /// The request.
        request: LlmRequest,
        /// The budget share the call holds until charged.
        grant: Grant,
    },
    /// Run the pending tool call through the sandbox.
    RunTool {
        /// Its id.
        call_id: String,
        /// The tool.
        tool: String,
        /// Its arguments.
        arguments: Value,
    },
    /// Run the hooks that match `event` (the driver fills in its `run_id`) and answer
    /// with [`Input::HooksAnswered`].
    RunHooks(HookEvent),
    /// Look at these files (paths a task contract names, as the tools resolve them) and
    /// answer with [`Input::FilesChecked`].
    CheckFiles(Vec<String>),
    /// The phase is over.
    Finish(PhaseResult),
}

/// The events of one step and what comes next.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// To record, in order (already applied to the state).
    pub events: Vec<RunEvent>,
    /// What to do next.
    pub effect: Effect,
}

/// The loop's decisions. See the module documentation.
#[derive(Debug)]
pub struct Core {
    config: CoreConfig,
}

/// Apply `event` to `state` and keep it for the journal.
fn emit(state: &mut RunState, out: &mut Vec<RunEvent>, event: RunEvent) {
    state.apply(&event);
    out.push(event);
}

impl Core {
    /// A core for one run.
    pub fn new(config: CoreConfig) -> Self {
        Core { config }
    }

    /// The run's fixed settings.
    pub fn config(&self) -> &CoreConfig {
        &self.config
    }

    /// Change the recorded topic before the run starts (`run` sets it to the task).
    pub fn set_topic(&mut self, topic: &str) {
        self.config.topic = topic.to_string();
    }

    /// The settings, while the driver is being built.
    pub(crate) fn config_mut(&mut self) -> &mut CoreConfig {
        &mut self.config
    }

    /// One step: the input's events and the next effect.
    pub fn step(&self, state: &mut RunState, input: Input, env: &Env<'_>) -> Step {
        let mut out = Vec::new();
        let effect = self.decide(state, input, env, &mut out);
        Step {
            events: out,
            effect,
        }
    }

    /// A provider's progress during a call: retries and chain resets are recorded; other
    /// progress goes to the event sink only (the driver's business).
    pub fn progress(&self, state: &mut RunState, event: &ProviderEvent) -> Vec<RunEvent> {
        let label = current_label(state);
        let mut out = Vec::new();
        match event {
            ProviderEvent::Retry {
                attempt,
                delay,
                reason,
            } => emit(
                state,
                &mut out,
                RunEvent::LlmRetry {
                    label,
                    attempt: *attempt,
                    delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    reason: reason.clone(),
                },
            ),
            ProviderEvent::ChainReset { reason } => emit(
                state,
                &mut out,
                RunEvent::LlmChainReset {
                    label,
                    reason: reason.clone(),
                },
            ),
            _ => {}
        }
        out
    }

    fn decide(
        &self,
        st: &mut RunState,
        input: Input,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        match input {
            Input::Start {
                request,
                conversation_id,
            } => self.start(st, request, conversation_id, env, out),
            Input::Standing(block) => self.prepare_call(st, block, env, out),
            Input::Answered {
                response,
                cost,
                totals,
            } if Core::awaiting_summary(st) => {
                self.summarized(st, response, cost, totals, env, out)
            }
            Input::Answered {
                response,
                cost,
                totals,
            } => self.answered(st, response, cost, totals, env, out),
            Input::ModelFailed { error, .. } if Core::awaiting_summary(st) => {
                self.summary_failed(st, error, true, env, out)
            }
            Input::ModelFailed {
                error,
                chain_broken,
            } => {
                let message = format!("LLM call failed: {error}");
                emit(
                    st,
                    out,
                    RunEvent::LlmError {
                        label: current_label(st),
                        error: message.clone(),
                        chain_broken,
                    },
                );
                finish_error(st, message, out)
            }
            Input::StoppedDuringCall => {
                emit(
                    st,
                    out,
                    RunEvent::StopRequested {
                        label: Some(current_label(st)),
                        at: Some("llm_call".into()),
                    },
                );
                finish(st, StopReason::StopRequested, out)
            }
            Input::ToolDone { run, spend } => self.tool_done(st, run, spend, env, out),
            Input::RecordFailed(message) => finish_error(st, message, out),
            Input::HooksAnswered { event, runs } => self.hooks_answered(st, event, runs, env, out),
            Input::FilesChecked(files) => {
                self.contract_checked(st, &files, out);
                self.iteration_end(st, Signal::Done, env, out)
            }
        }
    }

    /// Record the task contract's coverage for the current stop.
    fn contract_checked(
        &self,
        st: &mut RunState,
        files: &[(String, FileFact)],
        out: &mut Vec<RunEvent>,
    ) {
        let Some(contract) = st.contract.clone() else {
            return;
        };
        let Some(pos) = st.current.as_ref() else {
            return;
        };
        let label = Some(label_name(pos.label()).to_string());
        let iteration = pos.iteration;
        let coverage = coverage(st, &contract, files);
        emit(
            st,
            out,
            RunEvent::ContractChecked {
                label,
                iteration,
                at: "stop".to_string(),
                coverage,
            },
        );
    }

    /// Whether a hook wants to hear of `point` (for `tool`).
    pub fn hooks_match(&self, point: HookPoint, tool: Option<&str>) -> bool {
        self.config.hooks.iter().any(|h| h.matches(point, tool))
    }

    /// What hooks are told at `point` (the driver fills in the run id).
    fn hook_event(&self, point: HookPoint) -> HookEvent {
        HookEvent {
            hook: point,
            run_id: String::new(),
            agent: self.config.agent.clone(),
            tool: None,
            call_id: None,
            arguments: None,
            result: None,
            success: None,
            final_text: None,
            status: None,
        }
    }

    /// The `pre_tool` hooks' event for the pending call.
    fn pre_tool_event(&self, call_id: &str, tool: &str, arguments: &Value) -> HookEvent {
        HookEvent {
            tool: Some(tool.to_string()),
            call_id: Some(call_id.to_string()),
            arguments: Some(arguments.clone()),
            ..self.hook_event(HookPoint::PreTool)
        }
    }

    /// The record of hooks that observe (`run_start`, `run_end`): what the driver journals.
    pub fn observed(&self, event: &HookEvent, runs: Vec<HookRun>) -> RunEvent {
        RunEvent::HookDecision {
            hook: event.hook,
            label: None,
            call_id: None,
            tool: None,
            decision: "allow".into(),
            reason: None,
            notes: Vec::new(),
            runs,
        }
    }

    /// The hooks answered: record the decision, then act on it.
    fn hooks_answered(
        &self,
        st: &mut RunState,
        event: HookEvent,
        runs: Vec<HookRun>,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let point = event.hook;
        let label = st
            .current
            .as_ref()
            .filter(|p| p.mode == PhaseMode::Llm)
            .map(|p| label_name(p.label()).to_string());
        let refusal = runs.iter().find_map(|r| r.refusal(point));
        let notes: Vec<String> = if point == HookPoint::PostTool {
            runs.iter()
                .filter(|r| r.outcome == "note")
                .filter_map(|r| r.message.clone())
                .collect()
        } else {
            Vec::new()
        };
        let decision = match (&refusal, point) {
            (None, _) => "allow",
            (Some(_), HookPoint::AgentStop) => "block",
            (Some(_), _) => "deny",
        };
        emit(
            st,
            out,
            RunEvent::HookDecision {
                hook: point,
                label: label.clone(),
                call_id: event.call_id.clone(),
                tool: event.tool.clone(),
                decision: decision.to_string(),
                reason: refusal.clone(),
                notes,
                runs,
            },
        );
        match point {
            HookPoint::PreTool => {
                let Some(pending) = st.current.as_ref().and_then(|p| p.pending.clone()) else {
                    return self.advance(st, env, out);
                };
                match refusal {
                    Some(reason) => {
                        let reason = format!(
                            "Tool '{}' was refused by a pre_tool hook: {reason}",
                            pending.tool
                        );
                        emit(
                            st,
                            out,
                            denied(label, pending.call_id, pending.tool, reason, env),
                        );
                        self.advance(st, env, out)
                    }
                    None => Effect::RunTool {
                        call_id: pending.call_id,
                        tool: pending.tool,
                        arguments: pending.arguments,
                    },
                }
            }
            HookPoint::AgentStop => self.iteration_end(st, Signal::Done, env, out),
            HookPoint::PostTool | HookPoint::RunStart | HookPoint::RunEnd => {
                self.advance(st, env, out)
            }
        }
    }

    fn start(
        &self,
        st: &mut RunState,
        request: PhaseRequest,
        fresh_id: String,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        if !st.started {
            let c = &self.config;
            emit(
                st,
                out,
                RunEvent::RunStarted {
                    agent: c.agent.clone(),
                    topic: c.topic.clone(),
                    tool_allowlist: c.allowlist_order.clone(),
                    provider: c.provider.clone(),
                    model: c.model.clone(),
                    max_tokens_budget: c.limits.max_tokens,
                    max_cost_usd: c.limits.max_cost_usd,
                    context_window_strategy: c.strategy,
                    launch: c.launch.clone(),
                    call_identity: c.call_identity.clone(),
                    stop_mode: c.stop_mode,
                    completion_retries: c.completion_retries,
                    contract: c.contract.clone(),
                },
            );
        }
        let mode = if request.direct_tool_calls.is_some() {
            PhaseMode::ToolOnly
        } else {
            PhaseMode::Llm
        };
        let conversation_id =
            (mode == PhaseMode::Llm).then(|| match st.context(&request.context_label) {
                Some(ctx) if request.continue_context => ctx.conversation_id.clone(),
                _ => fresh_id,
            });
        emit(
            st,
            out,
            RunEvent::PhaseStarted {
                phase: st.phases_started,
                label: label_name(&request.context_label).to_string(),
                mode,
                request,
                conversation_id,
            },
        );
        if mode == PhaseMode::ToolOnly && env.stop {
            emit(
                st,
                out,
                RunEvent::StopRequested {
                    label: None,
                    at: Some("tool_only".into()),
                },
            );
            return finish(st, StopReason::StopRequested, out);
        }
        self.advance(st, env, out)
    }

    /// Continue the current phase of a resumed run from its folded position (after
    /// `run_resumed`, which forgot an unanswered model call). A call started and never
    /// finished is repaired with `repair`: run again, or answered with [`INTERRUPTED_CALL`]
    /// as a failed result. Then as [`Core::advance`].
    pub fn resume(
        &self,
        st: &mut RunState,
        repair: RepairAction,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let Some(pos) = st.current.as_ref() else {
            return Effect::Finish(PhaseResult::empty(StopReason::Error));
        };
        if pos.compaction.is_some() {
            // Stopped on the ladder, before the model call it made room for.
            if let Some(effect) = self.resume_compaction(st, env, out) {
                return effect;
            }
        }
        let Some(pos) = st.current.as_ref() else {
            return Effect::Finish(PhaseResult::empty(StopReason::Error));
        };
        let Some(pending) = pos.pending.clone() else {
            return self
                .decided_before_the_crash(st, env, out)
                .unwrap_or_else(|| self.advance(st, env, out));
        };
        let label = (pos.mode == PhaseMode::Llm).then(|| label_name(pos.label()).to_string());
        emit(
            st,
            out,
            RunEvent::ToolCallRepaired {
                label: label.clone(),
                call_id: pending.call_id.clone(),
                tool: pending.tool.clone(),
                action: repair,
            },
        );
        match repair {
            // A call the pre_tool hooks have not cleared is put to them first.
            RepairAction::RunAgain
                if !pending.hooks_cleared
                    && self.hooks_match(HookPoint::PreTool, Some(&pending.tool)) =>
            {
                Effect::RunHooks(self.pre_tool_event(
                    &pending.call_id,
                    &pending.tool,
                    &pending.arguments,
                ))
            }
            RepairAction::RunAgain => Effect::RunTool {
                call_id: pending.call_id,
                tool: pending.tool,
                arguments: pending.arguments,
            },
            RepairAction::ReportInterrupted => {
                emit(
                    st,
                    out,
                    RunEvent::ToolResult {
                        label,
                        call_id: pending.call_id,
                        tool: pending.tool,
                        success: false,
                        content: INTERRUPTED_CALL.to_string(),
                        summary: summarize(INTERRUPTED_CALL),
                        artifacts: Vec::new(),
                        permission: None,
                    },
                );
                self.advance(st, env, out)
            }
        }
    }

    /// The decision the previous process made on the last answer and did not live to record:
    /// an answer with no tool call ends the phase as done, one with a `block` call as blocked
    /// (as [`Core::step`] decides on `Answered`).
    fn decided_before_the_crash(
        &self,
        st: &mut RunState,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Option<Effect> {
        let pos = st.current.as_ref()?;
        if pos.mode != PhaseMode::Llm || pos.iteration == 0 {
            return None;
        }
        if let Some(block) = pos.batch.iter().find(|c| c.name == BLOCK_TOOL) {
            let reason = block_reason(block);
            return Some(self.iteration_end(st, Signal::Blocked(reason), env, out));
        }
        let last = st.context(pos.label())?.history.last()?;
        (pos.batch.is_empty()
            && last.role == lsm_providers::Role::Assistant
            && last.tool_calls.is_empty())
        .then(|| self.iteration_end(st, Signal::Done, env, out))
    }

    /// The end of an iteration (or the start of a phase): the layered stop decision
    /// ([`crate::stop`]) on what it signalled, and what follows from it.
    fn iteration_end(
        &self,
        st: &mut RunState,
        signal: Signal,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let Some(pos) = st.current.as_ref() else {
            return Effect::Finish(PhaseResult::empty(StopReason::Error));
        };
        let label = label_name(pos.label()).to_string();
        let facts = StopFacts {
            signal,
            iteration: pos.iteration,
            max_iterations: pos.request.max_iterations,
            budget_exhausted: exhausted(&self.config.limits, &env.budget).map(|e| e.reason),
            stop_requested: env.stop,
            stall_config: self.config.stall,
            stall: &pos.stall,
            agent_stop: if !self.hooks_match(HookPoint::AgentStop, None) {
                HookVerdict::Allow
            } else {
                match &pos.agent_stop_decided {
                    Some((at, decided)) if *at == pos.iteration => decided
                        .clone()
                        .map_or(HookVerdict::Allow, HookVerdict::Block),
                    _ => HookVerdict::Pending,
                }
            },
            agent_stop_blocks: pos.agent_stop_blocks,
            agent_stop_max_blocks: self.config.agent_stop_max_blocks,
            completion: pos.request.completes_task.then(|| Completion {
                mode: st.stop_mode,
                declared: pos.work_complete_at == Some(pos.iteration),
                contract: match (&st.contract, &st.coverage) {
                    (None, _) => ContractState::Absent,
                    (Some(_), Some(coverage)) if pos.contract_checked_at == Some(pos.iteration) => {
                        ContractState::Checked(coverage.unmet())
                    }
                    (Some(_), _) => ContractState::Pending,
                },
                unfinished_items: work_items::unfinished(&st.work_items),
                objections: pos.completion_objections,
                retries: st.completion_retries,
            }),
        };
        let blocks = pos.agent_stop_blocks;
        let objections = pos.completion_objections;
        let retries = st.completion_retries;
        let final_text = pos.final_text.clone();
        let repeats = pos.stall.repeats;
        let iteration = pos.iteration;
        match stop::decide(&facts) {
            Verdict::Continue => {}
            Verdict::Nudge => emit(
                st,
                out,
                RunEvent::StallNudge {
                    label,
                    iteration,
                    repeats,
                    message: STALL_NUDGE.to_string(),
                },
            ),
            Verdict::AskAgentStopHooks => {
                return Effect::RunHooks(HookEvent {
                    final_text: Some(final_text),
                    ..self.hook_event(HookPoint::AgentStop)
                });
            }
            Verdict::Object(Objection::AgentStop(reason)) => emit(
                st,
                out,
                RunEvent::StopBlocked {
                    label,
                    message: format!(
                        "You may not stop yet: a check of this run blocked the stop. Its \
                         reason: {reason}\nContinue the task, then answer again."
                    ),
                    reason,
                    blocks: blocks.saturating_add(1),
                },
            ),
            Verdict::CheckContract => {
                let paths = st
                    .contract
                    .as_ref()
                    .map(TaskContract::file_paths)
                    .unwrap_or_default();
                if !paths.is_empty() {
                    return Effect::CheckFiles(paths);
                }
                // Nothing to look at on disk: the evidence is all in the state.
                self.contract_checked(st, &[], out);
                return self.iteration_end(st, Signal::Done, env, out);
            }
            Verdict::Object(objection) => {
                let (check, unmet) = match objection {
                    Objection::WorkComplete => (
                        "work_complete",
                        vec!["work_complete: the task was not declared complete".to_string()],
                    ),
                    Objection::Contract(unmet) => ("contract", unmet),
                    Objection::WorkItems(unmet) => ("work_items", unmet),
                    Objection::AgentStop(_) => ("agent_stop", Vec::new()),
                };
                let retries_now = objections.saturating_add(1);
                emit(
                    st,
                    out,
                    RunEvent::CompletionObjected {
                        label,
                        check: check.to_string(),
                        message: objection_message(check, &unmet, retries_now, retries),
                        unmet,
                        retries: retries_now,
                    },
                );
            }
            Verdict::Stop(ending) => return self.end_with(st, ending, label, repeats, env, out),
        }
        let topic = st
            .current
            .as_ref()
            .and_then(|p| st.context(p.label()))
            .map(|c| c.last_user_message().to_string())
            .unwrap_or_default();
        Effect::FetchStanding { topic }
    }

    /// Record why the phase ends and end it.
    fn end_with(
        &self,
        st: &mut RunState,
        ending: Ending,
        label: String,
        repeats: u32,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        match ending {
            Ending::Done(unmet) => {
                if !unmet.is_empty() {
                    emit(st, out, RunEvent::StopAccepted { label, unmet });
                }
                finish(st, StopReason::Done, out)
            }
            Ending::DoneForced(reason, unmet) => {
                let blocks = st.current.as_ref().map_or(0, |p| p.agent_stop_blocks);
                if !unmet.is_empty() {
                    emit(
                        st,
                        out,
                        RunEvent::StopAccepted {
                            label: label.clone(),
                            unmet,
                        },
                    );
                }
                emit(
                    st,
                    out,
                    RunEvent::StopForced {
                        label,
                        reason,
                        blocks,
                    },
                );
                finish(st, StopReason::Done, out)
            }
            Ending::ContractUnmet(unmet) => {
                emit(st, out, RunEvent::ContractUnmet { label, unmet });
                finish(st, StopReason::ContractUnmet, out)
            }
            Ending::Blocked(reason) => {
                emit(st, out, RunEvent::Blocked { label, reason });
                finish(st, StopReason::Blocked, out)
            }
            Ending::Hard(HardStop::MaxIterations) => finish(st, StopReason::MaxIterations, out),
            Ending::Hard(HardStop::Budget(reason)) => {
                emit(st, out, self.exhausted_event(label, reason, None, env));
                finish(st, StopReason::BudgetExhausted, out)
            }
            Ending::Hard(HardStop::StopRequested) => {
                emit(
                    st,
                    out,
                    RunEvent::StopRequested {
                        label: Some(label),
                        at: None,
                    },
                );
                finish(st, StopReason::StopRequested, out)
            }
            Ending::Stalled => {
                emit(st, out, RunEvent::Stalled { label, repeats });
                finish(st, StopReason::Stalled, out)
            }
        }
    }

    /// What comes after the last recorded event when nothing is in flight: the next call of
    /// the batch, the next model call, or the end of the phase.
    pub fn advance(&self, st: &mut RunState, env: &Env<'_>, out: &mut Vec<RunEvent>) -> Effect {
        loop {
            let Some(pos) = st.current.as_ref() else {
                return Effect::Finish(PhaseResult::empty(StopReason::Error));
            };
            let llm = pos.mode == PhaseMode::Llm;
            let label = llm.then(|| label_name(pos.label()).to_string());
            if let Some(call) = pos.batch.front().cloned() {
                if env.stop {
                    let at = if llm { "tools" } else { "tool_only" };
                    emit(
                        st,
                        out,
                        RunEvent::StopRequested {
                            label,
                            at: Some(at.into()),
                        },
                    );
                    return finish(st, StopReason::StopRequested, out);
                }
                let tool_names = if llm {
                    pos.request.tool_names.clone()
                } else {
                    None
                };
                emit(
                    st,
                    out,
                    RunEvent::ToolCallStarted {
                        label: label.clone(),
                        call_id: call.id.clone(),
                        tool: call.name.clone(),
                        arguments: call.arguments.clone(),
                    },
                );
                let refusal = if llm && is_control_tool(&call.name) {
                    let offered = st.current.as_ref().is_some_and(|p| {
                        self.control_offered(&call.name, &p.request, st.stop_mode)
                    });
                    if offered {
                        self.control_call(st, &call, label, out);
                        continue;
                    }
                    Some(format!("Tool '{}' is not offered in this phase", call.name))
                } else {
                    self.refusal(&call.name, &call.arguments, tool_names.as_deref())
                };
                match refusal {
                    Some(reason) => emit(st, out, denied(label, call.id, call.name, reason, env)),
                    None if self.hooks_match(HookPoint::PreTool, Some(&call.name)) => {
                        return Effect::RunHooks(self.pre_tool_event(
                            &call.id,
                            &call.name,
                            &call.arguments,
                        ));
                    }
                    None => {
                        return Effect::RunTool {
                            call_id: call.id,
                            tool: call.name,
                            arguments: call.arguments,
                        };
                    }
                }
                continue;
            }
            if !llm {
                return finish(st, StopReason::Done, out);
            }
            // A `work_complete` call in this iteration signals done — unless the model was
            // already sent back after it (a resumed run deciding again).
            let declared = pos.work_complete_at == Some(pos.iteration)
                && pos.sent_back_at != Some(pos.iteration);
            let signal = if declared {
                Signal::Done
            } else {
                Signal::Continue
            };
            return self.iteration_end(st, signal, env, out);
        }
    }

    /// Why the call of `name` with `arguments` is refused before it runs: not allowlisted,
    /// not in the phase's `tool_names`, or refused by a guard. (Control tools are decided by
    /// [`Core::control_offered`] in a model phase; here, in tool-only mode, they are refused.)
    pub fn refusal(
        &self,
        name: &str,
        arguments: &Value,
        tool_names: Option<&[String]>,
    ) -> Option<String> {
        if is_control_tool(name) {
            Some(format!(
                "Tool '{name}' is a control tool of the model; it cannot be called directly"
            ))
        } else if !self.config.allowlist.contains(name) {
            Some(format!("Tool '{name}' is not allowed for this harness run"))
        } else if tool_names.is_some_and(|names| !names.iter().any(|n| n == name)) {
            Some(format!(
                "Tool '{name}' is not in the requested tool_names list"
            ))
        } else {
            self.config
                .guards
                .iter()
                .find_map(|g| g.check(name, arguments).err())
                .map(|reason| format!("Tool '{name}' was refused: {reason}"))
        }
    }

    /// Whether the control tool `name` is offered in a phase of `request` under `mode`:
    /// `block` unless switched off; `work_complete` in a phase that completes the task, under
    /// `strict_automation` or when the allowlist names it; a work-item tool when `[agents]
    /// work_items` is on or the allowlist names it.
    pub fn control_offered(&self, name: &str, request: &PhaseRequest, mode: StopMode) -> bool {
        let c = &self.config;
        match name {
            BLOCK_TOOL => c.offer_block_tool,
            WORK_COMPLETE_TOOL => {
                request.completes_task
                    && (mode == StopMode::StrictAutomation || c.allowlist.contains(name))
            }
            other => {
                WORK_ITEM_TOOLS.contains(&other) && (c.work_items || c.allowlist.contains(other))
            }
        }
    }

    /// Tool definitions offered in a phase of `request` under `mode`: allowlisted, registered,
    /// within `tool_names`; then the control tools offered ([`Core::control_offered`]),
    /// `block` last.
    pub fn offered_tools(&self, request: &PhaseRequest, mode: StopMode) -> Vec<ToolDefinition> {
        let tool_names = request.tool_names.as_deref();
        let mut tools: Vec<ToolDefinition> = self
            .config
            .tools
            .iter()
            .filter(|t| self.config.allowlist.contains(&t.name))
            .filter(|t| tool_names.is_none_or(|names| names.iter().any(|n| n == &t.name)))
            .filter(|t| !is_control_tool(&t.name))
            .cloned()
            .collect();
        let control = WORK_ITEM_TOOLS
            .iter()
            .chain(&[WORK_COMPLETE_TOOL, BLOCK_TOOL])
            .filter(|name| self.control_offered(name, request, mode))
            .filter_map(|name| control_tool_definition(name));
        tools.extend(control);
        tools
    }

    /// Answer a call of the control tool in `call` (offered: checked by the caller) and
    /// record it: `work_complete` declares the task complete; a work-item tool changes the
    /// ledger. The call's `tool_call_started` is recorded already.
    fn control_call(
        &self,
        st: &mut RunState,
        call: &lsm_providers::ToolCall,
        label: Option<String>,
        out: &mut Vec<RunEvent>,
    ) {
        let result = |success: bool, content: String| RunEvent::ToolResult {
            label: label.clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            success,
            summary: summarize(&content),
            content,
            artifacts: Vec::new(),
            permission: None,
        };
        if call.name == WORK_COMPLETE_TOOL {
            let summary = call
                .arguments
                .get("summary")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim()
                .to_string();
            let iteration = st.current.as_ref().map_or(0, |p| p.iteration);
            emit(
                st,
                out,
                RunEvent::WorkCompleteDeclared {
                    label: label.clone().unwrap_or_default(),
                    iteration,
                    summary,
                },
            );
            emit(
                st,
                out,
                result(
                    true,
                    "Noted: the task is declared complete. Its completion conditions are \
                     checked now; if one is not met, you are told which."
                        .to_string(),
                ),
            );
            return;
        }
        match work_items::apply_call(&st.work_items, &call.name, &call.arguments) {
            Ok(applied) => {
                if let Some((action, item)) = applied.change {
                    emit(
                        st,
                        out,
                        RunEvent::WorkItemChanged {
                            label: label.clone(),
                            call_id: call.id.clone(),
                            action,
                            item,
                        },
                    );
                }
                emit(st, out, result(true, applied.result));
            }
            Err(message) => emit(st, out, result(false, message)),
        }
    }

    fn exhausted_event(
        &self,
        label: String,
        reason: String,
        estimate: Option<u64>,
        env: &Env<'_>,
    ) -> RunEvent {
        RunEvent::BudgetExhausted {
            label,
            reason,
            tokens_used: env.budget.spent_tokens,
            max_tokens_budget: self.config.limits.max_tokens,
            cost_usd: env.budget.spent_cost,
            max_cost_usd: self.config.limits.max_cost_usd,
            prompt_tokens_estimate: estimate,
        }
    }

    /// The request of the current phase's next model call, from the state as it is (the
    /// standing block recorded last), without its output cap; whether it carries the
    /// standing block and the work items' reminder.
    fn assemble(&self, st: &RunState) -> (LlmRequest, bool, bool) {
        self.assemble_with(st, None)
    }

    /// As [`Core::assemble`], with the context's history replaced by `history` when given
    /// (what compaction weighs before it records a rung).
    fn assemble_with(
        &self,
        st: &RunState,
        history: Option<&[lsm_providers::Message]>,
    ) -> (LlmRequest, bool, bool) {
        let Some(pos) = st.current.as_ref() else {
            return (LlmRequest::default(), false, false);
        };
        let label = pos.label();
        let tools = self.offered_tools(&pos.request, st.stop_mode);
        let mut messages = Vec::new();
        if !self.config.system_prompt.is_empty() {
            messages.push(Message::system(self.config.system_prompt.clone()));
        }
        let has_standing = st.last_standing.is_some();
        if let Some(block) = &st.last_standing {
            messages.push(Message::system(block.clone()));
        }
        let (sent, previous_response_id) = st.context(label).map_or_else(
            || (Vec::new(), None),
            |c| {
                (
                    sent_messages(self.config.strategy, history.unwrap_or(&c.history)),
                    c.last_response_id.clone(),
                )
            },
        );
        messages.extend(sent);
        // The work items' current state, while some are open: appended to this request only
        // (never kept in the history, never in the system prompt), after the stable prefix.
        let reminder = work_items::reminder(&st.work_items);
        let has_reminder = reminder.is_some();
        if let Some(text) = reminder {
            messages.push(Message::user(text));
        }
        let request = LlmRequest {
            messages,
            tools,
            options: CallOptions {
                previous_response_id,
                prompt_cache_key: Some(format!("{}:{}", self.config.agent, label_name(label))),
                ..CallOptions::default()
            },
        };
        (request, has_standing, has_reminder)
    }

    /// The standing block is known: record it if it changed, then make the call ready.
    fn prepare_call(
        &self,
        st: &mut RunState,
        standing: Option<String>,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let Some(pos) = st.current.as_ref() else {
            return Effect::Finish(PhaseResult::empty(StopReason::Error));
        };
        if standing != st.last_standing {
            // What the model is told from memory is part of the record; written when it
            // changes, not repeated with every call.
            emit(
                st,
                out,
                RunEvent::StandingContext {
                    label: label_name(pos.label()).to_string(),
                    iteration: pos.iteration + 1,
                    text: standing,
                },
            );
        }
        self.ready_call(st, env, out)
    }

    /// Assemble the next call's request, compact its context first when it would not fit
    /// the model's window, gate it, record it.
    fn ready_call(&self, st: &mut RunState, env: &Env<'_>, out: &mut Vec<RunEvent>) -> Effect {
        let Some(pos) = st.current.as_ref() else {
            return Effect::Finish(PhaseResult::empty(StopReason::Error));
        };
        let lname = label_name(pos.label()).to_string();
        let iteration = pos.iteration + 1;
        let (mut request, has_standing, has_reminder) = self.assemble(st);
        let estimate = (env.estimate)(&request);
        if self.needs_compaction(st, iteration, estimate) {
            return self.start_compaction(st, iteration, estimate, env, out);
        }
        // The same gate as a tool's calls: output capped to what is left (the config's
        // max_output_tokens is the budget's per-call limit).
        let grant = match gate(
            &self.config.limits,
            &env.budget,
            estimate,
            env.pricing,
            None,
        ) {
            Ok(grant) => grant,
            Err(e) => {
                emit(
                    st,
                    out,
                    self.exhausted_event(lname, e.reason, Some(estimate), env),
                );
                return finish(st, StopReason::BudgetExhausted, out);
            }
        };
        // The answer must fit in the window beside the prompt.
        let room = self.config.window.window.saturating_sub(estimate).max(1);
        request.options.max_output_tokens = Some(grant.cap.min(room));
        emit(
            st,
            out,
            RunEvent::LlmRequest {
                label: lname,
                iteration,
                provider: self.config.provider.clone(),
                model: self.config.model.clone(),
                messages: request.messages.len(),
                standing_context: has_standing,
                work_items: has_reminder,
                tools: request.tools.iter().map(|t| t.name.clone()).collect(),
                max_output_tokens: request.options.max_output_tokens,
                previous_response_id: request.options.previous_response_id.clone(),
                prompt_cache_key: request.options.prompt_cache_key.clone(),
                prompt_tokens_estimate: estimate,
            },
        );
        Effect::CallModel { request, grant }
    }

    fn answered(
        &self,
        st: &mut RunState,
        response: LlmResponse,
        cost: Option<f64>,
        totals: RunUsage,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let label = current_label(st);
        let iteration = st.current.as_ref().map_or(0, |p| p.iteration);
        let block_reason = response
            .tool_calls
            .iter()
            .find(|c| c.name == BLOCK_TOOL)
            .map(block_reason);
        let no_calls = response.tool_calls.is_empty();
        emit(
            st,
            out,
            RunEvent::LlmResponse {
                label: label.clone(),
                iteration,
                text: response.text,
                tool_calls: response.tool_calls,
                usage: response.usage,
                response_id: response.response_id,
                tokens_used: totals.tokens_used,
                cost_usd: cost,
                total_cost_usd: totals.cost_usd,
            },
        );
        if let Some(reason) = block_reason {
            return self.iteration_end(st, Signal::Blocked(reason), env, out);
        }
        if no_calls {
            return self.iteration_end(st, Signal::Done, env, out);
        }
        self.advance(st, env, out)
    }

    fn tool_done(
        &self,
        st: &mut RunState,
        run: ToolRun,
        spend: Option<ToolSpend>,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let Some(pending) = st.current.as_ref().and_then(|p| p.pending.clone()) else {
            return self.advance(st, env, out);
        };
        let label = st
            .current
            .as_ref()
            .filter(|p| p.mode == PhaseMode::Llm)
            .map(|p| label_name(p.label()).to_string());
        let tool = pending.tool;
        if let Some(s) = spend {
            emit(
                st,
                out,
                RunEvent::ToolUsage {
                    label: label.clone(),
                    tool: tool.clone(),
                    llm_calls: s.llm_calls,
                    tokens: s.usage.total(),
                    usage: s.usage,
                    cost_usd: s.cost_usd,
                    tokens_used: s.totals.tokens_used,
                    total_cost_usd: s.totals.cost_usd,
                },
            );
        }
        let event = match run {
            ToolRun::Interrupted => {
                let content = format!("Tool '{tool}' was interrupted: a stop was requested");
                RunEvent::ToolResult {
                    label,
                    call_id: pending.call_id,
                    tool,
                    success: false,
                    summary: summarize(&content),
                    content,
                    artifacts: Vec::new(),
                    permission: None,
                }
            }
            ToolRun::Ran {
                outcome,
                artifacts,
                permission,
                events,
            } => {
                for e in &events {
                    emit(st, out, side_effect(label.clone(), &tool, e));
                }
                match outcome {
                    Ok(content) => RunEvent::ToolResult {
                        label,
                        call_id: pending.call_id,
                        tool,
                        success: true,
                        summary: summarize(&content),
                        content,
                        artifacts,
                        permission,
                    },
                    Err(f) if f.denial => RunEvent::ToolDenied {
                        label,
                        call_id: pending.call_id,
                        tool,
                        reason: f.message,
                        permission,
                    },
                    Err(f) => RunEvent::ToolResult {
                        label,
                        call_id: pending.call_id,
                        tool,
                        success: false,
                        summary: summarize(&f.message),
                        content: f.message,
                        artifacts,
                        permission,
                    },
                }
            }
        };
        let post = match &event {
            RunEvent::ToolResult {
                call_id,
                tool,
                success,
                content,
                ..
            } if self.hooks_match(HookPoint::PostTool, Some(tool)) => Some(HookEvent {
                tool: Some(tool.clone()),
                call_id: Some(call_id.clone()),
                arguments: Some(pending.arguments.clone()),
                result: Some(content.clone()),
                success: Some(*success),
                ..self.hook_event(HookPoint::PostTool)
            }),
            _ => None,
        };
        emit(st, out, event);
        if let Some(event) = post {
            return Effect::RunHooks(event);
        }
        self.advance(st, env, out)
    }
}

/// A refused call: the model gets `reason` as the call's error; counted as a denial.
fn denied(
    label: Option<String>,
    call_id: String,
    tool: String,
    reason: String,
    env: &Env<'_>,
) -> RunEvent {
    RunEvent::ToolDenied {
        label,
        call_id,
        tool: tool.clone(),
        reason: reason.clone(),
        permission: Some(Decision {
            tool_name: tool,
            allowed: false,
            reason,
            timestamp: env.now.clone(),
        }),
    }
}

/// What the model is told when a completion check sends it back to work.
fn objection_message(check: &str, unmet: &[String], retry: u32, retries: u32) -> String {
    let lines: String = unmet.iter().map(|u| format!("\n- {u}")).collect();
    let what = match check {
        "work_complete" => format!(
            "You answered without declaring the task complete. When the task is fully done, call \
             the `{WORK_COMPLETE_TOOL}` tool with a short summary; if it is not done, continue \
             working."
        ),
        "contract" => format!(
            "The task is not complete yet: these required conditions are not met:{lines}\n\
             Continue the task until they are met, then declare it complete again."
        ),
        _ => format!(
            "These work items are not finished:{lines}\nFinish them and mark them done with \
             work_item_update (or mark one blocked, with the reason, if it truly cannot be \
             done), then declare the task complete again."
        ),
    };
    format!("{what} (Completion check {retry} of {retries}.)")
}

/// The coverage ledger of `contract` on the run's evidence as folded into `st`, with the
/// driver's `files`.
pub fn coverage(st: &RunState, contract: &TaskContract, files: &[(String, FileFact)]) -> Coverage {
    let calls = st.all_calls();
    let final_text = st
        .current
        .as_ref()
        .map(|p| p.final_text.as_str())
        .or_else(|| {
            st.phases
                .last_key_value()
                .map(|(_, r)| r.final_text.as_str())
        })
        .unwrap_or_default();
    evaluate(
        contract,
        &Evidence {
            calls: &calls,
            final_text,
            artifacts: &st.artifacts,
            denials: st.denials,
            work_items: &st.work_items,
            files,
        },
    )
}

/// A tool's side effect as an event named after its kind.
fn side_effect(label: Option<String>, tool: &str, event: &ToolEvent) -> RunEvent {
    let data = match &event.data {
        // The record's own keys are not the tool's to set.
        Value::Object(map) => {
            let mut m = without_reserved(map);
            m.remove("label");
            m.remove("tool");
            m
        }
        Value::Null => serde_json::Map::new(),
        other => {
            let mut m = serde_json::Map::new();
            m.insert("data".into(), other.clone());
            m
        }
    };
    let fields = ToolSideEffect {
        label,
        tool: tool.to_string(),
        data,
    };
    match event.kind {
        ToolEventKind::MemoryWritten => RunEvent::MemoryWritten(fields),
        ToolEventKind::MemoryApproved => RunEvent::MemoryApproved(fields),
        ToolEventKind::MemoryRemoved => RunEvent::MemoryRemoved(fields),
        // A kind this release does not know: kept, under its own name.
        other => RunEvent::ToolEvent {
            kind: other.as_str().to_string(),
            fields,
        },
    }
}

/// The reason a `block` call gives.
fn block_reason(block: &lsm_providers::ToolCall) -> String {
    block
        .arguments
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("the model gave no reason")
        .to_string()
}

fn current_label(st: &RunState) -> String {
    st.current
        .as_ref()
        .map_or_else(String::new, |p| label_name(p.label()).to_string())
}

/// End the phase with `reason` and what it has so far.
fn finish(st: &mut RunState, reason: StopReason, out: &mut Vec<RunEvent>) -> Effect {
    end_phase(st, reason, None, out)
}

/// End the phase as `error`: its text is the message.
fn finish_error(st: &mut RunState, message: String, out: &mut Vec<RunEvent>) -> Effect {
    end_phase(st, StopReason::Error, Some(message), out)
}

fn end_phase(
    st: &mut RunState,
    stop_reason: StopReason,
    error: Option<String>,
    out: &mut Vec<RunEvent>,
) -> Effect {
    let Some(pos) = st.current.as_ref() else {
        return Effect::Finish(PhaseResult {
            final_text: error.unwrap_or_default(),
            tool_calls: Vec::new(),
            stop_reason,
        });
    };
    let result = PhaseResult {
        final_text: error.clone().unwrap_or_else(|| pos.final_text.clone()),
        tool_calls: pos.tool_calls.clone(),
        stop_reason,
    };
    emit(
        st,
        out,
        RunEvent::PhaseEnded {
            phase: pos.phase,
            label: label_name(pos.label()).to_string(),
            result: result.clone(),
            error,
        },
    );
    Effect::Finish(result)
}

mod compact;

#[cfg(test)]
mod tests;
