//! A phase's life in the core: its start, a resumed run's position, the end of each
//! iteration (the stop decision and its objections), and how a phase ends.

use super::*;
use crate::state::PendingCall;

impl Core {
    pub(super) fn start(
        &self,
        st: &mut RunState,
        request: PhaseRequest,
        fresh_id: String,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        self.ensure_started(st, out);
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

    /// Record `run_started` if the run has not started yet (its first phase, or its first
    /// wave of workers, starts it).
    pub fn ensure_started(&self, st: &mut RunState, out: &mut Vec<RunEvent>) {
        if st.started {
            return;
        }
        let c = &self.config;
        emit(
            st,
            out,
            RunEvent::RunStarted(crate::event::RunStarted {
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
            }),
        );
        if let Some(continued) = &c.continuation {
            emit(st, out, RunEvent::ConversationContinued(continued.clone()));
        }
        // The context providers' texts are journaled, so that a resumed run folds back
        // exactly what this one started with.
        if !c.run_context.instructions.is_empty() {
            emit(
                st,
                out,
                RunEvent::ProjectInstructions {
                    files: c.run_context.instructions.clone(),
                },
            );
        }
        if let Some(text) = &c.run_context.environment {
            emit(st, out, RunEvent::EnvironmentContext { text: text.clone() });
        }
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
        if pending.deferred {
            // Still no result for it: the run goes on waiting.
            return self.still_deferred(st, out);
        }
        let label = (pos.mode == PhaseMode::Llm).then(|| label_name(pos.label()).to_string());
        if !pos.parallel.is_empty() {
            let group: Vec<PendingCall> = std::iter::once(pending)
                .chain(pos.parallel.iter().cloned())
                .collect();
            return self.repair_group(st, group, label, repair, env, out);
        }
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
                emit(st, out, interrupted(label, pending));
                self.advance(st, env, out)
            }
        }
    }

    /// A concurrent group of read-only calls the previous process started and did not finish:
    /// each is repaired with `repair`, in the answer's order. Run again, they run together
    /// again (no hook watched them when they started).
    fn repair_group(
        &self,
        st: &mut RunState,
        group: Vec<PendingCall>,
        label: Option<String>,
        repair: RepairAction,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        for call in &group {
            emit(
                st,
                out,
                RunEvent::ToolCallRepaired {
                    label: label.clone(),
                    call_id: call.call_id.clone(),
                    tool: call.tool.clone(),
                    action: repair,
                },
            );
        }
        match repair {
            RepairAction::RunAgain => Effect::RunTools(
                group
                    .into_iter()
                    .map(|c| ToolInvocation {
                        call_id: c.call_id,
                        tool: c.tool,
                        arguments: c.arguments,
                    })
                    .collect(),
            ),
            RepairAction::ReportInterrupted => {
                for call in group {
                    emit(st, out, interrupted(label.clone(), call));
                }
                self.advance(st, env, out)
            }
        }
    }

    /// The decision the previous process made on the last answer and did not live to record:
    /// an answer with no tool call ends the phase as done, one with a `block` call as blocked
    /// (as [`Core::step`] decides on `Answered`).
    pub(super) fn decided_before_the_crash(
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
            && last.role == crate::message::Role::Assistant
            && last.tool_calls.is_empty())
        .then(|| self.iteration_end(st, Signal::Done, env, out))
    }

    /// The end of an iteration (or the start of a phase): the layered stop decision
    /// ([`crate::stop`]) on what it signalled, and what follows from it.
    pub(super) fn iteration_end(
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
                offered: self.control_offered(WORK_COMPLETE_TOOL, &pos.request, st.stop_mode),
                contract: match (&st.contract, &st.coverage) {
                    (None, _) => ContractState::Absent,
                    (Some(_), Some(coverage)) if pos.contract_checked_at == Some(pos.iteration) => {
                        ContractState::Checked(coverage.unmet())
                    }
                    (Some(_), _) => ContractState::Pending,
                },
                unfinished_items: work_items::unsettled(&st.work_items),
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
        if !self.config.standing_memory {
            return self.prepare_call(st, None, env, out);
        }
        let topic = st
            .current
            .as_ref()
            .and_then(|p| st.context(p.label()))
            .map(|c| c.last_user_message().to_string())
            .unwrap_or_default();
        Effect::FetchStanding { topic }
    }

    /// Record the task contract's coverage for the current stop.
    pub(super) fn contract_checked(
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

    /// Record why the phase ends and end it.
    pub(super) fn end_with(
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
}

/// The failed result of a call a dead process started and did not finish, not run again.
fn interrupted(label: Option<String>, call: PendingCall) -> RunEvent {
    RunEvent::ToolResult {
        label,
        call_id: call.call_id,
        tool: call.tool,
        success: false,
        content: INTERRUPTED_CALL.to_string(),
        summary: summarize(INTERRUPTED_CALL),
        artifacts: Vec::new(),
        permission: None,
    }
}
