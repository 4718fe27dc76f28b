//! Model calls in the core: the next effect of a phase, the request assembled from the
//! state, the budget gate, and the answer taken in.

use super::*;

impl Core {
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
                let group = self.concurrent_group(&pos.batch, tool_names.as_deref());
                if group.len() > 1 {
                    for call in &group {
                        emit(
                            st,
                            out,
                            RunEvent::ToolCallStarted {
                                label: label.clone(),
                                call_id: call.call_id.clone(),
                                tool: call.tool.clone(),
                                arguments: call.arguments.clone(),
                            },
                        );
                    }
                    return Effect::RunTools(group);
                }
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
                        return self.run_or_defer(st, call.id, call.name, call.arguments, out);
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

    pub(super) fn exhausted_event(
        &self,
        label: String,
        reason: String,
        estimate: Option<u64>,
        env: &Env<'_>,
    ) -> RunEvent {
        RunEvent::BudgetExhausted(crate::event::BudgetExhausted {
            label,
            reason,
            tokens_used: env.budget.spent_tokens,
            max_tokens_budget: self.config.limits.max_tokens,
            cost_usd: env.budget.spent_cost,
            max_cost_usd: self.config.limits.max_cost_usd,
            prompt_tokens_estimate: estimate,
        })
    }

    /// The request of the current phase's next model call, from the state as it is (the
    /// standing block recorded last), without its output cap; whether it carries the
    /// standing block and the work items' reminder.
    pub(super) fn assemble(&self, st: &RunState) -> (LlmRequest, bool, bool) {
        self.assemble_over(st, None, true)
    }

    /// As [`Core::assemble`], with the context's history replaced by `history` when given
    /// (what compaction weighs before it records a rung).
    pub(super) fn assemble_with(
        &self,
        st: &RunState,
        history: Option<&[std::sync::Arc<crate::message::Message>]>,
    ) -> (LlmRequest, bool, bool) {
        self.assemble_over(st, history, false)
    }

    /// The request, its message list built over the last request's handed back
    /// ([`Core::recycle`]) when `to_send` (a request only weighed would take it from the
    /// one sent next).
    fn assemble_over(
        &self,
        st: &RunState,
        history: Option<&[std::sync::Arc<crate::message::Message>]>,
        to_send: bool,
    ) -> (LlmRequest, bool, bool) {
        let Some(pos) = st.current.as_ref() else {
            return (LlmRequest::default(), false, false);
        };
        let label = pos.label();
        let tools = self.offered_tools(&pos.request, st.stop_mode);
        let mut spare = self.spare();
        let mut messages = ReusedList::over(if to_send {
            std::mem::take(&mut spare.messages)
        } else {
            Vec::new()
        });
        if !self.config.system_prompt.is_empty() {
            messages.push(self.system_message());
        }
        // The run context (project instructions, environment), then the standing block.
        if let Some(text) = &st.run_context {
            messages.push(shared_system(&mut spare.run_context, text));
        }
        let has_standing = st.last_standing.is_some();
        if let Some(block) = &st.last_standing {
            messages.push(shared_system(&mut spare.standing, block));
        }
        drop(spare);
        let mut previous_response_id = None;
        if let Some(c) = st.context(label) {
            for message in sent_messages(self.config.strategy, history.unwrap_or(&c.history)) {
                messages.push_shared(message);
            }
            previous_response_id.clone_from(&c.last_response_id);
        }
        // The work items' current state, while some are open: appended to this request only
        // (never kept in the history, never in the system prompt), after the stable prefix.
        let reminder = work_items::reminder(&st.work_items);
        let has_reminder = reminder.is_some();
        if let Some(text) = reminder {
            messages.push(Message::user(text).into());
        }
        let messages = messages.finish();
        let request = LlmRequest {
            messages,
            tools,
            options: CallOptions {
                previous_response_id,
                prompt_cache_key: Some(self.cache_key(label_name(label))),
                ..CallOptions::default()
            },
        };
        (request, has_standing, has_reminder)
    }

    /// The standing block is known: record it if it changed, then make the call ready.
    pub(super) fn prepare_call(
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
    pub(super) fn ready_call(
        &self,
        st: &mut RunState,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let Some(pos) = st.current.as_ref() else {
            return Effect::Finish(PhaseResult::empty(StopReason::Error));
        };
        let lname = label_name(pos.label()).to_string();
        let iteration = pos.iteration + 1;
        let (mut request, has_standing, has_reminder) = self.assemble(st);
        let estimate = (env.estimate)(&request);
        if self.needs_compaction(st, iteration, estimate) {
            self.recycle(request);
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
                self.recycle(request);
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
                tools: self.tool_names(&request.tools),
                max_output_tokens: request.options.max_output_tokens,
                previous_response_id: request.options.previous_response_id.clone(),
                prompt_cache_key: request.options.prompt_cache_key.clone(),
                prompt_tokens_estimate: estimate,
            },
        );
        Effect::CallModel { request, grant }
    }

    pub(super) fn answered(
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

    /// The calls at the front of `batch` that may run together: read-only calls the
    /// sandbox runs without asking ([`CoreConfig::concurrent_tools`]), not refused, that no
    /// hook watches, up to `max_parallel_tools`. Fewer than two: the front call runs alone.
    /// A call of another kind is a barrier: the group ends before it.
    fn concurrent_group(
        &self,
        batch: &std::collections::VecDeque<crate::message::ToolCall>,
        tool_names: Option<&[String]>,
    ) -> Vec<ToolInvocation> {
        let c = &self.config;
        // A call alone is not a group (and its checks are made once, by the caller).
        if c.max_parallel_tools < 2 || batch.len() < 2 {
            return Vec::new();
        }
        let mut group: Vec<ToolInvocation> = Vec::new();
        for call in batch.iter().take(c.max_parallel_tools) {
            let eligible = c.concurrent_tools.contains(&call.name)
                && !is_control_tool(&call.name)
                && !group.iter().any(|g| g.call_id == call.id)
                && !self.hooks_match(HookPoint::PreTool, Some(&call.name))
                && !self.hooks_match(HookPoint::PostTool, Some(&call.name))
                && self
                    .refusal(&call.name, &call.arguments, tool_names)
                    .is_none();
            if !eligible {
                break;
            }
            group.push(ToolInvocation {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
        group
    }
}

/// A system message with `text`: the one `kept` while its text is the same (a provider
/// remembers what it wrote for a message by its identity), else a new one, kept.
fn shared_system(kept: &mut Option<Arc<Message>>, text: &str) -> Arc<Message> {
    match kept {
        Some(message) if message.content == text => Arc::clone(message),
        _ => {
            let new: Arc<Message> = Message::system(text.to_string()).into();
            *kept = Some(Arc::clone(&new));
            new
        }
    }
}
