//! Each layer of the stop decision on its own, and their order.

use super::*;

fn facts(signal: Signal, stall: &StallState) -> StopFacts<'_> {
    StopFacts {
        signal,
        iteration: 1,
        max_iterations: 10,
        budget_exhausted: None,
        stop_requested: false,
        stall_config: StallConfig::default(),
        stall,
        agent_stop: HookVerdict::Allow,
        agent_stop_blocks: 0,
        agent_stop_max_blocks: 2,
        completion: None,
    }
}

fn completion(mode: StopMode) -> Completion {
    Completion {
        mode,
        declared: false,
        offered: mode == StopMode::StrictAutomation,
        contract: ContractState::Absent,
        unfinished_items: Vec::new(),
        objections: 0,
        retries: 2,
    }
}

fn streak(repeats: u32, nudged_at: Option<u32>) -> StallState {
    StallState {
        last: Some("f".into()),
        repeats,
        nudged_at,
    }
}

#[test]
fn the_model_s_block_ends_the_phase_before_any_other_layer() {
    let s = streak(5, Some(0));
    let mut f = facts(Signal::Blocked("no data".into()), &s);
    f.stop_requested = true;
    f.iteration = 10;
    assert_eq!(decide(&f), Verdict::Stop(Ending::Blocked("no data".into())));
}

#[test]
fn hard_stops_end_a_continuing_phase_in_the_order_max_iterations_budget_stop() {
    let s = StallState::default();
    let mut f = facts(Signal::Continue, &s);
    assert_eq!(decide(&f), Verdict::Continue);
    f.stop_requested = true;
    assert_eq!(
        decide(&f),
        Verdict::Stop(Ending::Hard(HardStop::StopRequested))
    );
    f.budget_exhausted = Some("tokens".into());
    assert_eq!(
        decide(&f),
        Verdict::Stop(Ending::Hard(HardStop::Budget("tokens".into())))
    );
    f.iteration = 10;
    assert_eq!(
        decide(&f),
        Verdict::Stop(Ending::Hard(HardStop::MaxIterations))
    );
}

#[test]
fn a_done_answer_is_not_cut_off_by_a_hard_stop() {
    let s = StallState::default();
    let mut f = facts(Signal::Done, &s);
    f.iteration = 10;
    f.stop_requested = true;
    f.budget_exhausted = Some("tokens".into());
    assert_eq!(decide(&f), Verdict::Stop(Ending::Done(Vec::new())));
}

#[test]
fn hard_stops_come_before_the_stall_layer() {
    let s = streak(3, None);
    let mut f = facts(Signal::Continue, &s);
    f.iteration = 10;
    assert_eq!(
        decide(&f),
        Verdict::Stop(Ending::Hard(HardStop::MaxIterations))
    );
}

#[test]
fn a_streak_at_the_threshold_is_nudged_once_then_stalled() {
    let below = streak(2, None);
    assert_eq!(decide(&facts(Signal::Continue, &below)), Verdict::Continue);
    let at = streak(3, None);
    assert_eq!(decide(&facts(Signal::Continue, &at)), Verdict::Nudge);
    let after = streak(4, Some(0));
    assert_eq!(
        decide(&facts(Signal::Continue, &after)),
        Verdict::Stop(Ending::Stalled)
    );
    // A resumed run deciding again on the iteration it was nudged after: it continues.
    let same = streak(3, Some(1));
    assert_eq!(decide(&facts(Signal::Continue, &same)), Verdict::Continue);
}

#[test]
fn stall_detection_can_be_switched_off_and_its_threshold_set() {
    let s = streak(3, None);
    let mut f = facts(Signal::Continue, &s);
    f.stall_config = StallConfig::disabled();
    assert_eq!(decide(&f), Verdict::Continue);
    f.stall_config = StallConfig {
        enabled: true,
        threshold: 4,
    };
    assert_eq!(decide(&f), Verdict::Continue);
}

#[test]
fn repeated_identical_answers_stall_before_the_done_layers() {
    let s = streak(3, Some(0));
    let mut f = facts(Signal::Done, &s);
    f.agent_stop = HookVerdict::Block("tests not run".into());
    assert_eq!(decide(&f), Verdict::Stop(Ending::Stalled));
}

#[test]
fn completion_checks_apply_only_in_a_phase_that_completes_the_task() {
    let s = StallState::default();
    let mut f = facts(Signal::Done, &s);
    assert_eq!(decide(&f), Verdict::Stop(Ending::Done(Vec::new())));
    let mut c = completion(StopMode::StrictAutomation);
    c.contract = ContractState::Pending;
    f.completion = Some(c);
    assert_eq!(decide(&f), Verdict::Object(Objection::WorkComplete));
}

#[test]
fn work_complete_is_required_in_strict_mode_only() {
    let mut c = completion(StopMode::Interactive);
    assert_eq!(work_complete(&c), Check::Met);
    c.mode = StopMode::StrictAutomation;
    assert!(matches!(
        work_complete(&c),
        Check::Unmet(Objection::WorkComplete, _)
    ));
    c.declared = true;
    assert_eq!(work_complete(&c), Check::Met);
}

#[test]
fn the_contract_layer_asks_for_a_check_then_objects_with_the_unmet_conditions() {
    let mut c = completion(StopMode::Interactive);
    assert_eq!(contract(&c), Check::Met);
    c.contract = ContractState::Pending;
    assert_eq!(contract(&c), Check::Ask(Verdict::CheckContract));
    c.contract = ContractState::Checked(vec!["file_exists a.md: no such file".into()]);
    assert_eq!(
        contract(&c),
        Check::Unmet(
            Objection::Contract(vec!["file_exists a.md: no such file".into()]),
            vec!["file_exists a.md: no such file".into()]
        )
    );
    c.contract = ContractState::Checked(Vec::new());
    assert_eq!(contract(&c), Check::Met);
}

#[test]
fn the_work_items_layer_objects_while_items_are_unfinished() {
    let mut c = completion(StopMode::Interactive);
    assert_eq!(work_items(&c), Check::Met);
    c.unfinished_items = vec!["work item w1 [todo] x".into()];
    assert!(matches!(work_items(&c), Check::Unmet(Objection::WorkItems(v), _) if v.len() == 1));
}

#[test]
fn the_checks_run_in_order_work_complete_contract_work_items_then_hooks() {
    let s = StallState::default();
    let mut f = facts(Signal::Done, &s);
    f.agent_stop = HookVerdict::Pending;
    let mut c = completion(StopMode::StrictAutomation);
    c.contract = ContractState::Pending;
    c.unfinished_items = vec!["w1".into()];
    f.completion = Some(c.clone());
    assert_eq!(decide(&f), Verdict::Object(Objection::WorkComplete));
    c.declared = true;
    f.completion = Some(c.clone());
    assert_eq!(decide(&f), Verdict::CheckContract);
    c.contract = ContractState::Checked(Vec::new());
    f.completion = Some(c.clone());
    assert_eq!(
        decide(&f),
        Verdict::Object(Objection::WorkItems(vec!["w1".into()]))
    );
    c.unfinished_items.clear();
    f.completion = Some(c);
    assert_eq!(decide(&f), Verdict::AskAgentStopHooks);
}

#[test]
fn after_its_retries_interactive_accepts_the_stop_and_lists_what_was_unmet() {
    let s = StallState::default();
    let mut f = facts(Signal::Done, &s);
    let mut c = completion(StopMode::Interactive);
    c.contract = ContractState::Checked(vec!["text_contains \"ok\": no".into()]);
    c.unfinished_items = vec!["w1".into()];
    c.objections = 1;
    f.completion = Some(c.clone());
    assert!(matches!(
        decide(&f),
        Verdict::Object(Objection::Contract(_))
    ));
    c.objections = 2;
    f.completion = Some(c);
    assert_eq!(
        decide(&f),
        Verdict::Stop(Ending::Done(vec![
            "text_contains \"ok\": no".into(),
            "w1".into()
        ]))
    );
}

#[test]
fn after_its_retries_strict_mode_ends_contract_unmet() {
    let s = StallState::default();
    let mut f = facts(Signal::Done, &s);
    let mut c = completion(StopMode::StrictAutomation);
    c.declared = true;
    c.contract = ContractState::Checked(vec!["required_output a.md: no such file".into()]);
    c.objections = 2;
    f.completion = Some(c.clone());
    assert_eq!(
        decide(&f),
        Verdict::Stop(Ending::ContractUnmet(vec![
            "required_output a.md: no such file".into()
        ]))
    );
    // Satisfied: done, with nothing unmet.
    c.contract = ContractState::Checked(Vec::new());
    f.completion = Some(c);
    assert_eq!(decide(&f), Verdict::Stop(Ending::Done(Vec::new())));
}

#[test]
fn a_completion_objection_yields_to_a_hard_stop_but_the_check_is_still_made() {
    let s = StallState::default();
    let mut f = facts(Signal::Done, &s);
    f.iteration = 10;
    let mut c = completion(StopMode::StrictAutomation);
    c.declared = true;
    c.contract = ContractState::Pending;
    f.completion = Some(c.clone());
    // Checking costs no model call.
    assert_eq!(decide(&f), Verdict::CheckContract);
    c.contract = ContractState::Checked(vec!["x".into()]);
    f.completion = Some(c);
    assert_eq!(
        decide(&f),
        Verdict::Stop(Ending::Hard(HardStop::MaxIterations))
    );
}

#[test]
fn agent_stop_hooks_are_asked_then_block_up_to_their_limit_then_the_stop_is_forced() {
    let s = StallState::default();
    let mut f = facts(Signal::Done, &s);
    f.agent_stop = HookVerdict::Pending;
    assert_eq!(decide(&f), Verdict::AskAgentStopHooks);
    f.agent_stop = HookVerdict::Block("run the tests".into());
    assert_eq!(
        decide(&f),
        Verdict::Object(Objection::AgentStop("run the tests".into()))
    );
    f.agent_stop_blocks = 2;
    assert_eq!(
        decide(&f),
        Verdict::Stop(Ending::DoneForced("run the tests".into(), Vec::new()))
    );
    f.agent_stop = HookVerdict::Allow;
    assert_eq!(decide(&f), Verdict::Stop(Ending::Done(Vec::new())));
}

#[test]
fn a_done_layer_s_objection_yields_to_a_hard_stop() {
    let s = StallState::default();
    let mut f = facts(Signal::Done, &s);
    f.agent_stop = HookVerdict::Block("more".into());
    f.budget_exhausted = Some("tokens".into());
    assert_eq!(
        decide(&f),
        Verdict::Stop(Ending::Hard(HardStop::Budget("tokens".into())))
    );
}

#[test]
fn a_stop_after_the_completion_retries_is_decided_by_the_checks_not_the_stall_layer() {
    let s = streak(3, None);
    let mut f = facts(Signal::Done, &s);
    let mut c = completion(StopMode::StrictAutomation);
    c.declared = true;
    c.contract = ContractState::Checked(vec!["x".into()]);
    c.objections = 1;
    f.completion = Some(c.clone());
    assert_eq!(
        decide(&f),
        Verdict::Nudge,
        "retries left: the stall layer first"
    );
    c.objections = 2;
    f.completion = Some(c);
    assert_eq!(
        decide(&f),
        Verdict::Stop(Ending::ContractUnmet(vec!["x".into()]))
    );
}
