//! The pure core without I/O: every decision of the loop from a state and one input.

use std::sync::Arc;

use crate::message::{LlmRequest, LlmResponse, ToolCall, ToolDefinition, Usage};
use lsm_phase::{PhaseRequest, StopReason, ToolOutcome};
use serde_json::{Value, json};

use super::*;
use crate::budget::{BudgetLimits, BudgetSnapshot};
use crate::event::RunEvent;
use crate::guard::ToolCallGuard;
use crate::state::RunState;

fn limits(max_tokens: u64) -> BudgetLimits {
    BudgetLimits {
        max_tokens,
        max_cost_usd: None,
        max_output_tokens: Some(4096),
        reserve_prompt_estimate: false,
    }
}

fn def(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: String::new(),
        parameters: json!({}),
    }
}

struct NoSecrets;

impl ToolCallGuard for NoSecrets {
    fn check(&self, _tool: &str, arguments: &Value) -> Result<(), crate::GuardRefusal> {
        match arguments.get("text").and_then(Value::as_str) {
            Some("secret") => Err(crate::GuardRefusal::new("no secrets")),
            _ => Ok(()),
        }
    }
}

fn core(max_tokens: u64) -> Core {
    Core::new(core_config(max_tokens))
}

fn core_config(max_tokens: u64) -> CoreConfig {
    CoreConfig {
        agent: "a".into(),
        topic: "t".into(),
        system_prompt: "sys".into(),
        allowlist: ["tool_a", "tool_b"].into_iter().map(String::from).collect(),
        allowlist_order: vec!["tool_a".into(), "tool_b".into()],
        tools: vec![
            def("tool_a").into(),
            def("tool_b").into(),
            def("tool_c").into(),
        ],
        offer_block_tool: true,
        offer_complete_tool: false,
        strategy: Default::default(),
        limits: limits(max_tokens),
        provider: "p".into(),
        model: "m".into(),
        guards: vec![Arc::new(NoSecrets)],
        launch: None,
        stall: crate::stall::StallConfig::default(),
        call_identity: Default::default(),
        hooks: Vec::new(),
        agent_stop_max_blocks: 2,
        stop_mode: StopMode::Interactive,
        completion_retries: 2,
        contract: None,
        work_items: false,
        compaction: crate::compaction::CompactionConfig::default(),
        window: crate::compaction::CompactionConfig::default().window(None, Some(4096)),
        standing_memory: true,
        run_context: crate::context::RunContext::default(),
        concurrent_tools: Default::default(),
        max_parallel_tools: 4,
        deferred_tools: Default::default(),
        continuation: None,
    }
}

fn estimate(_: &LlmRequest) -> u64 {
    10
}

fn env(spent: u64, stop: bool) -> Env<'static> {
    Env {
        stop,
        budget: BudgetSnapshot {
            spent_tokens: spent,
            ..BudgetSnapshot::default()
        },
        pricing: None,
        estimate: &estimate,
        now: "now".into(),
    }
}

fn names(step: &Step) -> Vec<&'static str> {
    step.events.iter().map(RunEvent::name).collect()
}

fn start(core: &Core, st: &mut RunState, request: PhaseRequest, e: &Env<'_>) -> Step {
    core.step(
        st,
        Input::Start {
            request,
            conversation_id: "conv-1".into(),
        },
        e,
    )
}

fn answer(text: &str, calls: &[(&str, Value)]) -> Input {
    Input::Answered {
        response: LlmResponse {
            text: text.into(),
            tool_calls: calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| ToolCall {
                    id: format!("c{i}"),
                    name: (*name).into(),
                    arguments: arguments.clone(),
                })
                .collect(),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            },
            response_id: Some("r1".into()),
        },
        cost: None,
        totals: crate::RunUsage::default(),
    }
}

/// Start a phase and get to its first model call.
fn to_first_call(core: &Core, st: &mut RunState, request: PhaseRequest) -> Step {
    let s = start(core, st, request, &env(0, false));
    assert!(matches!(s.effect, Effect::FetchStanding { .. }), "{s:?}");
    core.step(st, Input::Standing(None), &env(0, false))
}

/// The request of the call the standing block `text` makes ready.
fn sent_with_standing(c: &Core, st: &mut RunState, text: &str) -> LlmRequest {
    match c
        .step(st, Input::Standing(Some(text.into())), &env(15, false))
        .effect
    {
        Effect::CallModel { request, .. } => request,
        other => panic!("{other:?}"),
    }
}

fn contents(request: &LlmRequest) -> Vec<&str> {
    request
        .messages
        .iter()
        .map(|m| m.content.as_str())
        .collect()
}

/// One tool call answered and run, up to the next call's standing block.
fn one_tool_round(c: &Core, st: &mut RunState, out: &str) {
    let s = c.step(st, answer("", &[("tool_a", json!({}))]), &env(15, false));
    assert!(matches!(s.effect, Effect::RunTool { .. }), "{s:?}");
    let s = c.step(st, ok(out), &env(15, false));
    assert!(matches!(s.effect, Effect::FetchStanding { .. }), "{s:?}");
}

fn ok(out: &str) -> Input {
    Input::ToolDone {
        guidance: Vec::new(),
        run: ToolRun::Ran {
            outcome: Ok(out.into()),
            artifacts: Vec::new(),
            permission: None,
            events: Vec::new(),
        },
        spend: None,
    }
}

/// One iteration: the model asks for `calls`, each runs (or is refused) and gives `out`.
/// Returns every event of it and the effect after its last call.
fn iteration(
    c: &Core,
    st: &mut RunState,
    calls: &[(&str, Value)],
    out: &str,
) -> (Vec<RunEvent>, Effect) {
    let mut events = Vec::new();
    let s = c.step(st, Input::Standing(None), &env(0, false));
    events.extend(s.events);
    let mut s = c.step(st, answer("", calls), &env(0, false));
    loop {
        events.extend(s.events.clone());
        match s.effect {
            Effect::RunTool { .. } => s = c.step(st, ok(out), &env(0, false)),
            effect => return (events, effect),
        }
    }
}

fn started(c: &Core) -> (RunState, Vec<RunEvent>) {
    let mut st = RunState::default();
    let s = start(
        c,
        &mut st,
        PhaseRequest::new("x").with_max_iterations(20),
        &env(0, false),
    );
    (st, s.events)
}

fn has(events: &[RunEvent], name: &str) -> bool {
    events.iter().any(|e| e.name() == name)
}

#[test]
fn a_phase_starts_the_run_then_asks_for_standing_memory_about_the_user_message() {
    let c = core(1000);
    let mut st = RunState::default();
    let s = start(&c, &mut st, PhaseRequest::new("hello"), &env(0, false));
    assert_eq!(names(&s), ["run_started", "phase_started"]);
    assert_eq!(
        s.effect,
        Effect::FetchStanding {
            topic: "hello".into()
        }
    );
    let s = c.step(
        &mut st,
        Input::Standing(Some("fact".into())),
        &env(0, false),
    );
    assert_eq!(names(&s), ["standing_context", "llm_request"]);
    let Effect::CallModel { request, grant } = s.effect else {
        panic!("{s:?}")
    };
    assert_eq!(contents(&request), ["sys", "fact", "hello"]);
    assert_eq!(
        request.options.prompt_cache_key.as_deref(),
        Some("a:__default__")
    );
    assert_eq!(
        grant.cap, 1000,
        "without reserving the prompt, the cap is what is left"
    );
    assert_eq!(
        grant.reserved_tokens, 1010,
        "the call holds its prompt estimate and its cap"
    );
}
#[test]
fn an_exhausted_budget_ends_the_phase_before_any_call() {
    let c = core(1000);
    let mut st = RunState::default();
    let s = start(&c, &mut st, PhaseRequest::new("x"), &env(1000, false));
    assert_eq!(
        names(&s),
        [
            "run_started",
            "phase_started",
            "budget_exhausted",
            "phase_ended"
        ]
    );
    let Effect::Finish(r) = s.effect else {
        panic!()
    };
    assert_eq!(r.stop_reason, StopReason::BudgetExhausted);
}

#[test]
fn the_output_cap_is_what_is_left_of_the_budget_and_at_most_the_configured_cap() {
    let c = core(10_000);
    let mut st = RunState::default();
    let s = to_first_call(&c, &mut st, PhaseRequest::new("x"));
    let Effect::CallModel { request, .. } = s.effect else {
        panic!()
    };
    assert_eq!(request.options.max_output_tokens, Some(4096));
    let mut st = RunState::default();
    start(&c, &mut st, PhaseRequest::new("x"), &env(0, false));
    let s = c.step(&mut st, Input::Standing(None), &env(9_900, false));
    let Effect::CallModel { request, .. } = s.effect else {
        panic!()
    };
    assert_eq!(request.options.max_output_tokens, Some(100));
}

#[test]
fn a_stop_before_a_call_ends_the_phase_without_one() {
    let c = core(1000);
    let mut st = RunState::default();
    let s = start(&c, &mut st, PhaseRequest::new("x"), &env(0, true));
    assert_eq!(names(&s)[2..], ["stop_requested", "phase_ended"]);
    let Effect::Finish(r) = s.effect else {
        panic!()
    };
    assert_eq!(r.stop_reason, StopReason::StopRequested);
}

#[test]
fn an_answer_without_tool_calls_is_done_and_the_block_tool_is_blocked() {
    let c = core(1000);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    let s = c.step(&mut st, answer("all done", &[]), &env(15, false));
    assert_eq!(names(&s), ["llm_response", "phase_ended"]);
    let Effect::Finish(r) = s.effect else {
        panic!()
    };
    assert_eq!(
        (r.stop_reason, r.final_text.as_str()),
        (StopReason::Done, "all done")
    );

    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    let s = c.step(
        &mut st,
        answer(
            "",
            &[
                ("tool_a", json!({})),
                ("block", json!({"reason": "no data"})),
            ],
        ),
        &env(15, false),
    );
    assert_eq!(names(&s), ["llm_response", "blocked", "phase_ended"]);
    let Effect::Finish(r) = s.effect else {
        panic!()
    };
    assert_eq!(
        (r.stop_reason, r.final_text.as_str()),
        (StopReason::Blocked, "no data")
    );
    assert!(r.tool_calls.is_empty(), "nothing runs in a blocked phase");
}

#[test]
fn without_a_memory_source_the_next_call_is_prepared_in_the_same_step() {
    let mut c = core(1000);
    c.config_mut().standing_memory = false;
    let mut st = RunState::default();
    let s = start(&c, &mut st, PhaseRequest::new("hello"), &env(0, false));
    assert_eq!(names(&s), ["run_started", "phase_started", "llm_request"]);
    assert!(matches!(s.effect, Effect::CallModel { .. }), "{s:?}");
    let s = c.step(
        &mut st,
        answer("", &[("tool_a", json!({}))]),
        &env(15, false),
    );
    assert!(matches!(s.effect, Effect::RunTool { .. }), "{s:?}");
    let s = c.step(&mut st, ok("out"), &env(15, false));
    // The tool's result and the next request: one step, so one journal write.
    assert_eq!(names(&s), ["tool_result", "llm_request"]);
    assert!(matches!(s.effect, Effect::CallModel { .. }), "{s:?}");
}

#[test]
fn a_tool_result_goes_back_and_the_next_iteration_respects_max_iterations() {
    let c = core(1000);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x").with_max_iterations(1));
    let s = c.step(
        &mut st,
        answer("", &[("tool_a", json!({}))]),
        &env(15, false),
    );
    assert!(matches!(s.effect, Effect::RunTool { .. }));
    let s = c.step(
        &mut st,
        Input::ToolDone {
            guidance: Vec::new(),
            run: ToolRun::Ran {
                outcome: Ok("out".into()),
                artifacts: vec!["f.md".into()],
                permission: None,
                events: Vec::new(),
            },
            spend: None,
        },
        &env(15, false),
    );
    assert_eq!(names(&s), ["tool_result", "phase_ended"]);
    let Effect::Finish(r) = s.effect else {
        panic!()
    };
    assert_eq!(r.stop_reason, StopReason::MaxIterations);
    assert_eq!(r.tool_calls[0].outcome, ToolOutcome::Result("out".into()));
    assert_eq!(st.artifacts, ["f.md"]);
    let history = &st.context(&None).unwrap().history;
    assert_eq!(history.last().unwrap().content, "out");
}

#[test]
fn a_stop_between_calls_answers_the_rest_of_the_batch_as_not_executed() {
    let c = core(1000);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    let s = c.step(
        &mut st,
        answer("", &[("tool_a", json!({})), ("tool_b", json!({}))]),
        &env(15, true),
    );
    assert_eq!(names(&s), ["llm_response", "stop_requested", "phase_ended"]);
    let history = &st.context(&None).unwrap().history;
    let tail: Vec<&str> = history[history.len() - 2..]
        .iter()
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(tail, [crate::state::NOT_EXECUTED_STOPPED; 2]);
}

#[test]
fn tool_only_mode_makes_no_model_call_and_ignores_the_budget() {
    let c = core(1000);
    let mut st = RunState::default();
    let s = start(
        &c,
        &mut st,
        PhaseRequest::direct(vec![lsm_phase::DirectToolCall {
            name: "tool_b".into(),
            arguments: json!({}),
        }]),
        &env(1000, false),
    );
    assert_eq!(
        s.effect,
        Effect::RunTool {
            call_id: "direct-0-0".into(),
            tool: "tool_b".into(),
            arguments: json!({})
        }
    );
    let s = c.step(
        &mut st,
        Input::ToolDone {
            guidance: Vec::new(),
            run: ToolRun::Interrupted,
            spend: None,
        },
        &env(1000, false),
    );
    assert_eq!(names(&s), ["tool_result", "phase_ended"]);
    let Effect::Finish(r) = s.effect else {
        panic!()
    };
    assert_eq!(r.stop_reason, StopReason::Done);
    assert!(r.tool_calls[0].outcome.is_error());
}

#[test]
fn a_failed_model_call_ends_the_phase_as_error_and_a_broken_chain_forgets_the_response_id() {
    let c = core(1000);
    let mut st = RunState::default();
    to_first_call(&c, &mut st, PhaseRequest::new("x"));
    c.step(
        &mut st,
        answer("", &[("tool_a", json!({}))]),
        &env(15, false),
    );
    c.step(
        &mut st,
        Input::ToolDone {
            guidance: Vec::new(),
            run: ToolRun::Ran {
                outcome: Ok("out".into()),
                artifacts: Vec::new(),
                permission: None,
                events: Vec::new(),
            },
            spend: None,
        },
        &env(15, false),
    );
    assert_eq!(
        st.context(&None).unwrap().last_response_id.as_deref(),
        Some("r1")
    );
    c.step(&mut st, Input::Standing(None), &env(15, false));
    let s = c.step(
        &mut st,
        Input::ModelFailed {
            error: "gone".into(),
            chain_broken: true,
        },
        &env(15, false),
    );
    assert_eq!(names(&s), ["llm_error", "phase_ended"]);
    let Effect::Finish(r) = s.effect else {
        panic!()
    };
    assert_eq!(r.stop_reason, StopReason::Error);
    assert_eq!(r.final_text, "LLM call failed: gone");
    assert_eq!(st.context(&None).unwrap().last_response_id, None);
    assert_eq!(st.last_error.as_deref(), Some("LLM call failed: gone"));
}

mod context;
mod control;
mod deferred;
mod hooks;
mod parallel;
mod requests;
mod stall;
mod tools;
mod wall;
