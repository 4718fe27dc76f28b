//! Hooks in the core: what it asks the driver to run, and how it decides on their answers.

use super::*;

/// A hook the core only asks whether it matches (the driver runs hooks, not the core).
pub(super) struct At(pub(super) crate::hooks::HookPoint);

#[async_trait::async_trait]
impl crate::hooks::Hook for At {
    fn name(&self) -> String {
        format!("at-{}", self.0.as_str())
    }
    fn matches(&self, point: crate::hooks::HookPoint, tool: Option<&str>) -> bool {
        point == self.0 && tool.is_none_or(|t| t == "tool_a")
    }
    async fn call(&self, _event: &crate::hooks::HookEvent) -> crate::hooks::HookAnswer {
        crate::hooks::HookAnswer::Allow
    }
}

fn hooked(point: crate::hooks::HookPoint) -> Core {
    let mut c = core(100_000);
    c.config_mut().hooks.push(Arc::new(At(point)));
    c
}

fn run(outcome: &str, message: Option<&str>, fail_open: bool) -> crate::hooks::HookRun {
    crate::hooks::HookRun {
        name: "h".into(),
        outcome: outcome.into(),
        message: message.map(String::from),
        fail_open,
    }
}

fn answered(event: crate::hooks::HookEvent, runs: Vec<crate::hooks::HookRun>) -> Input {
    Input::HooksAnswered { event, runs }
}

#[test]
fn a_pre_tool_hook_is_asked_before_a_matching_call_and_its_deny_is_the_model_s_error() {
    use crate::hooks::HookPoint;
    let c = hooked(HookPoint::PreTool);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    let s = c.step(
        &mut st,
        answer(
            "",
            &[("tool_b", json!({})), ("tool_a", json!({"text": "w"}))],
        ),
        &env(15, false),
    );
    assert!(
        matches!(s.effect, Effect::RunTool { ref tool, .. } if tool == "tool_b"),
        "tool_b is not hooked"
    );
    let s = c.step(&mut st, ok("b"), &env(15, false));
    let Effect::RunHooks(event) = s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(
        (event.hook, event.tool.as_deref()),
        (HookPoint::PreTool, Some("tool_a"))
    );
    assert_eq!(event.arguments, Some(json!({"text": "w"})));
    let s = c.step(
        &mut st,
        answered(event, vec![run("deny", Some("only docs/"), false)]),
        &env(15, false),
    );
    assert_eq!(names(&s)[..2], ["hook_decision", "tool_denied"]);
    let r = &st.current.as_ref().unwrap().tool_calls[1];
    assert_eq!(
        r.outcome,
        ToolOutcome::Error("Tool 'tool_a' was refused by a pre_tool hook: only docs/".into())
    );
    assert_eq!(st.approvals.denials, 1);
    assert!(matches!(s.effect, Effect::FetchStanding { .. }));
}

#[test]
fn a_failing_pre_tool_hook_fails_closed_unless_configured_open() {
    use crate::hooks::HookPoint;
    let c = hooked(HookPoint::PreTool);
    for (fail_open, runs_tool) in [(false, false), (true, true)] {
        let mut st = RunState::default();
        to_first_call(&c, &mut st, PhaseRequest::new("x"));
        let s = c.step(
            &mut st,
            answer("", &[("tool_a", json!({}))]),
            &env(15, false),
        );
        let Effect::RunHooks(event) = s.effect else {
            panic!()
        };
        let s = c.step(
            &mut st,
            answered(event, vec![run("failed", Some("timed out"), fail_open)]),
            &env(15, false),
        );
        assert_eq!(
            matches!(s.effect, Effect::RunTool { .. }),
            runs_tool,
            "fail_open={fail_open}"
        );
        let RunEvent::HookDecision(crate::event::HookDecision {
            decision, reason, ..
        }) = &s.events[0]
        else {
            panic!()
        };
        if fail_open {
            assert_eq!(decision, "allow");
            assert!(
                st.current
                    .as_ref()
                    .unwrap()
                    .pending
                    .as_ref()
                    .unwrap()
                    .hooks_cleared
            );
        } else {
            assert_eq!(decision, "deny");
            assert!(reason.as_deref().unwrap().contains("timed out"));
        }
    }
}

#[test]
fn a_resumed_call_not_yet_cleared_by_the_pre_tool_hooks_is_put_to_them_again() {
    use crate::hooks::HookPoint;
    let c = hooked(HookPoint::PreTool);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    c.step(
        &mut st,
        answer("", &[("tool_a", json!({}))]),
        &env(15, false),
    );
    let mut out = Vec::new();
    let e = c.resume(
        &mut st.clone(),
        RepairAction::RunAgain,
        &env(15, false),
        &mut out,
    );
    assert!(matches!(e, Effect::RunHooks(_)), "{e:?}");
    st.current
        .as_mut()
        .unwrap()
        .pending
        .as_mut()
        .unwrap()
        .hooks_cleared = true;
    let e = c.resume(
        &mut st,
        RepairAction::RunAgain,
        &env(15, false),
        &mut Vec::new(),
    );
    assert!(matches!(e, Effect::RunTool { .. }), "{e:?}");
}

#[test]
fn a_post_tool_note_is_added_to_the_result_the_model_sees() {
    use crate::hooks::HookPoint;
    let c = hooked(HookPoint::PostTool);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    c.step(
        &mut st,
        answer("", &[("tool_a", json!({"path": "a.txt"}))]),
        &env(15, false),
    );
    let call_id = st
        .current
        .as_ref()
        .unwrap()
        .pending
        .as_ref()
        .unwrap()
        .call_id
        .clone();
    let s = c.step(&mut st, ok("out"), &env(15, false));
    let Effect::RunHooks(event) = s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(
        (event.result.as_deref(), event.success),
        (Some("out"), Some(true))
    );
    // The hook is told which call it was: the tool, the call's id and its arguments.
    assert_eq!(event.tool.as_deref(), Some("tool_a"));
    assert_eq!(event.call_id.as_deref(), Some(call_id.as_str()));
    assert_eq!(event.arguments, Some(json!({"path": "a.txt"})));
    let s = c.step(
        &mut st,
        answered(event, vec![run("note", Some("lint: 2 warnings"), false)]),
        &env(15, false),
    );
    assert_eq!(names(&s)[0], "hook_decision");
    let last = st
        .context(&None)
        .unwrap()
        .history
        .last()
        .unwrap()
        .content
        .clone();
    assert!(
        last.starts_with("out") && last.contains("lint: 2 warnings"),
        "{last}"
    );
}

#[test]
fn an_agent_stop_hook_blocks_at_most_max_blocks_times_then_the_stop_is_forced() {
    use crate::hooks::HookPoint;
    let c = hooked(HookPoint::AgentStop);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    for k in 1..=3u32 {
        let s = c.step(&mut st, answer(&format!("done {k}"), &[]), &env(15, false));
        let Effect::RunHooks(event) = s.effect else {
            panic!("{s:?}")
        };
        assert_eq!(
            event.final_text.as_deref(),
            Some(format!("done {k}").as_str())
        );
        let s = c.step(
            &mut st,
            answered(event, vec![run("deny", Some("run the tests"), false)]),
            &env(15, false),
        );
        if k <= 2 {
            assert_eq!(names(&s), ["hook_decision", "stop_blocked"]);
            assert!(matches!(s.effect, Effect::FetchStanding { .. }));
            let last = &st.context(&None).unwrap().history.last().unwrap().content;
            assert!(last.contains("run the tests"), "{last}");
            c.step(&mut st, Input::Standing(None), &env(15, false));
        } else {
            assert_eq!(names(&s), ["hook_decision", "stop_forced", "phase_ended"]);
            let Effect::Finish(r) = s.effect else {
                panic!()
            };
            assert_eq!(
                (r.stop_reason, r.final_text.as_str()),
                (StopReason::Done, "done 3")
            );
        }
    }
}

#[test]
fn an_agent_stop_decision_recorded_before_a_crash_is_not_asked_again() {
    use crate::hooks::HookPoint;
    let c = hooked(HookPoint::AgentStop);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    let s = c.step(&mut st, answer("done", &[]), &env(15, false));
    let Effect::RunHooks(event) = s.effect else {
        panic!()
    };
    // The hooks allowed the stop; the process died before phase_ended.
    let decision = c.observed(&event, vec![run("allow", None, false)]);
    let decision = match decision {
        RunEvent::HookDecision(crate::event::HookDecision { hook, runs, .. }) => {
            RunEvent::HookDecision(crate::event::HookDecision {
                hook,
                label: Some("__default__".into()),
                call_id: None,
                tool: None,
                decision: "allow".into(),
                reason: None,
                notes: Vec::new(),
                runs,
            })
        }
        other => other,
    };
    st.apply(&decision);
    let e = c.resume(
        &mut st,
        RepairAction::RunAgain,
        &env(15, false),
        &mut Vec::new(),
    );
    let Effect::Finish(r) = e else {
        panic!("{e:?}")
    };
    assert_eq!(r.stop_reason, StopReason::Done);
}

#[test]
fn repeated_identical_answers_sent_back_by_a_hook_are_a_stall() {
    use crate::hooks::HookPoint;
    let mut c = hooked(HookPoint::AgentStop);
    c.config_mut().agent_stop_max_blocks = 10;
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    let mut nudged = false;
    for _ in 0..4 {
        let mut s = c.step(&mut st, answer("I am done.", &[]), &env(15, false));
        if let Effect::RunHooks(event) = s.effect {
            s = c.step(
                &mut st,
                answered(event, vec![run("deny", Some("not yet"), false)]),
                &env(15, false),
            );
        }
        nudged |= names(&s).contains(&"stall_nudge");
        if let Effect::Finish(r) = s.effect {
            assert!(nudged, "the nudge came first");
            assert_eq!(r.stop_reason, StopReason::Stalled);
            return;
        }
        c.step(&mut st, Input::Standing(None), &env(15, false));
    }
    panic!("the same answer four times is a stall");
}
