//! Deferred tools in the core: the run pauses on a call of one, keeps waiting when resumed
//! without its result, and goes on with a supplied result as the call's.

use super::*;

fn deferring_core() -> Core {
    Core::new(CoreConfig {
        deferred_tools: ["tool_b".to_string()].into_iter().collect(),
        ..core_config(1_000_000)
    })
}

#[test]
fn a_deferred_call_pauses_the_phase_and_a_supplied_result_is_its_answer() {
    let c = deferring_core();
    let mut st = RunState::default();
    let mut journal = start(&c, &mut st, PhaseRequest::new("x"), &env(0, false)).events;
    journal.extend(
        c.step(&mut st, Input::Standing(None), &env(0, false))
            .events,
    );
    let s = c.step(
        &mut st,
        answer(
            "deploying",
            &[("tool_b", json!({"version": "1.2"})), ("tool_a", json!({}))],
        ),
        &env(15, false),
    );
    assert_eq!(
        &names(&s)[names(&s).len() - 2..],
        ["tool_call_started", "tool_deferred"]
    );
    let Effect::Finish(result) = &s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(result.stop_reason, StopReason::Deferred);
    journal.extend(s.events);
    let waiting = Core::waiting_for(&st).unwrap();
    assert_eq!(
        (waiting.call_id.as_str(), &waiting.arguments),
        ("c0", &json!({"version": "1.2"}))
    );

    // Resumed (the fold of the journal) without a result: it waits again.
    let mut folded = RunState::default();
    for event in &journal {
        folded.apply(event);
    }
    assert_eq!(folded, st);
    let mut out = Vec::new();
    let e = c.resume(
        &mut folded.clone(),
        RepairAction::RunAgain,
        &env(15, false),
        &mut out,
    );
    assert!(
        matches!(&e, Effect::Finish(r) if r.stop_reason == StopReason::Deferred),
        "{e:?}"
    );
    // A result for another call is not taken.
    let s = c.step(
        &mut folded.clone(),
        Input::Supplied {
            call_id: "c9".into(),
            content: "x".into(),
        },
        &env(15, false),
    );
    assert!(matches!(&s.effect, Effect::Finish(r) if r.stop_reason == StopReason::Deferred));

    // Its result supplied: recorded as the call's, and the next call of the answer runs.
    let s = c.step(
        &mut folded,
        Input::Supplied {
            call_id: "c0".into(),
            content: "deployed 1.2".into(),
        },
        &env(15, false),
    );
    assert!(
        matches!(&s.effect, Effect::RunTool { call_id, .. } if call_id == "c1"),
        "{s:?}"
    );
    let history = &folded.context(&None).unwrap().history;
    assert!(
        history
            .iter()
            .any(|m| m.tool_call_id.as_deref() == Some("c0") && m.content == "deployed 1.2")
    );
    assert!(Core::waiting_for(&folded).is_none());
}
