//! The context providers in the core: the run's standing texts recorded after `run_started`
//! and carried by every request; nested instructions given once per run, after a result.

use super::*;
use crate::context::{InstructionFile, RunContext};

fn file(path: &str, text: &str) -> InstructionFile {
    InstructionFile {
        name: "AGENTS.md".into(),
        path: path.into(),
        bytes: text.len() as u64,
        sha256: crate::context::sha256_hex(text.as_bytes()),
        truncated: false,
        text: text.into(),
    }
}

fn core_with_context() -> Core {
    Core::new(CoreConfig {
        run_context: RunContext {
            instructions: vec![file("/p/AGENTS.md", "Use British spelling.")],
            environment: Some("Environment of this run:\n- date (UTC): 2030-01-02".into()),
        },
        ..core_config(1_000_000)
    })
}

fn guided(out: &str, guidance: Vec<InstructionFile>) -> Input {
    match ok(out) {
        Input::ToolDone { run, spend, .. } => Input::ToolDone {
            run,
            spend,
            guidance,
        },
        other => other,
    }
}

#[test]
fn the_run_records_its_context_after_run_started_and_every_request_carries_it() {
    let c = core_with_context();
    let mut st = RunState::default();
    let s = start(&c, &mut st, PhaseRequest::new("hello"), &env(0, false));
    assert_eq!(
        names(&s),
        [
            "run_started",
            "project_instructions",
            "environment_context",
            "phase_started"
        ]
    );
    let first = sent_with_standing(&c, &mut st, "fact");
    let texts = contents(&first);
    assert_eq!(texts[0], "sys");
    assert!(
        texts[1].starts_with("Project instructions")
            && texts[1].contains("--- AGENTS.md (/p/AGENTS.md) ---\nUse British spelling.")
            && texts[1].ends_with("- date (UTC): 2030-01-02"),
        "{}",
        texts[1]
    );
    assert_eq!(&texts[2..], ["fact", "hello"]);
    // The next request shares the same message.
    let earlier = Arc::clone(&first.messages[1]);
    c.recycle(first);
    one_tool_round(&c, &mut st, "out");
    let second = sent_with_standing(&c, &mut st, "fact");
    assert!(Arc::ptr_eq(&earlier, &second.messages[1]));
    // A second phase does not record the context again.
    let s = c.step(&mut st, answer("done", &[]), &env(0, false));
    assert!(matches!(s.effect, Effect::Finish(_)), "{s:?}");
    let s = start(&c, &mut st, PhaseRequest::new("again"), &env(0, false));
    assert_eq!(names(&s), ["phase_started"]);
}

#[test]
fn without_context_providers_the_request_is_as_before() {
    let c = core(1000);
    let mut st = RunState::default();
    let s = start(&c, &mut st, PhaseRequest::new("hello"), &env(0, false));
    assert_eq!(names(&s), ["run_started", "phase_started"]);
    let request = sent_with_standing(&c, &mut st, "fact");
    assert_eq!(contents(&request), ["sys", "fact", "hello"]);
}

#[test]
fn nested_instructions_follow_the_result_once_per_run() {
    let c = core(1_000_000);
    let mut st = RunState::default();
    let mut journal = start(&c, &mut st, PhaseRequest::new("x"), &env(0, false)).events;
    journal.extend(
        c.step(&mut st, Input::Standing(None), &env(0, false))
            .events,
    );
    let calls = [
        ("tool_a", json!({"path": "sub/a"})),
        ("tool_b", json!({"path": "sub/b"})),
    ];
    let s = c.step(&mut st, answer("", &calls), &env(0, false));
    journal.extend(s.events);
    let nested = file("/p/sub/AGENTS.md", "Tabs, not spaces.");
    // Both calls touched sub/: the first result gets the file, the second does not.
    let s = c.step(&mut st, guided("a", vec![nested.clone()]), &env(0, false));
    assert_eq!(
        names(&s),
        ["tool_result", "guidance_added", "tool_call_started"]
    );
    journal.extend(s.events);
    let s = c.step(&mut st, guided("b", vec![nested.clone()]), &env(0, false));
    assert_eq!(names(&s), ["tool_result"]);
    journal.extend(s.events);
    let history = &st.context(&None).unwrap().history;
    let results: Vec<&str> = history
        .iter()
        .filter(|m| m.tool_call_id.is_some())
        .map(|m| m.content.as_str())
        .collect();
    assert!(
        results[0].starts_with("a\n\n[Instructions for work under /p/sub, from /p/sub/AGENTS.md")
            && results[0].ends_with("Tabs, not spaces."),
        "{}",
        results[0]
    );
    assert_eq!(results[1], "b");
    assert!(st.guidance.contains("/p/sub/AGENTS.md"));
    let added = journal
        .iter()
        .filter(|e| e.name() == "guidance_added")
        .count();
    assert_eq!(added, 1);
    // The state is the fold of the journal: a resumed run knows the file was given and
    // does not give it again.
    let mut folded = RunState::default();
    for event in &journal {
        folded.apply(event);
    }
    assert_eq!(folded, st);
    let s = c.step(&mut folded, Input::Standing(None), &env(0, false));
    assert!(matches!(s.effect, Effect::CallModel { .. }), "{s:?}");
    c.step(
        &mut folded,
        answer("", &[("tool_a", json!({"path": "sub/c"}))]),
        &env(0, false),
    );
    let s = c.step(&mut folded, guided("c", vec![nested]), &env(0, false));
    assert_eq!(names(&s), ["tool_result"]);
}

#[test]
fn a_refused_call_or_a_tool_only_phase_gets_no_guidance() {
    let c = core(1_000_000);
    let mut st = RunState::default();
    start(&c, &mut st, PhaseRequest::new("x"), &env(0, false));
    c.step(&mut st, Input::Standing(None), &env(0, false));
    c.step(
        &mut st,
        answer("", &[("tool_a", json!({"path": "sub/a"}))]),
        &env(0, false),
    );
    let denied = Input::ToolDone {
        run: ToolRun::Ran {
            outcome: Err(ToolFailure {
                message: "no".into(),
                denial: true,
            }),
            artifacts: Vec::new(),
            permission: None,
            events: Vec::new(),
        },
        spend: None,
        guidance: vec![file("/p/sub/AGENTS.md", "t")],
    };
    let s = c.step(&mut st, denied, &env(0, false));
    assert_eq!(names(&s)[0], "tool_denied");
    assert!(!has(&s.events, "guidance_added"));
    assert!(st.guidance.is_empty());

    let mut st = RunState::default();
    let request = PhaseRequest::direct(vec![lsm_phase::DirectToolCall {
        name: "tool_a".into(),
        arguments: json!({"path": "sub/a"}),
    }]);
    let s = start(&c, &mut st, request, &env(0, false));
    assert!(matches!(s.effect, Effect::RunTool { .. }), "{s:?}");
    let s = c.step(
        &mut st,
        guided("a", vec![file("/p/sub/AGENTS.md", "t")]),
        &env(0, false),
    );
    assert!(!has(&s.events, "guidance_added"), "{s:?}");
}
