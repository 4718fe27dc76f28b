//! The wall-clock limit in the core: the phase returns `wall_time_exceeded` and stays where
//! it is (no `phase_ended`), so that a resumed run goes on from there.

use super::*;

#[test]
fn out_of_time_pauses_the_phase_without_ending_it_and_a_resume_goes_on() {
    let c = core(1_000_000);
    let mut st = RunState::default();
    let mut journal = start(&c, &mut st, PhaseRequest::new("x"), &env(0, false)).events;
    journal.extend(
        c.step(&mut st, Input::Standing(None), &env(0, false))
            .events,
    );
    let s = c.step(
        &mut st,
        answer("looking", &[("tool_a", json!({}))]),
        &env(15, false),
    );
    journal.extend(s.events);
    assert!(matches!(s.effect, Effect::RunTool { .. }));
    let s = c.step(
        &mut st,
        Input::OutOfTime {
            at: "tools".into(),
            elapsed_seconds: 30.5,
            max_wall_seconds: 30,
        },
        &env(15, false),
    );
    assert_eq!(names(&s), ["wall_time_exceeded"]);
    let Effect::Finish(result) = &s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(result.stop_reason, StopReason::WallTimeExceeded);
    assert_eq!(result.final_text, "looking");
    journal.extend(s.events);
    // The phase is still current, its call unfinished; the fold of the journal agrees.
    let pos = st.current.as_ref().unwrap();
    assert_eq!(pos.pending.as_ref().unwrap().call_id, "c0");
    let mut folded = RunState::default();
    for event in &journal {
        folded.apply(event);
    }
    assert_eq!(folded, st);
    assert!(folded.finished.is_none() && folded.last_stop.is_none());
    let e = c.resume(
        &mut folded,
        RepairAction::RunAgain,
        &env(15, false),
        &mut Vec::new(),
    );
    assert!(
        matches!(&e, Effect::RunTool { call_id, .. } if call_id == "c0"),
        "{e:?}"
    );
}
