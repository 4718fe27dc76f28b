//! Deferred tools in the core: a call of a tool handled outside `lsm` is recorded as
//! started and deferred, and the phase pauses (not ended) until its result is supplied.

use super::*;

impl Core {
    /// Run the started call `call_id` of `tool`, or pause on it when its tool is deferred.
    pub(super) fn run_or_defer(
        &self,
        st: &mut RunState,
        call_id: String,
        tool: String,
        arguments: Value,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        if !self.config.deferred_tools.contains(&tool) {
            return Effect::RunTool {
                call_id,
                tool,
                arguments,
            };
        }
        let label = model_label(st);
        emit(
            st,
            out,
            RunEvent::ToolDeferred(crate::event::ToolDeferred {
                label,
                call_id,
                tool,
                arguments,
            }),
        );
        paused(st, StopReason::Deferred)
    }

    /// The deferred call the run waits for, if any: `(call id, tool, arguments)`.
    pub fn waiting_for(st: &RunState) -> Option<&crate::state::PendingCall> {
        st.current
            .as_ref()
            .and_then(|p| p.pending.as_ref())
            .filter(|p| p.deferred)
    }

    /// A resumed run still waiting for its deferred call's result: it pauses again.
    pub(super) fn still_deferred(&self, st: &mut RunState, out: &mut Vec<RunEvent>) -> Effect {
        match Core::waiting_for(st).cloned() {
            Some(p) => self.run_or_defer(st, p.call_id, p.tool, p.arguments, out),
            None => paused(st, StopReason::Deferred),
        }
    }

    /// The result of the deferred call `call_id`, supplied from outside: recorded as the
    /// call's result, then the loop goes on. A result for another call than the one the run
    /// waits for is not taken: the run goes on waiting.
    pub(super) fn supplied(
        &self,
        st: &mut RunState,
        call_id: &str,
        content: String,
        env: &Env<'_>,
        out: &mut Vec<RunEvent>,
    ) -> Effect {
        if Core::waiting_for(st).is_none_or(|p| p.call_id != call_id) {
            return self.still_deferred(st, out);
        }
        let run = ToolRun::Ran {
            outcome: Ok(content),
            artifacts: Vec::new(),
            permission: None,
            events: Vec::new(),
        };
        self.tool_done(st, run, None, Vec::new(), env, out)
    }
}
