use serde_json::{Value, json};

use super::*;

fn apply(items: &mut Vec<WorkItem>, tool: &str, args: Value) -> Result<Applied, String> {
    let applied = apply_call(items, tool, &args).map_err(|e| e.to_string())?;
    if let Some((_, item)) = &applied.change {
        upsert(items, item);
    }
    Ok(applied)
}

#[test]
fn items_are_added_updated_flagged_and_listed() {
    let mut items = Vec::new();
    apply(&mut items, WORK_ITEM_ADD, json!({"title": "Read notes.md"})).unwrap();
    apply(
        &mut items,
        WORK_ITEM_ADD,
        json!({"title": " Write summary.md ", "priority": "high"}),
    )
    .unwrap();
    assert_eq!(items[1].id, "w2");
    assert_eq!(items[1].title, "Write summary.md");
    assert_eq!(items[1].priority, Priority::High);
    apply(
        &mut items,
        WORK_ITEM_UPDATE,
        json!({"id": "w1", "status": "done"}),
    )
    .unwrap();
    apply(
        &mut items,
        WORK_ITEM_SET_ARTIFACT,
        json!({"id": "w2", "path": "summary.md"}),
    )
    .unwrap();
    assert_eq!(items[1].artifact.as_deref(), Some("summary.md"));
    apply(
        &mut items,
        WORK_ITEM_UPDATE,
        json!({"id": "w2", "status": "done"}),
    )
    .unwrap();
    assert!(items.iter().all(WorkItem::is_done));
    assert!(reminder(&items).is_none(), "nothing open, no reminder");
    let flagged = apply(
        &mut items,
        WORK_ITEM_FLAG_REVISION,
        json!({"id": "w2", "reason": "too long"}),
    )
    .unwrap();
    assert_eq!(
        flagged.change.map(|c| c.0),
        Some(WorkItemAction::RevisionFlagged)
    );
    assert_eq!(items[1].status, WorkStatus::Todo);
    assert!(items[1].needs_revision && items[1].is_open());
    let listed = apply(&mut items, WORK_ITEM_LIST, Value::Null).unwrap();
    assert!(listed.change.is_none());
    let v: Value = serde_json::from_str(&listed.result).unwrap();
    assert_eq!(
        (v["open"].clone(), v["total"].clone()),
        (json!(1), json!(2))
    );
    let r = reminder(&items).unwrap();
    assert!(r.starts_with("[work items: 1 open of 2"), "{r}");
    assert!(
        r.find("w2").unwrap() < r.find("w1").unwrap(),
        "open first: {r}"
    );
    assert_eq!(unfinished(&items).len(), 1);
    // Marking it done again clears the flag.
    apply(
        &mut items,
        WORK_ITEM_UPDATE,
        json!({"id": "w2", "status": "done"}),
    )
    .unwrap();
    assert!(!items[1].needs_revision);
}

#[test]
fn bad_calls_are_clear_errors_and_change_nothing() {
    let mut items = Vec::new();
    let e = apply(&mut items, WORK_ITEM_UPDATE, json!({"id": "w9"})).unwrap_err();
    assert!(e.contains("ledger is empty"), "{e}");
    apply(&mut items, WORK_ITEM_ADD, json!({"title": "x"})).unwrap();
    let e = apply(
        &mut items,
        WORK_ITEM_UPDATE,
        json!({"id": "w9", "status": "done"}),
    )
    .unwrap_err();
    assert!(e.contains("the items are w1"), "{e}");
    let e = apply(&mut items, WORK_ITEM_UPDATE, json!({"id": "w1"})).unwrap_err();
    assert!(e.contains("at least one of"), "{e}");
    let e = apply(&mut items, WORK_ITEM_ADD, json!({"title": "  "})).unwrap_err();
    assert!(e.contains("must not be empty"), "{e}");
    let e = apply(&mut items, WORK_ITEM_ADD, json!({"name": "x"})).unwrap_err();
    assert!(e.contains("invalid arguments for work_item_add"), "{e}");
    let e = apply(
        &mut items,
        WORK_ITEM_UPDATE,
        json!({"id": "w1", "status": "finished"}),
    )
    .unwrap_err();
    assert!(e.contains("finished"), "{e}");
    let long = "x".repeat(MAX_TITLE_CHARS + 1);
    assert!(apply(&mut items, WORK_ITEM_ADD, json!({"title": long})).is_err());
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].status, WorkStatus::Todo);
}

#[test]
fn the_ledger_is_bounded() {
    let mut items = Vec::new();
    for k in 0..MAX_ITEMS {
        apply(&mut items, WORK_ITEM_ADD, json!({"title": format!("t{k}")})).unwrap();
    }
    let e = apply(&mut items, WORK_ITEM_ADD, json!({"title": "one more"})).unwrap_err();
    assert!(e.contains("limit"), "{e}");
    let r = reminder(&items).unwrap();
    assert!(r.contains("… 70 more"), "{r}");
}

#[test]
fn every_tool_has_a_definition_whose_required_arguments_exist() {
    for tool in WORK_ITEM_TOOLS {
        let d = definition(tool).unwrap();
        let props = d.parameters["properties"].as_object().unwrap();
        for r in d.parameters["required"].as_array().into_iter().flatten() {
            assert!(props.contains_key(r.as_str().unwrap()), "{tool}: {r}");
        }
    }
    assert!(definition("write_file").is_none());
}

#[test]
fn artifact_paths_are_cleaned_of_what_a_model_wraps_around_them() {
    for (given, want) in [
        ("summary.md", "summary.md"),
        ("  `summary.md`  ", "summary.md"),
        ("\"./out/report.md\"", "out/report.md"),
        ("'summary.md'.", "summary.md"),
        ("summary.md.", "summary.md"),
        ("[the report](out/report.md)", "out/report.md"),
        ("<out/report.md>", "out/report.md"),
        ("file:///work/summary.md", "/work/summary.md"),
        ("`./notes/plan.md`,", "notes/plan.md"),
    ] {
        assert_eq!(clean_artifact_path(given).as_deref(), Ok(want), "{given:?}");
    }
    for (given, error) in [
        ("``", "names no file"),
        ("./", "names no file"),
        ("https://example.com/report.md", "is a URL"),
        ("a.md\nb.md", "line break"),
        ("../outside.md", "leaves the working folder"),
        ("out/../../x.md", "leaves the working folder"),
    ] {
        let e = clean_artifact_path(given).unwrap_err().to_string();
        assert!(e.contains(error), "{given:?}: {e}");
    }
}

#[test]
fn set_artifact_records_the_cleaned_path_and_says_what_it_cleaned() {
    let mut items = Vec::new();
    apply(
        &mut items,
        WORK_ITEM_ADD,
        json!({"title": "Write the summary"}),
    )
    .unwrap();
    let applied = apply(
        &mut items,
        WORK_ITEM_SET_ARTIFACT,
        json!({"id": "w1", "path": "`./summary.md`."}),
    )
    .unwrap();
    assert_eq!(items[0].artifact.as_deref(), Some("summary.md"));
    let told: Value = serde_json::from_str(&applied.result).unwrap();
    assert_eq!(told["cleaned_from"], "`./summary.md`.");
    assert_eq!(told["item"]["artifact"], "summary.md");
    let e = apply(
        &mut items,
        WORK_ITEM_SET_ARTIFACT,
        json!({"id": "w1", "path": "http://x/y.md"}),
    )
    .unwrap_err();
    assert!(e.contains("URL"), "{e}");
    assert_eq!(items[0].artifact.as_deref(), Some("summary.md"));
}

#[test]
fn items_have_roles_and_a_control_file_never_passes_for_a_deliverable() {
    let mut items = Vec::new();
    apply(
        &mut items,
        WORK_ITEM_ADD,
        json!({"title": "Write the summary"}),
    )
    .unwrap();
    apply(
        &mut items,
        WORK_ITEM_ADD,
        json!({"title": "Keep a plan", "role": "control"}),
    )
    .unwrap();
    apply(
        &mut items,
        WORK_ITEM_ADD,
        json!({"title": "Review the summary", "role": "check"}),
    )
    .unwrap();
    assert_eq!(
        items.iter().map(|i| i.role).collect::<Vec<_>>(),
        [Role::Deliverable, Role::Control, Role::Check]
    );
    assert!(
        items[1].line().contains("[todo, control]"),
        "{}",
        items[1].line()
    );
    apply(
        &mut items,
        WORK_ITEM_SET_ARTIFACT,
        json!({"id": "w1", "path": "summary.md"}),
    )
    .unwrap();
    // The plan may not be written into the deliverable's file…
    let e = apply(
        &mut items,
        WORK_ITEM_SET_ARTIFACT,
        json!({"id": "w2", "path": "./summary.md"}),
    )
    .unwrap_err();
    assert!(
        e.contains("summary.md is the artifact of w1 (deliverable)"),
        "{e}"
    );
    // …nor the deliverable become control by a change of role; a check may share it.
    apply(
        &mut items,
        WORK_ITEM_SET_ARTIFACT,
        json!({"id": "w2", "path": "plan.md"}),
    )
    .unwrap();
    let e = apply(
        &mut items,
        WORK_ITEM_UPDATE,
        json!({"id": "w1", "role": "control", "note": "x"}),
    );
    assert!(e.is_ok(), "w1's own file is not w2's: {e:?}");
    apply(
        &mut items,
        WORK_ITEM_UPDATE,
        json!({"id": "w1", "role": "deliverable"}),
    )
    .unwrap();
    let e = apply(
        &mut items,
        WORK_ITEM_SET_ARTIFACT,
        json!({"id": "w1", "path": "plan.md"}),
    )
    .unwrap_err();
    assert!(e.contains("plan.md is the artifact of w2 (control)"), "{e}");
    apply(
        &mut items,
        WORK_ITEM_SET_ARTIFACT,
        json!({"id": "w3", "path": "summary.md"}),
    )
    .unwrap();
}

#[test]
fn the_deliverables_are_the_artifacts_of_done_deliverable_items() {
    let mut items = Vec::new();
    for (title, role) in [
        ("Write the summary", "deliverable"),
        ("Keep a plan", "control"),
        ("Write the index", "deliverable"),
        ("Write the appendix", "deliverable"),
    ] {
        apply(
            &mut items,
            WORK_ITEM_ADD,
            json!({"title": title, "role": role}),
        )
        .unwrap();
    }
    for (id, path) in [("w1", "summary.md"), ("w2", "plan.md"), ("w3", "index.md")] {
        apply(
            &mut items,
            WORK_ITEM_SET_ARTIFACT,
            json!({"id": id, "path": path}),
        )
        .unwrap();
    }
    for id in ["w1", "w2", "w4"] {
        apply(
            &mut items,
            WORK_ITEM_UPDATE,
            json!({"id": id, "status": "done"}),
        )
        .unwrap();
    }
    // w2 is control, w3 is not done, w4 has no artifact.
    assert_eq!(
        deliverables(&items),
        vec![Deliverable {
            id: "w1".into(),
            title: "Write the summary".into(),
            artifact: "summary.md".into(),
        }]
    );
}
