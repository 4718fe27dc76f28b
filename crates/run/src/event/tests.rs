//! The event type's tests: names, the wire format, the schema.

use super::*;
use serde_json::json;

fn envelope(event: RunEvent) -> EventEnvelope {
    EventEnvelope {
        seq: 3,
        ts: "2025-01-01T00:00:00.000Z".into(),
        run_id: "r1".into(),
        schema_version: SCHEMA_VERSION,
        event,
    }
}

#[test]
fn an_envelope_is_one_flat_object_named_by_its_event_key() {
    let e = envelope(RunEvent::StopRequested {
        label: Some("x".into()),
        at: Some("tools".into()),
    });
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(
        v,
        json!({"seq": 3, "ts": "2025-01-01T00:00:00.000Z", "run_id": "r1",
               "schema_version": 2, "event": "stop_requested", "label": "x",
               "where": "tools"})
    );
    let back: EventEnvelope = serde_json::from_value(v).unwrap();
    assert_eq!(back, e);
}

#[test]
fn interaction_and_memory_events_keep_their_fields_and_round_trip() {
    let e = RunEvent::from_parts(
        "interaction_request",
        json!({"request_id": "perm-1", "seq": 99, "prompt": "ok?"}),
    )
    .unwrap();
    assert_eq!(e.name(), "interaction_request");
    let v = serde_json::to_value(envelope(e.clone())).unwrap();
    assert_eq!(v["request_id"], "perm-1");
    assert_eq!(v["seq"], 3, "a producer cannot set the envelope's keys");
    let back: EventEnvelope = serde_json::from_value(v).unwrap();
    assert_eq!(back.event, e);

    let m = RunEvent::MemoryWritten(ToolSideEffect {
        label: None,
        tool: "remember".into(),
        data: json!({"id": "m1", "text": "t"})
            .as_object()
            .unwrap()
            .clone(),
    });
    let v = serde_json::to_value(envelope(m.clone())).unwrap();
    assert_eq!(
        (v["id"].clone(), v["tool"].clone()),
        (json!("m1"), json!("remember"))
    );
    assert_eq!(serde_json::from_value::<EventEnvelope>(v).unwrap().event, m);
}

#[test]
fn an_unknown_name_is_an_error_naming_it() {
    let e = RunEvent::from_parts("no_such_event", json!({})).unwrap_err();
    assert!(e.to_string().contains("no_such_event"), "{e}");
    assert!(RunEvent::from_parts("artifact", json!(["x"])).is_err());
}

#[test]
fn summaries_are_bounded_and_on_one_line() {
    assert_eq!(summarize("a\nb"), "a b");
    let long = "x".repeat(500);
    assert_eq!(summarize(&long).chars().count(), TOOL_SUMMARY_CHARS + 1);
    // Cut after exactly that many characters, multi-byte ones counted as one.
    let wide = format!("é\r\n{}", "ü".repeat(TOOL_SUMMARY_CHARS));
    let summary = summarize(&wide);
    assert!(
        summary.starts_with("é  ü") && summary.ends_with("ü…"),
        "{summary}"
    );
    assert_eq!(summary.chars().count(), TOOL_SUMMARY_CHARS + 1);
    let exact = "ü".repeat(TOOL_SUMMARY_CHARS);
    assert_eq!(summarize(&exact), exact);
    assert_eq!(summarize(""), "");
    // An ASCII head is cut by its bytes: just before a wide character that comes next, and
    // after that many characters when a wide one comes just before the limit.
    let ascii_then_wide = format!("{}ü{}", "a".repeat(TOOL_SUMMARY_CHARS), "b".repeat(9));
    assert_eq!(
        summarize(&ascii_then_wide),
        format!("{}…", "a".repeat(TOOL_SUMMARY_CHARS))
    );
    let wide_last = format!("{}ü{}", "a".repeat(TOOL_SUMMARY_CHARS - 1), "b".repeat(9));
    assert_eq!(
        summarize(&wide_last),
        format!("{}ü…", "a".repeat(TOOL_SUMMARY_CHARS - 1))
    );
    let one_more = "c".repeat(TOOL_SUMMARY_CHARS + 1);
    assert_eq!(
        summarize(&one_more),
        format!("{}…", "c".repeat(TOOL_SUMMARY_CHARS))
    );
}

#[test]
fn the_committed_schema_is_the_generated_one() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/run-event.schema.json"
    );
    let generated = serde_json::to_string_pretty(&event_schema()).unwrap() + "\n";
    if std::env::var_os("LSM_UPDATE_SCHEMA").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/run-event.schema.json differs from the RunEvent schema; regenerate it with \
         LSM_UPDATE_SCHEMA=1 cargo test -p lsm-run the_committed_schema"
    );
}
