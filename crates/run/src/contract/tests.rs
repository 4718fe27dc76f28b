//! Contracts: their TOML form, validation, and each predicate met and unmet. Each predicate
//! is also checked against a real run's transcript in `tests/harness.rs`.

use lsm_phase::{ToolCallRecord, ToolOutcome};
use serde_json::json;

use super::*;
use crate::work_items::{Priority, WorkStatus};

fn parse(text: &str) -> Result<TaskContract, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

const FULL: &str = r#"
description = "Summarize notes.md"
required_outputs = ["summary.md"]

[[require]]
kind = "tool_succeeded"
tool = "write_file"
args_match = { path = "*summary.md" }

[[require]]
kind = "file_exists"
path = "summary.md"

[[require]]
kind = "file_contains"
path = "summary.md"
text = "Summary"

[[require]]
kind = "artifact_created"
name_glob = "summary*.md"

[[require]]
kind = "text_contains"
text = "done"

[[require]]
kind = "work_items_done"

[[require]]
kind = "no_denials"
"#;

#[test]
fn every_predicate_kind_reads_from_toml() {
    let c = parse(FULL).unwrap();
    c.validate().unwrap();
    assert_eq!(c.require.len(), 7);
    assert_eq!(c.file_paths(), ["summary.md"]);
    assert_eq!(
        c.require[0],
        Predicate::ToolSucceeded {
            tool: "write_file".into(),
            args_match: Some(json!({"path": "*summary.md"}).as_object().unwrap().clone()),
        }
    );
    assert_eq!(c.require[5], Predicate::WorkItemsDone);
    // The JSON form (run_started) round-trips.
    let back: TaskContract = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
    assert_eq!(back, c);
}

#[test]
fn mistakes_are_refused_with_a_reason() {
    let e = parse("[[require]]\nkind = \"file_exist\"\npath = \"a\"\n").unwrap_err();
    assert!(e.contains("file_exist"), "{e}");
    let e = parse("[[require]]\nkind = \"file_exists\"\npaht = \"a\"\n").unwrap_err();
    assert!(e.contains("paht"), "{e}");
    let e = parse("requires = []\n").unwrap_err();
    assert!(e.contains("requires"), "{e}");
    let e = parse("").unwrap().validate().unwrap_err();
    assert!(e.to_string().contains("no condition"), "{e}");
    let c = parse("[[require]]\nkind = \"artifact_created\"\nname_glob = \"[a\"\n").unwrap();
    let e = c.validate().unwrap_err();
    assert!(e.to_string().contains("artifact_created"), "{e}");
    let c = parse("[[require]]\nkind = \"text_contains\"\ntext = \"\"\n").unwrap();
    assert!(c.validate().is_err());
}

fn call(name: &str, args: serde_json::Value, ok: bool) -> ToolCallRecord {
    ToolCallRecord {
        name: name.into(),
        arguments: args,
        outcome: if ok {
            ToolOutcome::Result("Wrote 12 bytes".into())
        } else {
            ToolOutcome::Error("denied".into())
        },
    }
}

fn item(status: WorkStatus) -> WorkItem {
    WorkItem {
        id: "w1".into(),
        title: "t".into(),
        status,
        priority: Priority::Normal,
        role: Default::default(),
        artifact: None,
        needs_revision: false,
        note: None,
    }
}

fn check_one(p: Predicate, ev: &Evidence<'_>) -> (bool, String) {
    let c = TaskContract {
        require: vec![p],
        ..TaskContract::default()
    };
    let cov = evaluate(&c, ev);
    (cov.satisfied, cov.items[0].evidence.clone())
}

#[test]
fn each_predicate_is_met_by_its_evidence_and_unmet_without_it() {
    let failed = call("write_file", json!({"path": "summary.md"}), false);
    let other = call("write_file", json!({"path": "other.md"}), true);
    let good = call("write_file", json!({"path": "./summary.md"}), true);
    let files = vec![
        (
            "summary.md".to_string(),
            FileFact::File {
                bytes: 12,
                text: Some("# Summary\n".into()),
            },
        ),
        (
            "empty.md".to_string(),
            FileFact::File {
                bytes: 0,
                text: Some(String::new()),
            },
        ),
        ("gone.md".to_string(), FileFact::Missing),
    ];
    let artifacts = vec!["/ws/summary_1.md".to_string()];
    let items = vec![item(WorkStatus::Done)];
    let calls_bad = [&failed, &other];
    let calls_good = [&failed, &other, &good];
    let base = Evidence {
        calls: &calls_bad,
        final_text: "All DONE.",
        artifacts: &artifacts,
        denials: 0,
        work_items: &items,
        files: &files,
    };
    let tool = Predicate::ToolSucceeded {
        tool: "write_file".into(),
        args_match: Some(json!({"path": "*summary.md"}).as_object().unwrap().clone()),
    };
    let (met, why) = check_one(tool.clone(), &base);
    assert!(!met, "the matching call failed");
    assert!(why.contains("none succeeded"), "{why}");
    let (met, why) = check_one(
        tool,
        &Evidence {
            calls: &calls_good,
            ..base
        },
    );
    assert!(met, "{why}");
    assert!(why.contains("call 3 of write_file succeeded"), "{why}");
    let exact = Predicate::ToolSucceeded {
        tool: "write_file".into(),
        args_match: Some(json!({"path": "summary.md"}).as_object().unwrap().clone()),
    };
    assert!(
        !check_one(
            exact,
            &Evidence {
                calls: &calls_good,
                ..base
            }
        )
        .0,
        "equality, not glob"
    );
    let never = Predicate::ToolSucceeded {
        tool: "append_file".into(),
        args_match: None,
    };
    assert_eq!(check_one(never, &base).1, "append_file was never called");

    assert!(
        check_one(
            Predicate::FileExists {
                path: "summary.md".into()
            },
            &base
        )
        .0
    );
    let (met, why) = check_one(
        Predicate::FileExists {
            path: "gone.md".into(),
        },
        &base,
    );
    assert!(!met && why == "no such file", "{why}");
    let contains = |text: &str| Predicate::FileContains {
        path: "summary.md".into(),
        text: text.into(),
    };
    assert!(check_one(contains("Summary"), &base).0);
    assert!(!check_one(contains("summary"), &base).0, "case-sensitive");

    let glob = |g: &str| Predicate::ArtifactCreated {
        name_glob: g.into(),
    };
    assert!(check_one(glob("summary*.md"), &base).0);
    assert!(check_one(glob("/ws/*.md"), &base).0, "a path glob");
    assert!(!check_one(glob("report*.md"), &base).0);

    let text = |t: &str| Predicate::TextContains { text: t.into() };
    assert!(check_one(text("done"), &base).0, "case-insensitive");
    assert!(!check_one(text("failed"), &base).0);

    assert!(check_one(Predicate::WorkItemsDone, &base).0);
    let open = vec![item(WorkStatus::Doing)];
    let (met, why) = check_one(
        Predicate::WorkItemsDone,
        &Evidence {
            work_items: &open,
            ..base
        },
    );
    assert!(!met && why.contains("w1 [doing]"), "{why}");

    assert!(check_one(Predicate::NoDenials, &base).0);
    let (met, why) = check_one(Predicate::NoDenials, &Evidence { denials: 2, ..base });
    assert!(!met && why.contains("2 call(s)"), "{why}");
}

#[test]
fn required_outputs_must_be_non_empty_files_and_the_ledger_lists_the_unmet() {
    let files = vec![
        (
            "a.md".to_string(),
            FileFact::File {
                bytes: 0,
                text: None,
            },
        ),
        (
            "b.md".to_string(),
            FileFact::Unusable {
                reason: "/etc/b.md is outside the read roots".into(),
            },
        ),
        (
            "c.md".to_string(),
            FileFact::File {
                bytes: 3,
                text: None,
            },
        ),
    ];
    let c = TaskContract {
        required_outputs: vec!["a.md".into(), "b.md".into(), "c.md".into()],
        ..TaskContract::default()
    };
    let cov = evaluate(
        &c,
        &Evidence {
            calls: &[],
            final_text: "",
            artifacts: &[],
            denials: 0,
            work_items: &[],
            files: &files,
        },
    );
    assert!(!cov.satisfied);
    assert_eq!(
        cov.unmet(),
        [
            "required_output a.md: the file is empty",
            "required_output b.md: /etc/b.md is outside the read roots"
        ]
    );
    assert!(cov.items[2].met);
}
