//! Which tools a request offers, and the calls the core refuses without running them.

use super::*;

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
