//! The state's own updates, each used by the fold: a context by label, a decision, evidence,
//! an artifact, a finished call, a hook's decision, the rest of a batch skipped.

use super::*;

impl RunState {
    pub(super) fn context_mut(&mut self, label: &Option<String>) -> Option<&mut ContextState> {
        self.contexts
            .iter_mut()
            .find(|c| &c.label == label)
            .map(|c| &mut c.context)
    }

    /// The current phase's context (LLM mode), if any.
    pub(super) fn current_context_mut(&mut self) -> Option<&mut ContextState> {
        let label = self.current.as_ref()?.label().clone();
        self.context_mut(&label)
    }

    pub(super) fn note_decision(&mut self, d: &Decision) {
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

    pub(super) fn note_evidence(
        &mut self,
        call_id: &str,
        arguments: &serde_json::Value,
        content: &str,
    ) {
        let keys = std::iter::once(call_id.to_string())
            .chain(crate::report::evidence_keys(arguments, content));
        for key in keys {
            if self.evidence.len() >= crate::report::MAX_EVIDENCE_KEYS {
                return;
            }
            self.evidence.insert(key);
        }
    }

    pub(super) fn add_artifact(&mut self, path: &str) {
        if !self.artifacts.iter().any(|a| a == path) {
            self.artifacts.push(path.to_string());
        }
    }

    /// The pending call ends with `outcome`: the phase's record and, in LLM mode, the tool
    /// message the model sees.
    pub(super) fn finish_call(&mut self, call_id: &str, tool: &str, outcome: ToolOutcome) {
        let Some(pos) = self.current.as_mut() else {
            return;
        };
        let arguments = match pos.pending.take() {
            Some(p) if p.call_id == call_id => {
                // The next of a concurrent group, if any, is the first unfinished one now.
                if !pos.parallel.is_empty() {
                    pos.pending = Some(pos.parallel.remove(0));
                }
                p.arguments
            }
            other => {
                pos.pending = other;
                match pos.parallel.iter().position(|p| p.call_id == call_id) {
                    Some(i) => pos.parallel.remove(i).arguments,
                    None => serde_json::Value::Null,
                }
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
            ctx.history
                .push(Message::tool_result(call_id, for_model).into());
        }
    }

    /// A `hook_decision`: a `pre_tool` allow clears the pending call; an `agent_stop`
    /// decision is remembered for the iteration; `post_tool` notes are added to the result
    /// the model sees.
    pub(super) fn hook_decided(
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
                    let msg = std::sync::Arc::make_mut(msg);
                    for note in notes {
                        msg.content
                            .push_str(&format!("\n\n[note from a post_tool hook] {note}"));
                    }
                }
            }
            _ => {}
        }
    }

    /// The system message of the run's context providers, made again from what is recorded.
    pub(super) fn compose_run_context(&mut self) {
        self.run_context =
            crate::context::standing_text(&self.instructions, self.environment.as_deref());
    }

    /// A nested instruction file given just in time: remembered (never given twice in a
    /// run), and appended to the result of the call `call_id` that the model sees.
    pub(super) fn guidance_added(&mut self, call_id: &str, path: &str, text: &str) {
        self.guidance.insert(path.to_string());
        if let Some(msg) = self.current_context_mut().and_then(|c| {
            c.history
                .iter_mut()
                .rev()
                .find(|m| m.tool_call_id.as_deref() == Some(call_id))
        }) {
            std::sync::Arc::make_mut(msg)
                .content
                .push_str(&crate::context::guidance::note(path, text));
        }
    }

    /// Answer every call left in the batch with `text` (they will not run).
    pub(super) fn skip_batch(&mut self, text: &str) {
        let Some(pos) = self.current.as_mut() else {
            return;
        };
        let skipped: Vec<ToolCall> = pos.batch.drain(..).collect();
        let llm = pos.mode == PhaseMode::Llm;
        if llm && let Some(ctx) = self.current_context_mut() {
            for call in skipped {
                ctx.history.push(Message::tool_result(call.id, text).into());
            }
        }
    }
}
