//! The core's side of hooks: which hooks a point concerns, what they are told, and what
//! their answers decide (a refused call, a note for the model, a stop verdict).

use super::*;

impl Core {
    /// Whether a hook wants to hear of `point` (for `tool`).
    pub fn hooks_match(&self, point: HookPoint, tool: Option<&str>) -> bool {
        self.config.hooks.iter().any(|h| h.matches(point, tool))
    }

    /// What hooks are told at `point` (the driver fills in the run id).
    pub(super) fn hook_event(&self, point: HookPoint) -> HookEvent {
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
    pub(super) fn pre_tool_event(&self, call_id: &str, tool: &str, arguments: &Value) -> HookEvent {
        HookEvent {
            tool: Some(tool.to_string()),
            call_id: Some(call_id.to_string()),
            arguments: Some(arguments.clone()),
            ..self.hook_event(HookPoint::PreTool)
        }
    }

    /// The record of hooks that observe (`run_start`, `run_end`): what the driver journals.
    pub fn observed(&self, event: &HookEvent, runs: Vec<HookRun>) -> RunEvent {
        RunEvent::HookDecision(crate::event::HookDecision {
            hook: event.hook,
            label: None,
            call_id: None,
            tool: None,
            decision: "allow".into(),
            reason: None,
            notes: Vec::new(),
            runs,
        })
    }

    /// The hooks answered: record the decision, then act on it.
    pub(super) fn hooks_answered(
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
            RunEvent::HookDecision(crate::event::HookDecision {
                hook: point,
                label: label.clone(),
                call_id: event.call_id.clone(),
                tool: event.tool.clone(),
                decision: decision.to_string(),
                reason: refusal.clone(),
                notes,
                runs,
            }),
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
                    None => {
                        self.run_or_defer(st, pending.call_id, pending.tool, pending.arguments, out)
                    }
                }
            }
            HookPoint::AgentStop => self.iteration_end(st, Signal::Done, env, out),
            HookPoint::PostTool | HookPoint::RunStart | HookPoint::RunEnd => {
                self.advance(st, env, out)
            }
        }
    }
}
