//! The control plane in the pure core: work items, `work_complete`, the task contract and
//! the stop modes.

use super::*;
use crate::contract::{FileFact, Predicate, TaskContract};

/// A core whose runs use `mode`, `contract` and (when `items`) the work-item tools.
fn control_core(mode: StopMode, contract: Option<TaskContract>, items: bool) -> Core {
    let mut c = core(100_000);
    let cfg = c.config_mut();
    cfg.stop_mode = mode;
    cfg.contract = contract;
    cfg.work_items = items;
    c
}

fn task() -> PhaseRequest {
    PhaseRequest::new("write summary.md")
        .with_max_iterations(20)
        .completing_task()
}

fn contract_file_exists(path: &str) -> TaskContract {
    TaskContract {
        require: vec![Predicate::FileExists { path: path.into() }],
        ..TaskContract::default()
    }
}

/// Every event of `steps` in order, for folding.
fn record(journal: &mut Vec<RunEvent>, s: &Step) {
    journal.extend(s.events.iter().cloned());
}

fn assert_fold(st: &RunState, journal: &[RunEvent]) {
    let mut folded = RunState::default();
    for e in journal {
        folded.apply(e);
    }
    assert_eq!(&folded, st, "the state is the fold of what was recorded");
}

fn tool_names(effect: &Effect) -> Vec<String> {
    match effect {
        Effect::CallModel { request, .. } => request.tools.iter().map(|t| t.name.clone()).collect(),
        other => panic!("not a model call: {other:?}"),
    }
}

#[test]
fn work_items_are_kept_by_the_core_and_reminded_while_open() {
    let c = control_core(StopMode::Interactive, None, true);
    let mut st = RunState::default();
    let mut journal = Vec::new();
    let s = start(&c, &mut st, task(), &env(0, false));
    record(&mut journal, &s);
    let s = c.step(&mut st, Input::Standing(None), &env(0, false));
    record(&mut journal, &s);
    let offered = tool_names(&s.effect);
    assert!(
        offered.contains(&"work_item_add".to_string()),
        "{offered:?}"
    );
    assert!(
        !offered.contains(&"work_complete".to_string()),
        "not in interactive mode unless allowlisted"
    );
    // Two items in one answer: both answered by the core, no tool effect.
    let s = c.step(
        &mut st,
        answer(
            "",
            &[
                ("work_item_add", json!({"title": "Read notes.md"})),
                (
                    "work_item_add",
                    json!({"title": "Write summary.md", "priority": "high"}),
                ),
            ],
        ),
        &env(0, false),
    );
    record(&mut journal, &s);
    assert_eq!(
        names(&s),
        [
            "llm_response",
            "tool_call_started",
            "work_item_changed",
            "tool_result",
            "tool_call_started",
            "work_item_changed",
            "tool_result"
        ]
    );
    assert!(matches!(s.effect, Effect::FetchStanding { .. }), "{s:?}");
    assert_eq!(st.work_items.len(), 2);
    // The next request ends with the reminder, open items first (high priority first).
    let s = c.step(&mut st, Input::Standing(None), &env(0, false));
    record(&mut journal, &s);
    let Effect::CallModel { request, .. } = &s.effect else {
        panic!()
    };
    let last = request.messages.last().unwrap();
    assert!(
        last.content.starts_with("[work items: 2 open of 2"),
        "{}",
        last.content
    );
    assert!(last.content.find("w2").unwrap() < last.content.find("w1").unwrap());
    assert!(matches!(
        s.events.last(),
        Some(RunEvent::LlmRequest {
            work_items: true,
            ..
        })
    ));
    // The reminder is not kept in the history.
    let history = &st.context(&None).unwrap().history;
    assert!(!history.iter().any(|m| m.content.starts_with("[work items")));
    // A bad call is the model's error, not a denial; nothing changes.
    let s = c.step(
        &mut st,
        answer(
            "",
            &[
                ("work_item_update", json!({"id": "w9", "status": "done"})),
                ("work_item_update", json!({"id": "w1", "status": "done"})),
                ("work_item_update", json!({"id": "w2", "status": "done"})),
            ],
        ),
        &env(0, false),
    );
    record(&mut journal, &s);
    assert!(matches!(
        &s.events[2],
        RunEvent::ToolResult { success: false, content, .. } if content.contains("no work item 'w9'")
    ));
    assert_eq!(st.denials, 0);
    assert!(st.work_items.iter().all(crate::WorkItem::is_done));
    let s = c.step(&mut st, Input::Standing(None), &env(0, false));
    record(&mut journal, &s);
    assert!(matches!(
        s.events.last(),
        Some(RunEvent::LlmRequest {
            work_items: false,
            ..
        })
    ));
    assert_fold(&st, &journal);
}

#[test]
fn work_item_tools_not_enabled_are_refused_as_not_offered() {
    let c = control_core(StopMode::Interactive, None, false);
    let mut st = RunState::default();
    let s = to_first_call(&c, &mut st, task());
    assert!(
        !tool_names(&s.effect)
            .iter()
            .any(|t| t.starts_with("work_item"))
    );
    let s = c.step(
        &mut st,
        answer("", &[("work_item_add", json!({"title": "x"}))]),
        &env(0, false),
    );
    assert!(matches!(
        &s.events[2],
        RunEvent::ToolDenied { reason, .. } if reason.contains("not offered in this phase")
    ));
    assert!(st.work_items.is_empty());
}

#[test]
fn strict_mode_sends_back_a_stop_not_declared_with_work_complete() {
    let c = control_core(StopMode::StrictAutomation, None, false);
    let mut st = RunState::default();
    let mut journal = Vec::new();
    let s = start(&c, &mut st, task(), &env(0, false));
    record(&mut journal, &s);
    let s = c.step(&mut st, Input::Standing(None), &env(0, false));
    record(&mut journal, &s);
    assert!(tool_names(&s.effect).contains(&"work_complete".to_string()));
    let s = c.step(&mut st, answer("I think I am done.", &[]), &env(0, false));
    record(&mut journal, &s);
    assert_eq!(names(&s), ["llm_response", "completion_objected"]);
    let RunEvent::CompletionObjected { check, message, .. } = &s.events[1] else {
        panic!()
    };
    assert_eq!(check, "work_complete");
    assert!(message.contains("`work_complete`"), "{message}");
    // The model declares it: done, with its summary as the text.
    let s = c.step(&mut st, Input::Standing(None), &env(0, false));
    record(&mut journal, &s);
    let s = c.step(
        &mut st,
        answer(
            "",
            &[("work_complete", json!({"summary": "Wrote summary.md"}))],
        ),
        &env(0, false),
    );
    record(&mut journal, &s);
    assert_eq!(
        names(&s),
        [
            "llm_response",
            "tool_call_started",
            "work_complete_declared",
            "tool_result",
            "phase_ended"
        ]
    );
    let Effect::Finish(r) = &s.effect else {
        panic!()
    };
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(r.final_text, "Wrote summary.md");
    assert_fold(&st, &journal);
}

#[test]
fn work_complete_is_not_offered_in_a_phase_that_does_not_complete_the_task() {
    let c = control_core(StopMode::StrictAutomation, None, false);
    let mut st = RunState::default();
    let s = to_first_call(
        &c,
        &mut st,
        PhaseRequest::new("plan").with_max_iterations(5),
    );
    assert!(!tool_names(&s.effect).contains(&"work_complete".to_string()));
    // And a plain answer ends such a phase: no completion check applies.
    let s = c.step(&mut st, answer("the plan", &[]), &env(0, false));
    let Effect::Finish(r) = s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(r.stop_reason, StopReason::Done);
}

/// A strict core whose contract wants `summary.md`, its phase started, and the journal.
fn strict_with_summary_contract() -> (Core, RunState, Vec<RunEvent>) {
    let c = control_core(
        StopMode::StrictAutomation,
        Some(contract_file_exists("summary.md")),
        false,
    );
    let mut st = RunState::default();
    let mut journal = Vec::new();
    let s = start(&c, &mut st, task(), &env(0, false));
    record(&mut journal, &s);
    (c, st, journal)
}

/// Answer "done" and get through the contract's file check with `fact`.
fn attempt_stop(c: &Core, st: &mut RunState, journal: &mut Vec<RunEvent>, fact: FileFact) -> Step {
    let s = c.step(st, Input::Standing(None), &env(0, false));
    record(journal, &s);
    let s = c.step(
        st,
        answer("", &[("work_complete", json!({"summary": "done"}))]),
        &env(0, false),
    );
    record(journal, &s);
    assert_eq!(
        s.effect,
        Effect::CheckFiles(vec!["summary.md".into()]),
        "{s:?}"
    );
    let s = c.step(
        st,
        Input::FilesChecked(vec![("summary.md".into(), fact)]),
        &env(0, false),
    );
    record(journal, &s);
    s
}

#[test]
fn strict_mode_ends_contract_unmet_after_its_retries_listing_what_is_unmet() {
    let (c, mut st, mut journal) = strict_with_summary_contract();
    for retry in 1..=2u32 {
        let s = attempt_stop(&c, &mut st, &mut journal, FileFact::Missing);
        assert_eq!(names(&s), ["contract_checked", "completion_objected"]);
        assert!(matches!(
            &s.events[1],
            RunEvent::CompletionObjected { check, retries, unmet, .. }
                if check == "contract" && *retries == retry
                    && unmet == &["file_exists summary.md: no such file".to_string()]
        ));
    }
    let s = attempt_stop(&c, &mut st, &mut journal, FileFact::Missing);
    assert_eq!(
        names(&s),
        ["contract_checked", "contract_unmet", "phase_ended"]
    );
    let Effect::Finish(r) = &s.effect else {
        panic!()
    };
    assert_eq!(r.stop_reason, StopReason::ContractUnmet);
    assert_fold(&st, &journal);
}

#[test]
fn a_satisfied_contract_ends_the_phase_done() {
    let (c, mut st, mut journal) = strict_with_summary_contract();
    let s = attempt_stop(
        &c,
        &mut st,
        &mut journal,
        FileFact::File {
            bytes: 3,
            text: None,
        },
    );
    assert_eq!(names(&s), ["contract_checked", "phase_ended"]);
    let Effect::Finish(r) = &s.effect else {
        panic!()
    };
    assert_eq!(r.stop_reason, StopReason::Done);
    assert!(st.coverage.as_ref().unwrap().satisfied);
}

#[test]
fn interactive_mode_accepts_the_stop_after_its_retries_and_records_what_was_unmet() {
    let c = control_core(
        StopMode::Interactive,
        Some(TaskContract {
            require: vec![Predicate::TextContains {
                text: "summary.md".into(),
            }],
            ..TaskContract::default()
        }),
        false,
    );
    let mut st = RunState::default();
    to_first_call(&c, &mut st, task());
    // No file to look at: the contract is checked at once, with no effect.
    let s = c.step(&mut st, answer("finished", &[]), &env(0, false));
    assert_eq!(
        names(&s),
        ["llm_response", "contract_checked", "completion_objected"]
    );
    let s = c.step(&mut st, Input::Standing(None), &env(0, false));
    assert!(matches!(s.effect, Effect::CallModel { .. }));
    let s = c.step(&mut st, answer("finished", &[]), &env(0, false));
    assert_eq!(
        names(&s),
        ["llm_response", "contract_checked", "completion_objected"]
    );
    c.step(&mut st, Input::Standing(None), &env(0, false));
    let s = c.step(&mut st, answer("finished, really", &[]), &env(0, false));
    assert_eq!(
        names(&s),
        [
            "llm_response",
            "contract_checked",
            "stop_accepted",
            "phase_ended"
        ]
    );
    let Effect::Finish(r) = &s.effect else {
        panic!()
    };
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(
        st.unmet_accepted,
        ["text_contains \"summary.md\": the final answer does not contain it"]
    );
}

#[test]
fn open_work_items_send_the_model_back_in_a_phase_that_completes_the_task() {
    let c = control_core(StopMode::Interactive, None, true);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, task());
    c.step(
        &mut st,
        answer("", &[("work_item_add", json!({"title": "Write it"}))]),
        &env(0, false),
    );
    c.step(&mut st, Input::Standing(None), &env(0, false));
    let s = c.step(&mut st, answer("done", &[]), &env(0, false));
    assert!(matches!(
        &s.events[1],
        RunEvent::CompletionObjected { check, unmet, .. }
            if check == "work_items" && unmet[0].contains("w1 [todo] Write it")
    ));
}

/// The objection tells the model to mark an item blocked when it truly cannot be done; an
/// item so marked settles the check (it stays in the summary's ledger as blocked).
#[test]
fn an_item_marked_blocked_as_the_objection_advises_settles_the_work_items_check() {
    let c = control_core(StopMode::Interactive, None, true);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, task());
    c.step(
        &mut st,
        answer("", &[("work_item_add", json!({"title": "Fetch the data"}))]),
        &env(0, false),
    );
    c.step(&mut st, Input::Standing(None), &env(0, false));
    let s = c.step(&mut st, answer("done", &[]), &env(0, false));
    assert!(
        names(&s).contains(&"completion_objected"),
        "an open item objects"
    );
    c.step(&mut st, Input::Standing(None), &env(0, false));
    c.step(
        &mut st,
        answer(
            "",
            &[(
                "work_item_update",
                json!({"id": "w1", "status": "blocked", "note": "the server is gone"}),
            )],
        ),
        &env(0, false),
    );
    c.step(&mut st, Input::Standing(None), &env(0, false));
    let s = c.step(&mut st, answer("done: w1 is blocked", &[]), &env(0, false));
    assert!(
        !names(&s).contains(&"completion_objected"),
        "a blocked item is settled: {:?}",
        names(&s)
    );
}

#[test]
fn a_resumed_run_does_not_object_twice_to_the_same_stop() {
    let (c, mut st, mut journal) = strict_with_summary_contract();
    let s = attempt_stop(&c, &mut st, &mut journal, FileFact::Missing);
    assert_eq!(names(&s), ["contract_checked", "completion_objected"]);
    // The process dies here; a new one folds the journal and resumes.
    let mut resumed = RunState::default();
    for e in &journal {
        resumed.apply(e);
    }
    let mut out = Vec::new();
    let e = c.resume(
        &mut resumed,
        RepairAction::RunAgain,
        &env(0, false),
        &mut out,
    );
    assert!(out.is_empty(), "nothing decided again: {out:?}");
    assert!(matches!(e, Effect::FetchStanding { .. }), "{e:?}");
    assert_eq!(resumed.current.as_ref().unwrap().completion_objections, 1);
}

#[test]
fn a_resumed_run_whose_contract_check_was_recorded_decides_on_it_without_looking_again() {
    let c = control_core(
        StopMode::StrictAutomation,
        Some(contract_file_exists("summary.md")),
        false,
    );
    let mut st = RunState::default();
    let s = start(&c, &mut st, task(), &env(0, false));
    let mut journal = s.events.clone();
    let s = c.step(&mut st, Input::Standing(None), &env(0, false));
    journal.extend(s.events);
    let s = c.step(
        &mut st,
        answer("", &[("work_complete", json!({"summary": "done"}))]),
        &env(0, false),
    );
    journal.extend(s.events);
    // The check was recorded; the process died before the decision was.
    let mut out = Vec::new();
    c.contract_checked(
        &mut st,
        &[(
            "summary.md".into(),
            FileFact::File {
                bytes: 1,
                text: None,
            },
        )],
        &mut out,
    );
    journal.extend(out);
    let mut resumed = RunState::default();
    for e in &journal {
        resumed.apply(e);
    }
    let mut out = Vec::new();
    let e = c.resume(
        &mut resumed,
        RepairAction::RunAgain,
        &env(0, false),
        &mut out,
    );
    let Effect::Finish(r) = e else {
        panic!("{e:?}")
    };
    assert_eq!(r.stop_reason, StopReason::Done);
    assert!(!out.iter().any(|e| e.name() == "contract_checked"));
}

#[test]
fn control_tools_cannot_be_called_in_tool_only_mode() {
    let c = control_core(StopMode::Interactive, None, true);
    let mut st = RunState::default();
    let s = start(
        &c,
        &mut st,
        PhaseRequest::direct(vec![lsm_phase::DirectToolCall {
            name: "work_item_add".into(),
            arguments: json!({"title": "x"}),
        }]),
        &env(0, false),
    );
    assert!(s.events.iter().any(|e| matches!(
        e,
        RunEvent::ToolDenied { reason, .. } if reason.contains("control tool")
    )));
    assert!(st.work_items.is_empty());
}

/// An `interactive` core whose allowlist names `work_complete`.
fn interactive_with_work_complete() -> Core {
    let mut cfg = core_config(100_000);
    cfg.stop_mode = StopMode::Interactive;
    cfg.allowlist.insert("work_complete".into());
    Core::new(cfg)
}

#[test]
fn interactive_mode_nudges_a_model_that_stops_without_declaring_completion_then_accepts() {
    // Before, interactive mode accepted the first text answer: a model that stopped early
    // was never asked to continue.
    let c = interactive_with_work_complete();
    let mut st = RunState::default();
    let mut journal = Vec::new();
    let s = start(&c, &mut st, task(), &env(0, false));
    record(&mut journal, &s);
    let s = c.step(&mut st, Input::Standing(None), &env(0, false));
    record(&mut journal, &s);
    assert!(tool_names(&s.effect).contains(&"work_complete".to_string()));
    // Two text answers: each gets a continuation prompt (completion_retries = 2)…
    for round in 1..=2 {
        let s = c.step(&mut st, answer("Let me look further.", &[]), &env(0, false));
        record(&mut journal, &s);
        assert_eq!(
            names(&s),
            ["llm_response", "completion_objected"],
            "{round}"
        );
        let RunEvent::CompletionObjected {
            check,
            message,
            retries,
            ..
        } = &s.events[1]
        else {
            panic!()
        };
        assert_eq!((check.as_str(), *retries), ("work_complete", round));
        assert!(message.contains("continue working"), "{message}");
        assert!(message.contains(&format!("{round} of 2")), "{message}");
        let s = c.step(&mut st, Input::Standing(None), &env(0, false));
        record(&mut journal, &s);
        assert!(matches!(s.effect, Effect::CallModel { .. }), "{s:?}");
    }
    // …and the third is accepted: interactive mode favours liveness, recording what it
    // accepted unmet.
    let s = c.step(&mut st, answer("Here is the summary.", &[]), &env(0, false));
    record(&mut journal, &s);
    let Effect::Finish(r) = &s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(r.final_text, "Here is the summary.");
    assert!(
        s.events
            .iter()
            .any(|e| matches!(e, RunEvent::PhaseEnded { .. })),
        "{s:?}"
    );
    assert_fold(&st, &journal);
}

#[test]
fn interactive_mode_without_work_complete_offered_accepts_the_first_answer() {
    let c = control_core(StopMode::Interactive, None, false);
    let mut st = RunState::default();
    let s = to_first_call(&c, &mut st, task());
    assert!(!tool_names(&s.effect).contains(&"work_complete".to_string()));
    let s = c.step(
        &mut st,
        answer("Done: summary.md written.", &[]),
        &env(0, false),
    );
    let Effect::Finish(r) = s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(r.stop_reason, StopReason::Done);
}
