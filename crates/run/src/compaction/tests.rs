//! The ladder's pure parts: what each rung may touch, and how the fold redoes it.

use crate::message::{Message, Role, ToolCall};
use serde_json::json;

use super::*;

fn call(id: &str, name: &str, path: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: json!({"path": path}),
    }
}

/// task, then `turns` turns of (assistant read_file call, 2 KB result), then `tail`.
fn history(turns: usize, open_call: bool) -> Vec<Arc<Message>> {
    let mut h = vec![Message::user("Summarize the notes.")];
    for t in 0..turns {
        h.push(Message::assistant(
            "",
            vec![call(&format!("c{t}"), "read_file", &format!("notes{t}.md"))],
        ));
        h.push(Message::tool_result(format!("c{t}"), "x".repeat(2048)));
    }
    if open_call {
        h.push(Message::assistant(
            "",
            vec![call("cur", "read_file", "now.md")],
        ));
        h.push(Message::tool_result("cur", "y".repeat(2048)));
    } else {
        h.push(Message::assistant("done", Vec::new()));
    }
    h.into_iter().map(Arc::new).collect()
}

#[test]
fn the_window_numbers_follow_the_configuration_then_the_provider() {
    let c = CompactionConfig::default();
    let w = c.window(Some(8192), Some(4096));
    assert_eq!(w.window, 8192);
    assert_eq!(w.limit, 8192 - 2048, "the reserve is at most a quarter");
    assert_eq!(w.target, 5734);
    let w = c.window(None, Some(1000));
    assert_eq!(
        (w.window, w.limit),
        (DEFAULT_CONTEXT_WINDOW, DEFAULT_CONTEXT_WINDOW - 1000)
    );
    let c = CompactionConfig {
        context_window: Some(10_000),
        output_reserve: Some(5000),
        ..CompactionConfig::default()
    };
    let w = c.window(Some(128_000), None);
    assert_eq!(
        (w.window, w.limit, w.target),
        (10_000, 5000, 5000),
        "target ≤ limit"
    );
    assert!(
        CompactionConfig {
            target_fraction: 1.2,
            ..c
        }
        .validate()
        .is_err()
    );
    assert!(
        CompactionConfig {
            context_window: Some(10),
            ..c
        }
        .validate()
        .is_err()
    );
    c.validate().unwrap();
}

#[test]
fn the_task_and_the_current_exchange_are_protected() {
    let h = history(3, true);
    let l = layout(&h, Some(0));
    assert_eq!(l.pinned, [0]);
    assert_eq!(l.tail, 7, "the open call and its result");
    let h = history(3, false);
    assert_eq!(
        layout(&h, Some(0)).tail,
        h.len(),
        "an answered exchange is over"
    );
    // A later phase's opening message is pinned too.
    let mut h = history(2, false);
    h.push(Message::user("Phase: WRITE.").into());
    let l = layout(&h, Some(h.len() - 1));
    assert_eq!(l.pinned, [0, h.len() - 1]);
}

#[test]
fn stubs_name_the_call_its_argument_and_size() {
    let h = history(1, true);
    assert_eq!(
        stub(&h, 2),
        "[read_file notes0.md: 2.0 KB, elided; call it again if needed]"
    );
    let l = layout(&h, Some(0));
    let e = elidable(&h, &l, 400);
    assert_eq!(
        e,
        [(2, "c0".to_string())],
        "not the current exchange's result"
    );
    assert!(elidable(&h, &l, 4096).is_empty(), "too small to bother");
}

#[test]
fn eliding_is_redone_exactly_by_the_fold_and_only_once() {
    let mut h = history(3, true);
    let step = Step::ElideToolResults {
        call_ids: vec!["c0".into(), "c1".into()],
    };
    // The last request holds the same messages: eliding must not change them there.
    let sent = h[2].clone();
    assert_eq!(apply(&mut h, &step), 0);
    assert!(h[2].content.starts_with("[read_file notes0.md"));
    assert_eq!(
        (h[2].role, h[2].tool_call_id.as_deref(), &h[2].tool_calls),
        (sent.role, Some("c0"), &sent.tool_calls),
        "the stub answers the same call"
    );
    assert_eq!(sent.content.len(), 2048, "the shared message is as it was");
    assert!(h[4].content.starts_with("[read_file notes1.md"));
    assert_eq!(h[6].content.len(), 2048, "c2 untouched");
    let once = h.clone();
    apply(&mut h, &step);
    assert_eq!(h, once, "a stub is not stubbed again");
    let l = layout(&h, Some(0));
    assert_eq!(elidable(&h, &l, 10).len(), 1, "only c2 is left");
}

#[test]
fn the_oldest_run_keeps_turn_boundaries_and_recent_turns() {
    let h = history(4, true);
    let l = layout(&h, Some(0));
    assert_eq!(oldest_run(&h, &l, 0), Some((1, 9)));
    assert_eq!(
        oldest_run(&h, &l, 2),
        Some((1, 5)),
        "the last two turns are kept"
    );
    assert_eq!(
        oldest_run(&h, &l, 4),
        None,
        "nothing older than the kept turns"
    );
    // A run stops at the next pinned message.
    let mut h = history(2, false);
    h.push(Message::user("Phase: WRITE.").into());
    h.push(Message::assistant("", vec![call("w", "write_file", "out.md")]).into());
    h.push(Message::tool_result("w", "ok").into());
    let l = layout(&h, Some(6));
    assert_eq!(oldest_run(&h, &l, 0), Some((1, 6)));
}

#[test]
fn summarizing_and_dropping_replace_a_range_with_one_message() {
    let mut h = history(4, true);
    let n = h.len();
    let removed = apply(
        &mut h,
        &Step::Summarize {
            from: 1,
            to: 5,
            text: "Read notes0 and notes1.".into(),
        },
    );
    assert_eq!(removed, 3);
    assert_eq!(h.len(), n - 3);
    assert!(h[1].content.starts_with(SUMMARY_HEADER));
    assert!(h[1].content.ends_with("Read notes0 and notes1."));
    assert_eq!(h[2].role, Role::Assistant, "the next turn follows intact");
    let mut h = history(4, true);
    apply(&mut h, &Step::DropOldest { from: 1, to: 5 });
    assert_eq!(
        h[1].content,
        "[4 earlier messages were dropped to fit the model's context window]"
    );
    // A second drop that takes the note in counts what it stood for.
    apply(&mut h, &Step::DropOldest { from: 1, to: 4 });
    assert_eq!(
        h[1].content,
        "[6 earlier messages were dropped to fit the model's context window]"
    );
    assert_eq!(h[0].content, "Summarize the notes.", "the task stays");
}

#[test]
fn the_summary_transcript_shows_calls_and_results() {
    let h = history(1, true);
    let t = transcript_of(&h, 1, 3);
    assert!(
        t.contains("[assistant calls read_file] {\"path\":\"notes0.md\"}"),
        "{t}"
    );
    assert!(t.contains("[tool result] xxx"), "{t}");
}
