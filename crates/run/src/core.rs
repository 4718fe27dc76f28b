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
use crate::contexts::{ReusedList, label_name, sent_messages};
use crate::contract::{Coverage, Evidence, FileFact, TaskContract, evaluate};
use crate::control::{BLOCK_TOOL, COMPLETE_TOOL, WORK_COMPLETE_TOOL, is_control_tool};
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
    /// Every registered tool's definition (the sandbox's registry), shared with the
    /// requests that offer it.
    pub tools: Vec<std::sync::Arc<ToolDefinition>>,
    /// Offer the `block` control tool.
    pub offer_block_tool: bool,
    /// Offer the `complete` control tool.
    pub offer_complete_tool: bool,
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
    /// Whether a memory source gives the calls standing context. Without one the next call
    /// is prepared in the same step (no [`Effect::FetchStanding`], whose answer could only
    /// be "nothing").
    pub standing_memory: bool,
    /// The standing texts of the run's context providers, recorded when the run starts
    /// (empty: none; a resumed run has the recorded ones and ignores these).
    pub run_context: crate::context::RunContext,
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
        /// Nested instruction files that apply to the paths the call touched (the core
        /// gives the model those the run has not been given yet).
        guidance: Vec<crate::context::InstructionFile>,
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
    /// The system prompt as the message every request starts with: one shared message for
    /// the whole run (a provider remembers its wire form).
    system_message: std::sync::Arc<lsm_providers::Message>,
    /// The registered tools the allowlist names, control tools left out, in the registry's
    /// order: what every request offers before `tool_names` narrows it (the allowlist and the
    /// registry never change while the run runs; looking each tool up for every call was a
    /// hash per tool per call).
    allowed_tools: Vec<std::sync::Arc<ToolDefinition>>,
    /// The control tools the allowlist names (offered in the stop modes and settings that
    /// allow it).
    allowlisted_controls: Vec<&'static str>,
    /// What the last request was made of, for the next one to reuse (see [`Spare`]). Not
    /// part of the run's state: a cache, which a new core starts without.
    spare: std::sync::Mutex<Spare>,
}

/// What the next request can be built on.
#[derive(Debug, Default)]
struct Spare {
    /// The message list of the last request sent, handed back by the driver
    /// ([`Core::recycle`]); the next request's list is built over it ([`ReusedList`]).
    messages: Vec<Arc<Message>>,
    /// The standing block as the message requests carry: one shared message while its text
    /// is unchanged. A provider remembers what it wrote for a message by the message's
    /// identity; a new one at every call made it write every message after it again.
    standing: Option<Arc<Message>>,
    /// The run context's message (project instructions, environment): one shared message
    /// while its text is unchanged, as the standing block's.
    run_context: Option<Arc<Message>>,
    /// The names of the tools the last request offered, as its `llm_request` event
    /// carries them: the next request offering the same tools shares the list.
    tool_names: Option<Arc<[String]>>,
    /// The last request's prompt-cache key (`<agent>:<label>`).
    cache_key: Option<String>,
}

/// Apply `event` to `state` and keep it for the journal.
fn emit(state: &mut RunState, out: &mut Vec<RunEvent>, event: RunEvent) {
    state.apply(&event);
    out.push(event);
}

impl Core {
    /// A core for one run.
    pub fn new(config: CoreConfig) -> Self {
        let system_message = lsm_providers::Message::system(config.system_prompt.clone()).into();
        let allowed_tools = config
            .tools
            .iter()
            .filter(|t| config.allowlist.contains(&t.name) && !is_control_tool(&t.name))
            .cloned()
            .collect();
        let allowlisted_controls = WORK_ITEM_TOOLS
            .iter()
            .chain(&[WORK_COMPLETE_TOOL])
            .copied()
            .filter(|name| config.allowlist.contains(*name))
            .collect();
        Core {
            config,
            system_message,
            allowed_tools,
            allowlisted_controls,
            spare: std::sync::Mutex::default(),
        }
    }

    /// Hand a request back once it was sent (or given up): the next request's message list
    /// is built on its list, so the messages the two share are not counted up and down again.
    /// Optional — a request not handed back only costs the next one a list from nothing.
    pub fn recycle(&self, request: LlmRequest) {
        self.spare().messages = request.messages;
    }

    fn spare(&self) -> std::sync::MutexGuard<'_, Spare> {
        // Nothing in it can be left half-changed by a panic: a plain list and a message.
        self.spare
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The names of `tools`, as a request's `llm_request` event carries them: the list
    /// the last request's event carried when it names the same tools.
    pub(crate) fn tool_names(
        &self,
        tools: &[std::sync::Arc<lsm_providers::ToolDefinition>],
    ) -> Arc<[String]> {
        let mut spare = self.spare();
        match &spare.tool_names {
            Some(names)
                if names.len() == tools.len()
                    && names.iter().zip(tools).all(|(name, t)| *name == t.name) =>
            {
                Arc::clone(names)
            }
            _ => {
                let names: Arc<[String]> = tools.iter().map(|t| t.name.clone()).collect();
                spare.tool_names = Some(Arc::clone(&names));
                names
            }
        }
    }

    /// The prompt-cache key of a request of the context `label` names: `<agent>:<label>`,
    /// made again only when it is not the last request's.
    pub(crate) fn cache_key(&self, label: &str) -> String {
        let agent = self.config.agent.as_str();
        let mut spare = self.spare();
        let current = |key: &str| {
            key.strip_prefix(agent)
                .and_then(|rest| rest.strip_prefix(':'))
                .is_some_and(|rest| rest == label)
        };
        match &spare.cache_key {
            Some(key) if current(key) => key.clone(),
            _ => {
                let key = format!("{agent}:{label}");
                spare.cache_key = Some(key.clone());
                key
            }
        }
    }

    /// The system prompt's message: the shared one, unless the prompt was changed since.
    pub(crate) fn system_message(&self) -> std::sync::Arc<lsm_providers::Message> {
        if self.system_message.content == self.config.system_prompt {
            std::sync::Arc::clone(&self.system_message)
        } else {
            lsm_providers::Message::system(self.config.system_prompt.clone()).into()
        }
    }

    /// The run's fixed settings.
    pub fn config(&self) -> &CoreConfig {
        &self.config
    }

    /// Change the recorded topic before the run starts (`run` sets it to the task).
    pub fn set_topic(&mut self, topic: &str) {
        self.config.topic = topic.to_string();
    }

    /// The settings, while the driver is being built. Not the tools or the allowlist:
    /// [`Core::new`] derives the offered tools from them.
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
            Input::ToolDone {
                run,
                spend,
                guidance,
            } => self.tool_done(st, run, spend, guidance, env, out),
            Input::RecordFailed(message) => finish_error(st, message, out),
            Input::HooksAnswered { event, runs } => self.hooks_answered(st, event, runs, env, out),
            Input::FilesChecked(files) => {
                self.contract_checked(st, &files, out);
                self.iteration_end(st, Signal::Done, env, out)
            }
        }
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
    let Some(pos) = st.current.as_mut() else {
        return Effect::Finish(PhaseResult {
            final_text: error.unwrap_or_default(),
            tool_calls: Vec::new(),
            stop_reason,
        });
    };
    // The phase's calls move into its result rather than being copied: the `phase_ended`
    // folded below drops the position they were in, so the state is the same as the
    // journal's fold gives (a proptest in tests/harness.rs checks that after every phase).
    // The copy cost about 1 K instructions per call of the phase (docs/PERFORMANCE.md).
    let result = PhaseResult {
        final_text: error.clone().unwrap_or_else(|| pos.final_text.clone()),
        tool_calls: std::mem::take(&mut pos.tool_calls),
        stop_reason,
    };
    let (phase, label) = (pos.phase, label_name(pos.label()).to_string());
    emit(
        st,
        out,
        RunEvent::PhaseEnded {
            phase,
            label,
            result: result.clone(),
            error,
        },
    );
    Effect::Finish(result)
}

mod compact;
mod hook_answers;
mod model_calls;
mod phases;
mod tool_calls;

#[cfg(test)]
mod tests;
