//! Read-only calls of one answer run together: grouped in the answer's order, a writing call
//! a barrier, recorded start by start and result by result, repaired together on resume.

use super::*;

/// A core where `tool_a` is read-only (may run beside others) and `tool_b` is not.
fn reading_core(max_parallel: usize) -> Core {
    Core::new(CoreConfig {
        concurrent_tools: ["tool_a".to_string()].into_iter().collect(),
        max_parallel_tools: max_parallel,
        ..core_config(1_000_000)
    })
}

fn ids(group: &[ToolInvocation]) -> Vec<&str> {
    group.iter().map(|c| c.call_id.as_str()).collect()
}

fn done(call_ids: &[&str]) -> Input {
    Input::ToolsDone(
        call_ids
            .iter()
            .map(|id| ToolDone {
                call_id: (*id).to_string(),
                run: ToolRun::Ran {
                    outcome: Ok(format!("out of {id}")),
                    artifacts: Vec::new(),
                    permission: None,
                    events: Vec::new(),
                },
                spend: None,
                guidance: Vec::new(),
            })
            .collect(),
    )
}

/// The recorded events of `events` that name a call, as `(event, call id)`.
fn call_events(events: &[RunEvent]) -> Vec<(&'static str, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ToolCallStarted { call_id, .. }
            | RunEvent::ToolResult { call_id, .. }
            | RunEvent::ToolCallRepaired { call_id, .. } => Some((e.name(), call_id.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn reads_run_together_and_a_writing_call_is_a_barrier_that_runs_alone() {
    let c = reading_core(4);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    let calls = [
        ("tool_a", json!({"n": 0})),
        ("tool_a", json!({"n": 1})),
        ("tool_b", json!({})),
        ("tool_a", json!({"n": 3})),
        ("tool_a", json!({"n": 4})),
    ];
    let mut journal = Vec::new();
    let s = c.step(&mut st, answer("", &calls), &env(15, false));
    journal.extend(s.events.clone());
    let Effect::RunTools(group) = s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(ids(&group), ["c0", "c1"]);
    assert_eq!(group[1].arguments, json!({"n": 1}));
    let pos = st.current.as_ref().unwrap();
    assert_eq!(pos.pending.as_ref().unwrap().call_id, "c0");
    assert_eq!(pos.parallel.len(), 1);
    // Both results, in the answer's order; then the writing call, alone.
    let s = c.step(&mut st, done(&["c0", "c1"]), &env(15, false));
    journal.extend(s.events.clone());
    assert!(
        matches!(&s.effect, Effect::RunTool { call_id, .. } if call_id == "c2"),
        "{s:?}"
    );
    let s = c.step(&mut st, ok("written"), &env(15, false));
    journal.extend(s.events.clone());
    let Effect::RunTools(group) = s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(ids(&group), ["c3", "c4"]);
    let s = c.step(&mut st, done(&["c3", "c4"]), &env(15, false));
    journal.extend(s.events.clone());
    assert!(matches!(s.effect, Effect::FetchStanding { .. }), "{s:?}");
    let order: Vec<String> = call_events(&journal)
        .into_iter()
        .map(|(e, id)| format!("{e} {id}"))
        .collect();
    assert_eq!(
        order,
        [
            "tool_call_started c0",
            "tool_call_started c1",
            "tool_result c0",
            "tool_result c1",
            "tool_call_started c2",
            "tool_result c2",
            "tool_call_started c3",
            "tool_call_started c4",
            "tool_result c3",
            "tool_result c4",
        ]
    );
    // The model sees each result after its call, in the answer's order, with its arguments
    // kept in the phase's record.
    let history = &st.context(&None).unwrap().history;
    let results: Vec<(&str, &str)> = history
        .iter()
        .filter_map(|m| Some((m.tool_call_id.as_deref()?, m.content.as_str())))
        .collect();
    assert_eq!(
        results,
        [
            ("c0", "out of c0"),
            ("c1", "out of c1"),
            ("c2", "written"),
            ("c3", "out of c3"),
            ("c4", "out of c4"),
        ]
    );
    let pos = st.current.as_ref().unwrap();
    let arguments: Vec<&Value> = pos.tool_calls.iter().map(|r| &r.arguments).collect();
    assert_eq!(arguments[1], &json!({"n": 1}));
    assert_eq!(arguments[4], &json!({"n": 4}));
    assert!(pos.pending.is_none() && pos.parallel.is_empty());
}

#[test]
fn a_group_is_at_most_max_parallel_tools_and_one_runs_every_call_alone() {
    let reads: Vec<(&str, Value)> = (0..5).map(|n| ("tool_a", json!({"n": n}))).collect();
    let c = reading_core(2);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    let s = c.step(&mut st, answer("", &reads), &env(15, false));
    let Effect::RunTools(group) = s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(ids(&group), ["c0", "c1"]);
    let s = c.step(&mut st, done(&["c0", "c1"]), &env(15, false));
    let Effect::RunTools(group) = s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(ids(&group), ["c2", "c3"]);
    let s = c.step(&mut st, done(&["c2", "c3"]), &env(15, false));
    assert!(
        matches!(&s.effect, Effect::RunTool { call_id, .. } if call_id == "c4"),
        "the last read has no partner: {s:?}"
    );

    let c = reading_core(1);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    let s = c.step(&mut st, answer("", &reads), &env(15, false));
    assert!(matches!(s.effect, Effect::RunTool { .. }), "{s:?}");
}

#[test]
fn a_refused_call_or_a_watched_tool_ends_a_group() {
    let c = reading_core(4);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    // The guard refuses the second call: the first runs alone, the refusal is recorded,
    // the last two run together.
    let s = c.step(
        &mut st,
        answer(
            "",
            &[
                ("tool_a", json!({})),
                ("tool_a", json!({"text": "secret"})),
                ("tool_a", json!({"n": 2})),
                ("tool_a", json!({"n": 3})),
            ],
        ),
        &env(15, false),
    );
    assert!(matches!(s.effect, Effect::RunTool { .. }), "{s:?}");
    let s = c.step(&mut st, ok("x"), &env(15, false));
    assert!(has(&s.events, "tool_denied"), "{s:?}");
    let Effect::RunTools(group) = s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(ids(&group), ["c2", "c3"]);

    // A hook that watches the tool sees each call alone.
    let mut hooked = reading_core(4);
    hooked.config_mut().hooks.push(Arc::new(super::hooks::At(
        crate::hooks::HookPoint::PostTool,
    )));
    let mut st = RunState::default();
    to_first_call(&hooked, &mut st, PhaseRequest::new("x"));
    let s = hooked.step(
        &mut st,
        answer("", &[("tool_a", json!({})), ("tool_a", json!({}))]),
        &env(15, false),
    );
    assert!(matches!(s.effect, Effect::RunTool { .. }), "{s:?}");
}

#[test]
fn a_group_cut_short_by_a_crash_is_repaired_call_by_call_and_the_fold_agrees() {
    let c = reading_core(4);
    let mut st = RunState::default();
    let mut journal: Vec<RunEvent> =
        start(&c, &mut st, PhaseRequest::new("x"), &env(0, false)).events;
    journal.extend(
        c.step(&mut st, Input::Standing(None), &env(0, false))
            .events,
    );
    let reads: Vec<(&str, Value)> = (0..3).map(|n| ("tool_a", json!({"n": n}))).collect();
    let s = c.step(&mut st, answer("", &reads), &env(15, false));
    journal.extend(s.events);
    assert!(matches!(s.effect, Effect::RunTools(_)));
    // The process dies here: the state is the fold of what it recorded.
    let mut folded = RunState::default();
    for event in &journal {
        folded.apply(event);
    }
    assert_eq!(folded, st, "the fold of the journal is the live state");

    // Run again: every call is repaired, and they run together again.
    let mut again = folded.clone();
    let mut out = Vec::new();
    let e = c.resume(
        &mut again,
        RepairAction::RunAgain,
        &env(15, false),
        &mut out,
    );
    let Effect::RunTools(group) = e else {
        panic!("{e:?}")
    };
    assert_eq!(ids(&group), ["c0", "c1", "c2"]);
    assert_eq!(
        call_events(&out),
        [
            ("tool_call_repaired", "c0".to_string()),
            ("tool_call_repaired", "c1".to_string()),
            ("tool_call_repaired", "c2".to_string()),
        ]
    );
    let s = c.step(&mut again, done(&["c0", "c1", "c2"]), &env(15, false));
    assert!(matches!(s.effect, Effect::FetchStanding { .. }), "{s:?}");
    assert_eq!(again.current.as_ref().unwrap().tool_calls.len(), 3);

    // Or each is answered as interrupted, and the loop goes on to the next model call.
    let mut reported = folded;
    let mut out = Vec::new();
    let e = c.resume(
        &mut reported,
        RepairAction::ReportInterrupted,
        &env(15, false),
        &mut out,
    );
    assert!(matches!(e, Effect::FetchStanding { .. }), "{e:?}");
    let results: Vec<_> = call_events(&out)
        .into_iter()
        .filter(|(e, _)| *e == "tool_result")
        .map(|(_, id)| id)
        .collect();
    assert_eq!(results, ["c0", "c1", "c2"]);
    let pos = reported.current.as_ref().unwrap();
    assert!(pos.pending.is_none() && pos.parallel.is_empty());
}
