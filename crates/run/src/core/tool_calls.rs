//! Tool calls in the core: the refusals decided before the sandbox, the offered and
//! control tools, and a finished call taken in.

use super::*;

impl Core {
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
            COMPLETE_TOOL => c.offer_complete_tool,
            WORK_COMPLETE_TOOL => {
                request.completes_task
                    && (mode == StopMode::StrictAutomation
                        || self.allowlisted_controls.contains(&name))
            }
            other => {
                WORK_ITEM_TOOLS.contains(&other)
                    && (c.work_items || self.allowlisted_controls.contains(&other))
            }
        }
    }

    /// Tool definitions offered in a phase of `request` under `mode`: allowlisted, registered,
    /// within `tool_names`; then the control tools offered ([`Core::control_offered`]),
    /// `block` last.
    pub fn offered_tools(
        &self,
        request: &PhaseRequest,
        mode: StopMode,
    ) -> Vec<std::sync::Arc<ToolDefinition>> {
        let tool_names = request.tool_names.as_deref();
        let mut tools: Vec<std::sync::Arc<ToolDefinition>> = self
            .allowed_tools
            .iter()
            .filter(|t| tool_names.is_none_or(|names| names.iter().any(|n| n == &t.name)))
            .cloned()
            .collect();
        let control = WORK_ITEM_TOOLS
            .iter()
            .chain(&[WORK_COMPLETE_TOOL, COMPLETE_TOOL, BLOCK_TOOL])
            .filter(|name| self.control_offered(name, request, mode))
            .filter_map(|name| crate::control::shared_control_tool_definition(name));
        tools.extend(control);
        tools
    }

    /// Answer a call of the control tool in `call` (offered: checked by the caller) and
    /// record it: `work_complete` declares the task complete; a work-item tool changes the
    /// ledger. The call's `tool_call_started` is recorded already.
    pub(super) fn control_call(
        &self,
        st: &mut RunState,
        call: &crate::message::ToolCall,
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
        if call.name == COMPLETE_TOOL {
            let iteration = st.current.as_ref().map_or(0, |p| p.iteration);
            let report = crate::report::from_arguments(&call.arguments, &st.evidence);
            let dropped = report.dropped_evidence.len();
            emit(
                st,
                out,
                RunEvent::WorkReported {
                    label: label.clone().unwrap_or_default(),
                    iteration,
                    report,
                },
            );
            let note = if dropped > 0 {
                format!(
                    " {dropped} evidence reference(s) pointed at nothing this run has and were \
                     dropped."
                )
            } else {
                String::new()
            };
            emit(st, out, result(true, format!("Report recorded.{note}")));
            return;
        }
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
            Err(refusal) => emit(st, out, result(false, refusal.to_string())),
        }
    }

    pub(super) fn tool_done(
        &self,
        st: &mut RunState,
        run: ToolRun,
        spend: Option<ToolSpend>,
        guidance: Vec<crate::context::InstructionFile>,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        let call_id = st
            .current
            .as_ref()
            .and_then(|p| p.pending.as_ref())
            .map(|p| p.call_id.clone());
        if let Some(call_id) = call_id
            && let Some(post) = self.record_outcome(st, &call_id, run, spend, guidance, out)
        {
            return Effect::RunHooks(post);
        }
        self.advance(st, env, out)
    }

    /// The calls of a concurrent group ended: their outcomes are recorded in the answer's
    /// order, then the loop goes on.
    pub(super) fn tools_done(
        &self,
        st: &mut RunState,
        done: Vec<ToolDone>,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        for d in done {
            // No `post_tool` hook matches a call that ran in a group (`Core::group`
            // leaves such calls to run alone), so there is no hook to run here.
            let _no_hook = self.record_outcome(st, &d.call_id, d.run, d.spend, d.guidance, out);
        }
        self.advance(st, env, out)
    }

    /// Record how the unfinished call `call_id` ended; the `post_tool` hooks' event when
    /// one matches it.
    fn record_outcome(
        &self,
        st: &mut RunState,
        call_id: &str,
        run: ToolRun,
        spend: Option<ToolSpend>,
        guidance: Vec<crate::context::InstructionFile>,
        out: &mut Vec<RunEvent>,
    ) -> Option<HookEvent> {
        let pending = st
            .current
            .as_ref()?
            .pending
            .iter()
            .chain(&st.current.as_ref()?.parallel)
            .find(|p| p.call_id == call_id)?;
        // The id and the tool name go into the events; the arguments only into a post-tool
        // hook's event, so they are copied only when such a hook matches.
        let call_id = pending.call_id.clone();
        let tool = pending.tool.clone();
        let post_arguments = self
            .hooks_match(HookPoint::PostTool, Some(&tool))
            .then(|| pending.arguments.clone());
        let label = model_label(st);
        let model_phase = label.is_some();
        if let Some(s) = spend {
            emit(
                st,
                out,
                RunEvent::ToolUsage(crate::event::ToolUsage {
                    label: label.clone(),
                    tool: tool.clone(),
                    llm_calls: s.llm_calls,
                    tokens: s.usage.total(),
                    usage: s.usage,
                    cost_usd: s.cost_usd,
                    tokens_used: s.totals.tokens_used,
                    total_cost_usd: s.totals.cost_usd,
                }),
            );
        }
        let event = match run {
            ToolRun::Interrupted => {
                let content = format!("Tool '{tool}' was interrupted: a stop was requested");
                RunEvent::ToolResult {
                    label,
                    call_id,
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
                        call_id,
                        tool,
                        success: true,
                        summary: summarize(&content),
                        content,
                        artifacts,
                        permission,
                    },
                    Err(f) if f.denial => RunEvent::ToolDenied {
                        label,
                        call_id,
                        tool,
                        reason: f.message,
                        permission,
                    },
                    Err(f) => RunEvent::ToolResult {
                        label,
                        call_id,
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
        let post = match (&event, post_arguments) {
            (
                RunEvent::ToolResult {
                    call_id,
                    tool,
                    success,
                    content,
                    ..
                },
                Some(arguments),
            ) => Some(HookEvent {
                tool: Some(tool.clone()),
                call_id: Some(call_id.clone()),
                arguments: Some(arguments),
                result: Some(content.clone()),
                success: Some(*success),
                ..self.hook_event(HookPoint::PostTool)
            }),
            _ => None,
        };
        let guided = match &event {
            RunEvent::ToolResult { call_id, tool, .. } if model_phase && !guidance.is_empty() => {
                Some((call_id.clone(), tool.clone()))
            }
            _ => None,
        };
        emit(st, out, event);
        if let Some((call_id, tool)) = guided {
            self.add_guidance(st, &call_id, &tool, guidance, out);
        }
        post
    }
}

impl Core {
    /// The names of the registered tools the allowlist names (control tools left out), in
    /// the registry's order.
    pub fn allowed_tool_names(&self) -> Vec<String> {
        self.allowed_tools.iter().map(|t| t.name.clone()).collect()
    }

    /// Record the nested instruction files of `guidance` the run has not been given yet,
    /// each after the result of the call `call_id` (of `tool`) in a model phase.
    fn add_guidance(
        &self,
        st: &mut RunState,
        call_id: &str,
        tool: &str,
        guidance: Vec<crate::context::InstructionFile>,
        out: &mut Vec<RunEvent>,
    ) {
        for file in guidance {
            let path = file.path.display().to_string();
            if st.guidance.contains(&path) {
                continue;
            }
            emit(
                st,
                out,
                RunEvent::GuidanceAdded(crate::event::GuidanceAdded {
                    label: current_label(st),
                    call_id: call_id.to_string(),
                    tool: tool.to_string(),
                    path,
                    bytes: file.bytes,
                    sha256: file.sha256,
                    truncated: file.truncated,
                    text: file.text,
                }),
            );
        }
    }
}
