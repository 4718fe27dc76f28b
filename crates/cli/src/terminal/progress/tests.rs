//! The progress view's tests: snapshots of what a person sees, with a fake clock.

use super::*;
use serde_json::json;

/// An envelope of `event` with `fields`.
fn ev(event: &str, fields: Value) -> Box<EventEnvelope> {
    let mut v = json!({"seq": 1, "ts": "2026-01-01T00:00:00.000Z", "run_id": "r",
                       "schema_version": 2, "event": event});
    if let (Some(o), Value::Object(f)) = (v.as_object_mut(), fields) {
        o.extend(f);
    }
    Box::new(serde_json::from_value(v).unwrap())
}

fn request(label: &str, iteration: u32) -> Box<EventEnvelope> {
    ev(
        "llm_request",
        json!({"label": label, "iteration": iteration, "provider": "openai",
               "model": "m", "messages": 3, "standing_context": false, "tools": ["read_file"],
               "max_output_tokens": 100, "previous_response_id": null,
               "prompt_cache_key": null, "prompt_tokens_estimate": 10}),
    )
}

fn response(label: &str, text: &str, calls: usize) -> Box<EventEnvelope> {
    let tool_calls: Vec<Value> = (0..calls)
        .map(|i| json!({"id": format!("c{i}"), "name": "read_file", "arguments": {"path": "a.md"}}))
        .collect();
    ev(
        "llm_response",
        json!({"label": label, "iteration": 1, "text": text, "tool_calls": tool_calls,
               "usage": {"input_tokens": 10, "output_tokens": 5, "cached_tokens": 0,
                         "cache_creation_tokens": 0},
               "response_id": null, "tokens_used": 15, "cost_usd": null,
               "total_cost_usd": null}),
    )
}

/// What a person sees: each event's text at its time, and the spinner when sampled.
enum Step {
    Event(u64, Box<EventEnvelope>),
    Spin(u64),
}

fn screen(steps: Vec<Step>) -> String {
    let mut view = ProgressView::new(Some(4));
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Event(ms, e) => {
                let text = view.on_event(&e, Duration::from_millis(ms));
                if !text.is_empty() {
                    let text = text.strip_suffix('\n').unwrap_or(&text);
                    out.push_str(&format!(
                        "@{ms:>5} ms | {}\n",
                        text.replace('\n', "\n           | ")
                    ));
                }
            }
            Step::Spin(ms) => {
                let line = view
                    .spinner(Duration::from_millis(ms))
                    .unwrap_or_else(|| "(no spinner)".into());
                out.push_str(&format!("@{ms:>5} ms ~ {line}\n"));
            }
        }
    }
    out
}

#[test]
fn a_run_with_a_slow_call_a_retry_streamed_text_and_an_error() {
    use Step::{Event, Spin};
    let shown = screen(vec![
        Event(0, request("__default__", 1)),
        Spin(0),
        Spin(1_250),
        Event(
            1_300,
            ev(
                "llm_retry",
                json!({"label": "__default__", "attempt": 2,
            "delay_ms": 2000, "reason": "openai: HTTP 429 Too Many Requests: slow down"}),
            ),
        ),
        Spin(3_400),
        Event(4_200, response("__default__", "", 1)),
        Spin(4_300),
        Event(
            4_300,
            ev(
                "tool_call_started",
                json!({"label": null, "call_id": "c0",
            "tool": "read_file", "arguments": {"path": "a.md"}}),
            ),
        ),
        Event(
            4_310,
            ev(
                "tool_result",
                json!({"label": null, "call_id": "c0",
            "tool": "read_file", "success": true, "content": "hi", "summary": "2 bytes"}),
            ),
        ),
        Event(4_400, request("subtopic:soil", 2)),
        Spin(5_000),
        Event(
            5_100,
            ev(
                "llm_stream",
                json!({"label": "subtopic:soil", "kind": "text_delta", "text": "Soil "}),
            ),
        ),
        Spin(5_150),
        Event(
            5_200,
            ev(
                "llm_stream",
                json!({"label": "subtopic:soil", "kind": "text_delta", "text": "holds carbon."}),
            ),
        ),
        Event(5_300, response("subtopic:soil", "Soil holds carbon.", 0)),
        Event(6_000, request("__default__", 3)),
        Event(
            6_100,
            ev(
                "llm_retry",
                json!({"label": "__default__", "attempt": 1,
            "delay_ms": 500, "reason": "openai: cannot reach http://127.0.0.1:9/v1 after 1 attempt(s): connection refused"}),
            ),
        ),
        Event(
            9_000,
            ev(
                "llm_error",
                json!({"label": "__default__",
            "error": "openai: cannot reach http://127.0.0.1:9/v1 after 5 attempt(s)"}),
            ),
        ),
        Spin(9_100),
    ]);
    assert!(!shown.contains("__default__"), "{shown}");
    assert!(
        !shown.contains("cannot reach http"),
        "the error is printed once, at the end: {shown}"
    );
    insta::assert_snapshot!(shown);
}

#[test]
fn retry_lines_say_what_failed_where_and_which_retry() {
    assert_eq!(
        retry_line("api: HTTP 429 Too Many Requests", 2, 2000, Some(4)),
        "429 from api, retry 2/4 in 2 s"
    );
    assert_eq!(
        retry_line(
            "openai: https://x/v1 timed out (no answer within 60s)",
            1,
            500,
            None
        ),
        "a timeout from openai, retry 1 in 0.5 s"
    );
    assert_eq!(
        retry_line("anthropic: server error 503: overloaded", 3, 1500, Some(4)),
        "503 from anthropic, retry 3/4 in 1.5 s"
    );
}

/// The lines a terminal shows after `written`: `\r\x1b[2K` erases the line under way.
fn terminal(written: &str) -> Vec<String> {
    let mut lines = vec![String::new()];
    for (i, piece) in written.split(CLEAR_LINE).enumerate() {
        if i > 0
            && let Some(last) = lines.last_mut()
        {
            last.clear();
        }
        for (j, part) in piece.split('\n').enumerate() {
            if j > 0 {
                lines.push(String::new());
            }
            if let Some(last) = lines.last_mut() {
                last.push_str(part);
            }
        }
    }
    lines
}

#[test]
fn a_step_is_written_at_once_and_clears_the_spinner_only_when_it_is_drawn() {
    let mut view = ProgressView::new(Some(4));
    let ms = Duration::from_millis;
    let mut written = String::new();
    assert_eq!(view.print(&[*request("__default__", 1)], ms(0)), "");
    written.push_str(&view.redraw(ms(100)).unwrap());
    assert!(terminal(&written)[0].contains("waiting for the model (call 1)"));
    // The answer and the tool call it asks for are one step: one text, one clear before it.
    let step = [
        *response("__default__", "", 1),
        *ev(
            "tool_call_started",
            json!({"label": null, "call_id": "c0", "tool": "read_file",
                   "arguments": {"path": "a.md"}}),
        ),
    ];
    let text = view.print(&step, ms(200));
    assert_eq!(text.matches(CLEAR_LINE).count(), 1, "{text:?}");
    assert!(text.starts_with(CLEAR_LINE), "{text:?}");
    written.push_str(&text);
    // The call is over: the spinner's thread has nothing left to clear.
    assert_eq!(view.redraw(ms(300)), None);
    assert_eq!(
        terminal(&written),
        [
            "model requested 1 tool call(s)",
            r#"  -> read_file {"path":"a.md"}"#,
            ""
        ]
    );
}

#[test]
fn streamed_text_on_a_terminal_is_never_erased() {
    let mut view = ProgressView::new(Some(4));
    let ms = Duration::from_millis;
    let delta = |text: &str| {
        *ev(
            "llm_stream",
            json!({"label": "__default__", "kind": "text_delta", "text": text}),
        )
    };
    let mut written = String::new();
    view.print(&[*request("__default__", 1)], ms(0));
    written.push_str(&view.redraw(ms(100)).unwrap());
    written.push_str(&view.print(&[delta("Soil ")], ms(150)));
    // Streaming: no spinner, and the spinner's thread must not clear the streamed line.
    if let Some(text) = view.redraw(ms(250)) {
        written.push_str(&text);
    }
    written.push_str(&view.print(&[delta("holds carbon.")], ms(300)));
    if let Some(text) = view.redraw(ms(350)) {
        written.push_str(&text);
    }
    written.push_str(&view.print(
        &[*response("__default__", "Soil holds carbon.", 0)],
        ms(400),
    ));
    assert_eq!(terminal(&written), ["model: Soil holds carbon.", ""]);
}

/// Words from a model, a tool or a server never drive the terminal: streamed text, a tool
/// the model named, its result, a retry's reason and a refusal each carry ESC sequences (and
/// a carriage return), and none of them reaches the screen.
#[test]
fn nothing_from_a_model_a_tool_or_a_server_drives_the_terminal() {
    use Step::Event;
    let esc = "\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2J\r";
    let shown = screen(vec![
        Event(0, request("__default__", 1)),
        Event(
            10,
            ev(
                "llm_stream",
                json!({"label": "__default__", "kind": "text_delta", "text": format!("hi{esc}\r\nthere")}),
            ),
        ),
        Event(20, response("__default__", &format!("hi{esc}"), 1)),
        Event(
            30,
            ev(
                "tool_call_started",
                json!({"label": null, "call_id": "c0",
            "tool": format!("read{esc}"), "arguments": {"path": esc}}),
            ),
        ),
        Event(
            40,
            ev(
                "tool_result",
                json!({"label": null, "call_id": "c0",
            "tool": format!("read{esc}"), "success": false, "content": esc, "summary": esc}),
            ),
        ),
        Event(
            50,
            ev(
                "tool_denied",
                json!({"label": null, "call_id": "c1", "tool": format!("x{esc}"), "reason": esc}),
            ),
        ),
        Event(
            60,
            ev(
                "llm_retry",
                json!({"label": "__default__", "attempt": 1, "delay_ms": 500,
                       "reason": format!("HTTP 500: {esc}")}),
            ),
        ),
    ]);
    assert!(shown.contains("hi"), "{shown}");
    assert!(shown.contains("there"), "{shown}");
    for c in ['\u{1b}', '\u{7}', '\r'] {
        assert!(!shown.contains(c), "{c:?} reached the screen: {shown:?}");
    }
}

#[test]
fn a_model_call_s_lines_written_in_place_are_the_lines_made_whole() {
    // The lines every model call prints are written part by part into one buffer; each must
    // be what cleaning the whole line made of clipped parts shows, for names and texts a
    // terminal would act on too.
    let long = "é".repeat(300);
    let wide = "x".repeat(400);
    for tool in ["read_file", "evil\x1b[2J\ntool", "日本\u{202e}x", ""] {
        for summary in [
            "",
            "File 9.\nSome notes",
            &long,
            "a\x1b]52;c;eA==\x07b\r\n",
            &wide,
        ] {
            for success in [true, false] {
                let e = ev(
                    "tool_result",
                    json!({"label": "__default__", "call_id": "c1", "tool": tool,
                           "success": success, "content": "", "summary": summary}),
                );
                let expected = one_line(if success {
                    format!("  <- {tool}: {}", clip(summary, 160))
                } else {
                    format!("  <- {tool} failed: {}", clip(summary, 200))
                });
                assert_eq!(describe(&e).as_deref(), Some(expected.as_str()));
            }
            let arguments = json!({"path": summary, "content": wide});
            let e = ev(
                "tool_call_started",
                json!({"label": "__default__", "call_id": "c1", "tool": tool,
                       "arguments": arguments}),
            );
            let expected = one_line(format!("  -> {tool} {}", clip(&arguments.to_string(), 160)));
            assert_eq!(describe(&e).as_deref(), Some(expected.as_str()));
        }
        for label in ["__default__", tool] {
            let mut e = response(label, "", 2);
            let expected = one_line(format!("{}model requested 2 tool call(s)", prefix(label)));
            assert_eq!(describe(&e).as_deref(), Some(expected.as_str()));
            // Appended after what the buffer holds, cleaned from its own start only.
            let mut out = String::from("kept\x1b");
            assert!(describe_into(&e, &mut out));
            assert_eq!(out, format!("kept\x1b{expected}"));
            e = response(label, "said\nthis", 0);
            let expected = one_line(format!(
                "{}model: {}",
                prefix(label),
                clip("said\nthis", 160)
            ));
            assert_eq!(describe(&e).as_deref(), Some(expected.as_str()));
        }
    }
}

#[test]
fn a_call_abandoned_by_a_stop_or_the_time_limit_leaves_no_spinner() {
    for end in [
        ev(
            "stop_requested",
            json!({"label": "__default__", "where": "llm_call"}),
        ),
        ev(
            "wall_time_exceeded",
            json!({"label": "__default__", "where": "llm_call", "elapsed_seconds": 31.0,
                   "max_wall_seconds": 30}),
        ),
    ] {
        let mut view = ProgressView::new(Some(4));
        let ms = Duration::from_millis;
        view.print(&[*request("__default__", 1)], ms(0));
        assert!(
            view.redraw(ms(100)).is_some(),
            "the spinner while the call is under way"
        );
        view.print(&[*end], ms(200));
        assert_eq!(view.spinner(ms(300)), None);
    }
}
