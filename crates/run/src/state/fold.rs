//! The fold: [`RunState::apply`], one journal event applied to the state.

use super::*;

impl RunState {
    /// Fold one event into the state. Events that change nothing (retries, interaction
    /// events, …) are accepted and ignored.
    pub fn apply(&mut self, event: &RunEvent) {
        match event {
            RunEvent::RunStarted(crate::event::RunStarted {
                context_window_strategy,
                call_identity,
                stop_mode,
                completion_retries,
                contract,
                ..
            }) => {
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
                                .push(Message::user(request.user_message.clone()).into());
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
                    parallel: Vec::new(),
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
            RunEvent::ConversationContinued(c) => {
                self.contexts = serde_json::from_value(c.contexts.clone()).unwrap_or_default();
                self.earlier_usage = c.usage;
                self.continues = Some(c.from_run_id.clone());
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
            RunEvent::ProjectInstructions { files } => {
                self.instructions.clone_from(files);
                self.compose_run_context();
            }
            RunEvent::EnvironmentContext { text } => {
                self.environment = Some(text.clone());
                self.compose_run_context();
            }
            RunEvent::GuidanceAdded(crate::event::GuidanceAdded {
                call_id,
                path,
                text,
                ..
            }) => self.guidance_added(call_id, path, text),
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
                        .push(Message::assistant(text.clone(), tool_calls.clone()).into());
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
                // The name is copied once per tool, not once per call.
                match self.tools_used.get_mut(tool) {
                    Some(n) => *n += 1,
                    None => {
                        self.tools_used.insert(tool.clone(), 1);
                    }
                }
                self.tool_sequence.push(tool.clone());
                if let Some(pos) = self.current.as_mut() {
                    if let Some(i) = pos.batch.iter().position(|c| &c.id == call_id) {
                        pos.batch.remove(i);
                    }
                    let call = PendingCall {
                        call_id: call_id.clone(),
                        tool: tool.clone(),
                        arguments: arguments.clone(),
                        hooks_cleared: false,
                        deferred: false,
                    };
                    // A call started while another is unfinished runs beside it.
                    if pos.pending.is_some() {
                        pos.parallel.push(call);
                    } else {
                        pos.pending = Some(call);
                    }
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
                if *success {
                    // The unfinished calls are lent out while the call's evidence is noted (its
                    // arguments not copied), then put back for `finish_call`.
                    let (pending, parallel) = self.current.as_mut().map_or_else(
                        || (None, Vec::new()),
                        |p| (p.pending.take(), std::mem::take(&mut p.parallel)),
                    );
                    let arguments = pending
                        .iter()
                        .chain(&parallel)
                        .find(|p| &p.call_id == call_id)
                        .map(|p| &p.arguments);
                    self.note_evidence(
                        call_id,
                        arguments.unwrap_or(&serde_json::Value::Null),
                        content,
                    );
                    if let Some(pos) = self.current.as_mut() {
                        pos.pending = pending;
                        pos.parallel = parallel;
                    }
                }
                self.finish_call(call_id, tool, outcome);
            }
            RunEvent::ToolUsage(crate::event::ToolUsage {
                llm_calls,
                usage,
                cost_usd,
                ..
            }) => self.usage.add(usage, *llm_calls, *cost_usd),
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
                    ctx.history.push(Message::user(message.clone()).into());
                }
            }
            RunEvent::HookDecision(crate::event::HookDecision {
                hook,
                call_id,
                decision,
                reason,
                notes,
                ..
            }) => self.hook_decided(*hook, call_id.as_deref(), decision, reason, notes),
            RunEvent::StopBlocked {
                blocks, message, ..
            } => {
                if let Some(pos) = self.current.as_mut() {
                    pos.agent_stop_blocks = *blocks;
                    pos.sent_back_at = Some(pos.iteration);
                }
                if let Some(ctx) = self.current_context_mut() {
                    ctx.history.push(Message::user(message.clone()).into());
                }
            }
            RunEvent::WorkItemChanged { item, .. } => upsert(&mut self.work_items, item),
            RunEvent::WorkReported {
                iteration, report, ..
            } => {
                self.report = Some(report.clone());
                if let Some(pos) = self.current.as_mut() {
                    pos.work_complete_at = Some(*iteration);
                    if pos.final_text.trim().is_empty() {
                        pos.final_text.clone_from(&report.summary);
                    }
                }
            }
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
                    ctx.history.push(Message::user(message.clone()).into());
                }
            }
            RunEvent::StopAccepted { unmet, .. } => self.unmet_accepted.clone_from(unmet),
            RunEvent::WorkersRequested { wave, requests, .. } => {
                self.waves
                    .entry(*wave)
                    .or_default()
                    .requests
                    .clone_from(requests);
            }
            RunEvent::WorkerStarted {
                wave,
                item_id,
                worker_run_id,
                run_dir,
                ..
            } => {
                self.waves.entry(*wave).or_default().started.insert(
                    item_id.clone(),
                    StartedWorker {
                        worker_run_id: worker_run_id.clone(),
                        run_dir: run_dir.clone(),
                    },
                );
            }
            RunEvent::WorkerCompleted {
                wave,
                item_id,
                outcome,
                usage,
                ..
            }
            | RunEvent::WorkerFailed {
                wave,
                item_id,
                outcome,
                usage,
                ..
            } => {
                self.waves
                    .entry(*wave)
                    .or_default()
                    .outcomes
                    .insert(item_id.clone(), outcome.clone());
                self.worker_usage.absorb(usage);
            }
            RunEvent::WorkersFinished { wave, outcomes } => {
                self.waves.entry(*wave).or_default().finished = Some(outcomes.clone());
            }
            // The phase pauses where it is, as if its process had died (`run_resumed`
            // forgets a model call in flight).
            RunEvent::WallTimeExceeded(_) => {}
            RunEvent::ToolDeferred(d) => {
                if let Some(p) = self.current.as_mut().and_then(|p| p.pending.as_mut())
                    && p.call_id == d.call_id
                {
                    p.deferred = true;
                }
            }
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
            | RunEvent::BudgetExhausted(crate::event::BudgetExhausted { .. })
            | RunEvent::Stalled { .. }
            | RunEvent::StopForced { .. }
            | RunEvent::ContractUnmet { .. }
            | RunEvent::WorkerProgress { .. }
            | RunEvent::WorkerFinding { .. }
            | RunEvent::WorkerLearning { .. }
            | RunEvent::ToolEvent { .. }
            | RunEvent::InteractionRequest(_)
            | RunEvent::InteractionAcknowledged(_)
            | RunEvent::InteractionTimeout(_)
            | RunEvent::InteractionResponse(_) => {}
        }
    }
}
