//! The pure core of the loop: given the [`RunState`] and one [`Input`], the events to record
//! and the next [`Effect`]. No I/O, no clock, no randomness: the driver
//! (lsm-harness's `AgentHarness`) supplies what it learned (a standing block, a model answer, a
//! tool's outcome, a stop, the time, a fresh conversation id) and carries the effect out.
//!
//! Every event the core emits is applied to the state at once ([`RunState::apply`], the
//! fold); the driver appends the same events to the journal before it performs the effect,
//! so after each step the state is the fold of the journal.

use std::sync::Arc;

use lsm_phase::{PhaseRequest, PhaseResult, StopReason};
use serde_json::Value;

use crate::budget::{exhausted, gate};
use crate::config::StopMode;
use crate::contexts::{ReusedList, label_name, sent_messages};
use crate::contract::{Coverage, Evidence, FileFact, TaskContract, evaluate};
use crate::control::{BLOCK_TOOL, COMPLETE_TOOL, WORK_COMPLETE_TOOL, is_control_tool};
use crate::event::{
    Decision, PhaseMode, RepairAction, RunEvent, ToolSideEffect, summarize, without_reserved,
};
use crate::hooks::{HookEvent, HookPoint, HookRun};
use crate::message::{
    CallOptions, LlmRequest, LlmResponse, Message, ProviderEvent, ToolDefinition,
};
use crate::stall::STALL_NUDGE;
use crate::state::{INTERRUPTED_CALL, RunState};
use crate::stop::{
    self, Completion, ContractState, Ending, HardStop, HookVerdict, Objection, Signal, StopFacts,
    Verdict,
};
use crate::usage::RunUsage;
use crate::work_items::{self, WORK_ITEM_TOOLS};

mod exchange;

pub use exchange::{
    CoreConfig, Effect, Env, Input, Step, ToolDone, ToolEffect, ToolFailure, ToolInvocation,
    ToolRun, ToolSpend,
};

/// The loop's decisions. See the module documentation.
#[derive(Debug)]
pub struct Core {
    config: CoreConfig,
    /// The system prompt as the message every request starts with: one shared message for
    /// the whole run (a provider remembers its wire form).
    system_message: std::sync::Arc<crate::message::Message>,
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
        let system_message = crate::message::Message::system(config.system_prompt.clone()).into();
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
        tools: &[std::sync::Arc<crate::message::ToolDefinition>],
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
    pub(crate) fn system_message(&self) -> std::sync::Arc<crate::message::Message> {
        if self.system_message.content == self.config.system_prompt {
            std::sync::Arc::clone(&self.system_message)
        } else {
            crate::message::Message::system(self.config.system_prompt.clone()).into()
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
    pub fn config_mut(&mut self) -> &mut CoreConfig {
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
            Input::OutOfTime {
                at,
                elapsed_seconds,
                max_wall_seconds,
            } => out_of_time(st, at, elapsed_seconds, max_wall_seconds, out),
            Input::Supplied { call_id, content } => self.supplied(st, &call_id, content, env, out),
            Input::ToolDone {
                run,
                spend,
                guidance,
            } => self.tool_done(st, run, spend, guidance, env, out),
            Input::ToolsDone(done) => self.tools_done(st, done, env, out),
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
fn side_effect(label: Option<String>, tool: &str, event: &ToolEffect) -> RunEvent {
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
    match event.kind.as_str() {
        "memory_written" => RunEvent::MemoryWritten(fields),
        "memory_approved" => RunEvent::MemoryApproved(fields),
        "memory_removed" => RunEvent::MemoryRemoved(fields),
        // A kind this release does not know: kept, under its own name.
        other => RunEvent::ToolEvent {
            kind: other.to_string(),
            fields,
        },
    }
}

/// The reason a `block` call gives.
fn block_reason(block: &crate::message::ToolCall) -> String {
    block
        .arguments
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("the model gave no reason")
        .to_string()
}

/// The current phase's label in a model phase; `None` in tool-only mode.
fn model_label(st: &RunState) -> Option<String> {
    st.current
        .as_ref()
        .filter(|p| p.mode == PhaseMode::Llm)
        .map(|p| label_name(p.label()).to_string())
}

fn current_label(st: &RunState) -> String {
    st.current
        .as_ref()
        .map_or_else(String::new, |p| label_name(p.label()).to_string())
}

/// The wall-clock limit passed: recorded, and the phase returns `wall_time_exceeded` with
/// what it has so far, but is not ended — its position stays in the state (and the journal
/// holds no `phase_ended`), so that a resumed run goes on from there.
fn out_of_time(
    st: &mut RunState,
    at: String,
    elapsed_seconds: f64,
    max_wall_seconds: u64,
    out: &mut Vec<RunEvent>,
) -> Effect {
    let label = model_label(st);
    emit(
        st,
        out,
        RunEvent::WallTimeExceeded(crate::event::WallTimeExceeded {
            label,
            at,
            elapsed_seconds,
            max_wall_seconds,
        }),
    );
    paused(st, StopReason::WallTimeExceeded)
}

/// The phase's result so far, returned with `reason` while the phase stays where it is (a
/// run that pauses: [`StopReason::pauses_run`]).
fn paused(st: &RunState, reason: StopReason) -> Effect {
    Effect::Finish(PhaseResult {
        final_text: st
            .current
            .as_ref()
            .map(|p| p.final_text.clone())
            .unwrap_or_default(),
        tool_calls: st
            .current
            .as_ref()
            .map(|p| p.tool_calls.clone())
            .unwrap_or_default(),
        stop_reason: reason,
    })
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
mod deferred;
mod hook_answers;
mod model_calls;
mod phases;
mod tool_calls;

#[cfg(test)]
mod tests;
