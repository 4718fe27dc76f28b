//! The requests the core builds: what the next one shares with the last (messages, the
//! standing block, the tool names), and its prompt-cache key.

use super::*;

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
