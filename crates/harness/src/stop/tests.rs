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
    assert_eq!(decide(&f), Verdict::Stop(Ending::Done));
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
fn the_extension_layers_have_no_behaviour_yet() {
    let s = StallState::default();
    let f = facts(Signal::Done, &s);
    assert_eq!(work_complete(&f), None);
    assert_eq!(contract(&f), None);
    assert_eq!(work_items(&f), None);
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
        Verdict::Stop(Ending::DoneForced("run the tests".into()))
    );
    f.agent_stop = HookVerdict::Allow;
    assert_eq!(decide(&f), Verdict::Stop(Ending::Done));
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
