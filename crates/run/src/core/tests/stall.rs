//! Stall detection in the core: identical iterations nudged once, then stalled; what counts
//! as the same iteration and what as progress.

use super::*;

#[test]
fn identical_iterations_are_nudged_once_at_the_threshold_then_end_stalled() {
    let c = core(100_000);
    let (mut st, mut journal) = started(&c);
    let call = [("tool_a", json!({"path": "a.md", "text": "same"}))];
    for _ in 0..2 {
        let (events, effect) = iteration(&c, &mut st, &call, "wrote a.md");
        assert!(!has(&events, "stall_nudge"));
        assert!(matches!(effect, Effect::FetchStanding { .. }));
        journal.extend(events);
    }
    let (events, effect) = iteration(&c, &mut st, &call, "wrote a.md");
    assert!(has(&events, "stall_nudge"), "{events:?}");
    assert!(
        matches!(effect, Effect::FetchStanding { .. }),
        "the nudge continues"
    );
    let history = &st.context(&None).unwrap().history;
    assert_eq!(history.last().unwrap().content, crate::stall::STALL_NUDGE);
    journal.extend(events);
    let (events, effect) = iteration(&c, &mut st, &call, "wrote a.md");
    assert_eq!(
        events
            .iter()
            .rev()
            .take(2)
            .map(RunEvent::name)
            .collect::<Vec<_>>(),
        ["phase_ended", "stalled"]
    );
    let Effect::Finish(r) = effect else { panic!() };
    assert_eq!(r.stop_reason, StopReason::Stalled);
    assert_eq!(
        r.tool_calls.len(),
        4,
        "the phase result is unchanged in form"
    );
    journal.extend(events);
    // The streak is state: folding the journal gives it back.
    let folded = RunState::fold(
        &journal
            .into_iter()
            .enumerate()
            .map(|(i, event)| crate::event::EventEnvelope {
                seq: i as u64 + 1,
                ts: String::new(),
                run_id: "r".into(),
                schema_version: crate::event::SCHEMA_VERSION,
                event,
            })
            .collect::<Vec<_>>(),
    );
    assert_eq!(folded, st);
}

#[test]
fn the_streak_survives_a_fold_mid_phase() {
    let c = core(100_000);
    let (mut st, mut journal) = started(&c);
    let call = [("tool_a", json!({"text": "same"}))];
    for _ in 0..2 {
        journal.extend(iteration(&c, &mut st, &call, "r").0);
    }
    let envelopes: Vec<_> = journal
        .into_iter()
        .map(|event| crate::event::EventEnvelope {
            seq: 1,
            ts: String::new(),
            run_id: "r".into(),
            schema_version: crate::event::SCHEMA_VERSION,
            event,
        })
        .collect();
    let mut resumed = RunState::fold(&envelopes);
    assert_eq!(resumed.current.as_ref().unwrap().stall.repeats, 2);
    let (events, _) = iteration(&c, &mut resumed, &call, "r");
    assert!(
        has(&events, "stall_nudge"),
        "the third identical iteration after a resume"
    );
}

#[test]
fn calls_differing_only_in_key_order_or_batch_order_are_the_same() {
    let c = core(100_000);
    let (mut st, _) = started(&c);
    let a: Value = serde_json::from_str(r#"{"text": "t", "path": "p"}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{"path": "p", "text": "t"}"#).unwrap();
    iteration(
        &c,
        &mut st,
        &[("tool_a", a.clone()), ("tool_b", json!({}))],
        "r",
    );
    iteration(
        &c,
        &mut st,
        &[("tool_b", json!({})), ("tool_a", b.clone())],
        "r",
    );
    let (events, _) = iteration(&c, &mut st, &[("tool_a", b), ("tool_b", json!({}))], "r");
    assert!(has(&events, "stall_nudge"), "{events:?}");
}

#[test]
fn retries_with_different_arguments_or_results_are_not_a_stall() {
    let c = core(100_000);
    let (mut st, _) = started(&c);
    for k in 0..6 {
        let (events, effect) = iteration(
            &c,
            &mut st,
            &[(
                "tool_a",
                json!({"path": "a.md", "text": format!("draft {k}")}),
            )],
            "wrote a.md",
        );
        assert!(!has(&events, "stall_nudge"));
        assert!(matches!(effect, Effect::FetchStanding { .. }));
    }
    for k in 0..6 {
        let (events, _) = iteration(
            &c,
            &mut st,
            &[("tool_a", json!({"text": "poll"}))],
            &format!("status {k}"),
        );
        assert!(
            !has(&events, "stall_nudge"),
            "a changing result is progress"
        );
    }
}

#[test]
fn repeated_invalid_calls_count_as_a_stall() {
    let c = core(100_000);
    let (mut st, _) = started(&c);
    let refused = [("tool_c", json!({"x": 1}))];
    for _ in 0..3 {
        iteration(&c, &mut st, &refused, "unused");
    }
    let (events, effect) = iteration(&c, &mut st, &refused, "unused");
    assert!(has(&events, "stalled"), "{events:?}");
    let Effect::Finish(r) = effect else { panic!() };
    assert_eq!(r.stop_reason, StopReason::Stalled);
    assert!(r.tool_calls.iter().all(|t| t.outcome.is_error()));
}

#[test]
fn a_disabled_stall_detection_lets_the_loop_run_to_max_iterations() {
    let mut c = core(100_000);
    c.config_mut().stall = crate::stall::StallConfig::disabled();
    let mut st = RunState::default();
    start(
        &c,
        &mut st,
        PhaseRequest::new("x").with_max_iterations(5),
        &env(0, false),
    );
    let call = [("tool_a", json!({"text": "same"}))];
    let mut last = None;
    for _ in 0..5 {
        let (events, effect) = iteration(&c, &mut st, &call, "r");
        assert!(!has(&events, "stall_nudge"));
        last = Some(effect);
    }
    let Some(Effect::Finish(r)) = last else {
        panic!()
    };
    assert_eq!(r.stop_reason, StopReason::MaxIterations);
}
