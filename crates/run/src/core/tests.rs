//! The pure core without I/O: every decision of the loop from a state and one input.

use std::sync::Arc;

use lsm_phase::{PhaseRequest, StopReason, ToolOutcome};
use lsm_providers::{LlmRequest, LlmResponse, ToolCall, ToolDefinition, Usage};
use serde_json::{Value, json};

use super::*;
use crate::budget::{BudgetLimits, BudgetSnapshot};
use crate::event::RunEvent;
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
    fn check(&self, _tool: &str, arguments: &Value) -> Result<(), String> {
        match arguments.get("text").and_then(Value::as_str) {
            Some("secret") => Err("no secrets".into()),
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

#[test]
fn the_next_request_shares_the_last_ones_messages_and_its_standing_block() {
    let c = core(1_000_000);
    let mut st = RunState::default();
    start(&c, &mut st, PhaseRequest::new("hello"), &env(0, false));
    let first = sent_with_standing(&c, &mut st, "fact");
    let earlier = first.messages.clone();
    c.recycle(first);
    one_tool_round(&c, &mut st, "out");
    let second = sent_with_standing(&c, &mut st, "fact");
    assert_eq!(contents(&second), ["sys", "fact", "hello", "", "out"]);
    // The same messages, not equal copies: a provider knows what it wrote for each by its
    // identity, and writes only the new ones (the standing block was a new one each call).
    for (i, (a, b)) in earlier.iter().zip(&second.messages).enumerate() {
        assert!(Arc::ptr_eq(a, b), "message {i} is a new one: {b:?}");
    }
    // Not handed back: the same request, built from nothing.
    one_tool_round(&c, &mut st, "more");
    let third = sent_with_standing(&c, &mut st, "fact");
    assert_eq!(
        contents(&third),
        ["sys", "fact", "hello", "", "out", "", "more"]
    );
    assert!(Arc::ptr_eq(&third.messages[1], &second.messages[1]));
    // A changed standing block is a new message with the new text; the history after it is
    // still shared.
    c.recycle(third.clone());
    one_tool_round(&c, &mut st, "last");
    let fourth = sent_with_standing(&c, &mut st, "news");
    assert_eq!(
        contents(&fourth),
        ["sys", "news", "hello", "", "out", "", "more", "", "last"]
    );
    assert!(Arc::ptr_eq(&fourth.messages[0], &third.messages[0]));
    assert!(Arc::ptr_eq(&fourth.messages[2], &third.messages[2]));
    assert!(Arc::ptr_eq(&fourth.messages[6], &third.messages[6]));
}

#[test]
fn requests_offering_the_same_tools_share_one_list_of_their_names() {
    let c = core(1_000_000);
    let tools = |names: &[&str]| -> Vec<Arc<ToolDefinition>> {
        names.iter().map(|n| Arc::new(def(n))).collect()
    };
    let first = c.tool_names(&tools(&["tool_a", "tool_b"]));
    assert_eq!(&*first, ["tool_a", "tool_b"]);
    // Equal names (new definitions of the same tools): the same list, not a copy.
    assert!(Arc::ptr_eq(
        &first,
        &c.tool_names(&tools(&["tool_a", "tool_b"]))
    ));
    // Other tools, fewer, or another order: their own names.
    for names in [
        &["tool_b"][..],
        &["tool_b", "tool_a"],
        &[],
        &["tool_a", "tool_c"],
    ] {
        assert_eq!(&*c.tool_names(&tools(names)), names);
    }
    // The events of two calls in a row carry one list.
    let mut st = RunState::default();
    let s = to_first_call(&c, &mut st, PhaseRequest::new("hello"));
    let offered = |events: &[RunEvent]| {
        events.iter().find_map(|e| match e {
            RunEvent::LlmRequest { tools, .. } => Some(Arc::clone(tools)),
            _ => None,
        })
    };
    let before = offered(&s.events).unwrap();
    let s = c.step(
        &mut st,
        answer("", &[("tool_a", json!({}))]),
        &env(15, false),
    );
    assert!(matches!(s.effect, Effect::RunTool { .. }), "{s:?}");
    c.step(&mut st, ok("out"), &env(15, false));
    let s = c.step(&mut st, Input::Standing(None), &env(15, false));
    let after = offered(&s.events).unwrap();
    assert!(!before.is_empty());
    assert!(Arc::ptr_eq(&before, &after));
}

#[test]
fn the_prompt_cache_key_is_the_agent_and_the_label_of_each_request() {
    let c = core(1_000_000);
    let agent = c.config.agent.clone();
    assert!(!agent.is_empty());
    // The same label again, another one, back, and labels that share the key's parts.
    for label in [
        "__default__",
        "__default__",
        "notes",
        "__default__",
        "",
        ":",
        "e:n",
        "n",
    ] {
        assert_eq!(c.cache_key(label), format!("{agent}:{label}"), "{label:?}");
    }
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
fn calls_outside_the_allowlist_tool_names_or_a_guard_are_refused_without_running() {
    let c = core(1000);
    let mut st = RunState::default();
    to_first_call(
        &c,
        &mut st,
        PhaseRequest::new("x").with_tool_names(["tool_a"]),
    );
    let s = c.step(
        &mut st,
        answer(
            "",
            &[
                ("tool_c", json!({})),
                ("tool_b", json!({})),
                ("tool_a", json!({"text": "secret"})),
                ("tool_a", json!({"text": "fine"})),
            ],
        ),
        &env(15, false),
    );
    let refused: Vec<String> = s
        .events
        .iter()
        .filter_map(|e| match e {
            RunEvent::ToolDenied { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        refused,
        [
            "Tool 'tool_c' is not allowed for this harness run",
            "Tool 'tool_b' is not in the requested tool_names list",
            "Tool 'tool_a' was refused: no secrets",
        ]
    );
    assert_eq!(
        s.effect,
        Effect::RunTool {
            call_id: "c3".into(),
            tool: "tool_a".into(),
            arguments: json!({"text": "fine"})
        }
    );
    assert_eq!(st.approvals.denials, 3);
    assert_eq!(
        st.current
            .as_ref()
            .unwrap()
            .pending
            .as_ref()
            .unwrap()
            .call_id,
        "c3"
    );
}

#[test]
fn only_allowlisted_registered_tools_within_tool_names_are_offered_with_block() {
    let c = core(1000);
    let offered = |names: Option<&[String]>| -> Vec<String> {
        let request = PhaseRequest {
            tool_names: names.map(<[String]>::to_vec),
            ..PhaseRequest::new("x")
        };
        c.offered_tools(&request, StopMode::Interactive)
            .into_iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(offered(None), ["tool_a", "tool_b", "block"]);
    assert_eq!(offered(Some(&["tool_b".to_string()])), ["tool_b", "block"]);
    assert_eq!(offered(Some(&[])), ["block"]);
}

/// Control tools are offered when allowlisted (no `[agents] work_items`, no strict mode):
/// `work_complete` in a phase that completes the task, the work-item tools in any; a control
/// tool in the registry is never offered as a registered one.
#[test]
fn allowlisted_control_tools_are_offered_without_their_settings() {
    let mut config = core_config(1000);
    config.allowlist.extend(
        ["work_item_list", "work_complete", "block"]
            .into_iter()
            .map(String::from),
    );
    config.tools.push(def("work_item_list").into());
    let c = Core::new(config);
    let offered = |completes_task: bool| -> Vec<String> {
        let request = PhaseRequest {
            completes_task,
            ..PhaseRequest::new("x")
        };
        c.offered_tools(&request, StopMode::Interactive)
            .into_iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(
        offered(true),
        [
            "tool_a",
            "tool_b",
            "work_item_list",
            "work_complete",
            "block"
        ]
    );
    assert_eq!(
        offered(false),
        ["tool_a", "tool_b", "work_item_list", "block"]
    );
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

// ---------- stall detection ----------

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

// ---------- hooks ----------

/// A hook the core only asks whether it matches (the driver runs hooks, not the core).
struct At(crate::hooks::HookPoint);

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
        let RunEvent::HookDecision {
            decision, reason, ..
        } = &s.events[0]
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
        RunEvent::HookDecision { hook, runs, .. } => RunEvent::HookDecision {
            hook,
            label: Some("__default__".into()),
            call_id: None,
            tool: None,
            decision: "allow".into(),
            reason: None,
            notes: Vec::new(),
            runs,
        },
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

mod context;
mod control;
