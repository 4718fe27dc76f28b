use super::*;
use proptest::prelude::*;
use serde_json::json;

fn sample() -> PhaseResult {
    PhaseResult {
        final_text: "all done".into(),
        tool_calls: vec![
            ToolCallRecord {
                name: "read_file".into(),
                arguments: json!({"path": "notes.md"}),
                outcome: ToolOutcome::Result("hello".into()),
            },
            ToolCallRecord {
                name: "bash".into(),
                arguments: json!({"command": "ls; rm -rf /"}),
                outcome: ToolOutcome::Error("chaining refused".into()),
            },
        ],
        stop_reason: StopReason::Done,
    }
}

#[test]
fn phase_result_is_constructed_with_its_three_fields() {
    let r = sample();
    assert_eq!(r.final_text, "all done");
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(r.stop_reason, StopReason::Done);
}

#[test]
fn serialized_phase_result_has_exactly_three_keys() {
    let v = serde_json::to_value(sample()).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["final_text", "stop_reason", "tool_calls"]);
}

#[test]
fn no_accounting_field_exists_on_the_wire_or_can_be_smuggled_in() {
    let v = serde_json::to_value(sample()).unwrap();
    for forbidden in ["tokens_used", "cost_usd", "cost", "usage", "budget"] {
        assert!(v.get(forbidden).is_none(), "{forbidden} must not exist");
    }
    // The type is closed: an extra accounting key is refused on the way in, so no
    // serialized form carrying one can be turned into a PhaseResult either.
    let mut smuggled = v.clone();
    smuggled["tokens_used"] = json!(1234);
    let err = serde_json::from_value::<PhaseResult>(smuggled).unwrap_err();
    assert!(err.to_string().contains("tokens_used"), "{err}");
    let mut smuggled = v;
    smuggled["cost_usd"] = json!(0.5);
    assert!(serde_json::from_value::<PhaseResult>(smuggled).is_err());
}

#[test]
fn every_stop_reason_round_trips_in_snake_case() {
    let expected = [
        "done",
        "max_iterations",
        "budget_exhausted",
        "stop_requested",
        "blocked",
        "error",
        "stalled",
        "contract_unmet",
        "wall_time_exceeded",
        "deferred",
    ];
    assert_eq!(StopReason::ALL.len(), expected.len());
    for (reason, name) in StopReason::ALL.iter().zip(expected) {
        let wire = serde_json::to_value(reason).unwrap();
        assert_eq!(wire, json!(name));
        assert_eq!(reason.as_str(), name);
        assert_eq!(reason.to_string(), name);
        let back: StopReason = serde_json::from_value(wire).unwrap();
        assert_eq!(back, *reason);
        let result = PhaseResult::empty(*reason);
        let back: PhaseResult =
            serde_json::from_str(&serde_json::to_string(&result).unwrap()).unwrap();
        assert_eq!(back, result);
    }
    assert!(serde_json::from_value::<StopReason>(json!("Done")).is_err());
    assert!(serde_json::from_value::<StopReason>(json!("finished")).is_err());
}

#[test]
fn tool_outcome_is_result_or_error_on_the_wire() {
    let v = serde_json::to_value(&sample().tool_calls).unwrap();
    assert_eq!(v[0]["outcome"], json!({"result": "hello"}));
    assert_eq!(v[1]["outcome"], json!({"error": "chaining refused"}));
    assert!(sample().tool_calls[1].outcome.is_error());
    assert!(!sample().tool_calls[0].outcome.is_error());
}

#[test]
fn only_budget_time_and_stop_end_a_multi_phase_run() {
    let ending: Vec<_> = StopReason::ALL
        .iter()
        .filter(|r| r.ends_run())
        .copied()
        .collect();
    assert_eq!(
        ending,
        [
            StopReason::BudgetExhausted,
            StopReason::StopRequested,
            StopReason::WallTimeExceeded,
            StopReason::Deferred
        ]
    );
}

#[test]
fn phase_request_defaults_match_the_seed_signature() {
    let r: PhaseRequest = serde_json::from_value(json!({"user_message": "hi"})).unwrap();
    assert_eq!(r, PhaseRequest::new("hi"));
    assert_eq!(r.max_iterations, 10);
    assert!(r.continue_context);
    assert_eq!(r.tool_names, None);
    assert_eq!(r.context_label, None);
    assert_eq!(r.direct_tool_calls, None);
    let d = PhaseRequest::direct(vec![]);
    assert_eq!(d.direct_tool_calls, Some(vec![]));
}

proptest! {
    #[test]
    fn any_phase_result_round_trips(text in ".{0,64}", name in "[a-z_]{1,12}", ok in any::<bool>(), idx in 0usize..6) {
        let r = PhaseResult {
            final_text: text.clone(),
            tool_calls: vec![ToolCallRecord {
                name,
                arguments: json!({"x": text}),
                outcome: if ok { ToolOutcome::Result("r".into()) } else { ToolOutcome::Error("e".into()) },
            }],
            stop_reason: StopReason::ALL[idx],
        };
        let back: PhaseResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        prop_assert_eq!(back, r);
    }
}
