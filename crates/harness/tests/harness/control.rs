//! The control plane on a real harness and sandbox: every task-contract predicate checked
//! against the evidence a real run's transcript holds (seed 004 §6.1: the verifier must see
//! the `tool_result` events the run recorded), the stop modes, and work items in the
//! summary.

use std::path::Path;
use std::sync::Arc;

use lsm_harness::contract::FileFact;
use lsm_harness::core::coverage;
use lsm_harness::{AgentHarness, HarnessConfig, RunState, StopMode, TaskContract, read_journal};
use lsm_phase::{AgentIdentity, PhaseExecutor, PhaseRequest, RunOutcome, StopReason};
use lsm_providers::{ScriptedProvider, ScriptedResponse};
use lsm_sandbox::{Sandbox, SandboxConfig};
use serde_json::json;

/// A harness whose agent may read and write files in a fresh folder (no person asked).
fn file_harness(
    dir: &Path,
    script: Vec<ScriptedResponse>,
    mode: StopMode,
    contract: Option<TaskContract>,
) -> AgentHarness {
    let mut sandbox = SandboxConfig {
        allowed_read_paths: vec![dir.to_path_buf()],
        allowed_write_paths: vec![dir.to_path_buf()],
        working_dir: Some(dir.to_path_buf()),
        ..SandboxConfig::default()
    };
    for tool in ["write_file", "append_file"] {
        sandbox.require_user_permission.insert(tool.into(), false);
    }
    let sandbox = Arc::new(Sandbox::new(sandbox, lsm_sandbox::builtin::registry(), None).unwrap());
    let config = HarnessConfig {
        agents_folder: dir.join("Agents"),
        stop_mode: mode,
        work_items: true,
        ..HarnessConfig::default()
    };
    let identity = AgentIdentity {
        name: "writer".into(),
        tool_allowlist: vec![
            "read_file".into(),
            "write_file".into(),
            "append_file".into(),
        ],
        tier: Default::default(),
        topic: "write summary.md".into(),
    };
    let h = AgentHarness::new(
        identity,
        "You write files.",
        config,
        Arc::new(ScriptedProvider::new(script)),
        sandbox,
    );
    match contract {
        Some(c) => h.with_contract(c),
        None => h,
    }
}

fn call(name: &str, args: serde_json::Value) -> ScriptedResponse {
    ScriptedResponse::tool(name, args).with_usage(10, 5)
}

const EVERY_PREDICATE: &str = r#"
description = "summary.md written, nothing refused"
required_outputs = ["summary.md"]

[[require]]
kind = "tool_succeeded"
tool = "write_file"
args_match = { path = "summary.md" }

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
text = "summary written"

[[require]]
kind = "work_items_done"

[[require]]
kind = "no_denials"
"#;

#[tokio::test]
async fn every_predicate_is_met_by_the_evidence_of_a_real_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let contract: TaskContract = toml::from_str(EVERY_PREDICATE).unwrap();
    contract.validate().unwrap();
    let script = vec![
        call("work_item_add", json!({"title": "Write summary.md"})),
        call(
            "work_item_add",
            json!({"title": "Keep a plan", "role": "control"}),
        ),
        call(
            "write_file",
            json!({"path": "summary.md", "content": "# Summary\nShort.\n"}),
        ),
        call(
            "work_item_set_artifact",
            json!({"id": "w1", "path": "`./summary.md`"}),
        ),
        call(
            "work_item_set_artifact",
            json!({"id": "w2", "path": "summary.md"}),
        ),
        call(
            "work_item_set_artifact",
            json!({"id": "w2", "path": "plan.md"}),
        ),
        call("work_item_update", json!({"id": "w1", "status": "done"})),
        call("work_item_update", json!({"id": "w2", "status": "done"})),
        call("work_complete", json!({"summary": "The summary written."})),
    ];
    let mut h = file_harness(
        dir.path(),
        script,
        StopMode::StrictAutomation,
        Some(contract.clone()),
    );
    let request = PhaseRequest::new("write summary.md")
        .with_max_iterations(10)
        .completing_task();
    let r = h.run_bounded(request).await;
    assert_eq!(r.stop_reason, StopReason::Done, "{}", r.final_text);
    h.finish(RunOutcome::Completed).await;
    let run_dir = h.run_dir();
    drop(h);

    // The summary's ledger: every condition met, with its evidence.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("run_summary.json")).unwrap()).unwrap();
    assert_eq!(summary["stop_mode"], "strict_automation");
    assert_eq!(summary["contract"]["satisfied"], true, "{summary:#}");
    assert_eq!(summary["contract"]["coverage"].as_array().unwrap().len(), 8);
    assert_eq!(summary["work_items"][0]["status"], "done");
    // The final result lists the deliverable — its path cleaned — and not the control
    // item's plan, which could not take the deliverable's file.
    assert_eq!(
        summary["deliverables"],
        json!([{"id": "w1", "title": "Write summary.md", "artifact": "summary.md"}])
    );
    assert_eq!(summary["work_items"][1]["role"], "control");
    assert_eq!(summary["work_items"][1]["artifact"], "plan.md");

    // The same verdict from the transcript alone: fold it and check again.
    let journal = read_journal(&run_dir.join("transcript.jsonl")).unwrap();
    let state = RunState::fold(&journal.events);
    assert_eq!(
        state.contract.as_ref(),
        Some(&contract),
        "recorded in run_started"
    );
    let files = vec![(
        "summary.md".to_string(),
        FileFact::File {
            bytes: 18,
            text: Some("# Summary\nShort.\n".into()),
        },
    )];
    let cov = coverage(&state, &contract, &files);
    assert!(cov.satisfied, "{:?}", cov.unmet());
    let tool_item = &cov.items[0];
    assert!(
        tool_item
            .evidence
            .contains("call 1 of write_file succeeded"),
        "{tool_item:?}"
    );
}

#[tokio::test]
async fn every_predicate_is_unmet_when_the_transcript_lacks_its_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let contract: TaskContract = toml::from_str(EVERY_PREDICATE).unwrap();
    // Writes elsewhere, has a refused call, leaves its item open, answers something else.
    let script = vec![
        call("work_item_add", json!({"title": "Write summary.md"})),
        call("write_file", json!({"path": "other.md", "content": "x"})),
        call(
            "write_file",
            json!({"path": "/etc/summary.md", "content": "x"}),
        ),
        ScriptedResponse::text("I wrote other.md.").with_usage(10, 5),
        ScriptedResponse::text("I wrote other.md.").with_usage(10, 5),
        ScriptedResponse::text("Still other.md.").with_usage(10, 5),
    ];
    let mut h = file_harness(dir.path(), script, StopMode::Interactive, Some(contract));
    let request = PhaseRequest::new("write summary.md")
        .with_max_iterations(10)
        .completing_task();
    let r = h.run_bounded(request).await;
    assert_eq!(
        r.stop_reason,
        StopReason::Done,
        "interactive accepts after 2 retries"
    );
    h.finish(RunOutcome::Completed).await;
    let run_dir = h.run_dir();
    drop(h);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("run_summary.json")).unwrap()).unwrap();
    let unmet: Vec<&str> = summary["contract"]["unmet"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let kinds: Vec<&str> = unmet
        .iter()
        .map(|u| u.split(' ').next().unwrap().trim_end_matches(':'))
        .collect();
    assert_eq!(
        kinds,
        [
            "tool_succeeded",
            "file_exists",
            "file_contains",
            "artifact_created",
            "text_contains",
            "work_items_done",
            "no_denials",
            "required_output"
        ],
        "{unmet:#?}"
    );
    assert!(!summary["unmet_checks"].as_array().unwrap().is_empty());
    let lines = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    assert_eq!(
        lines.matches("\"event\":\"completion_objected\"").count(),
        2
    );
    assert_eq!(lines.matches("\"event\":\"stop_accepted\"").count(), 1);
}

#[tokio::test]
async fn a_strict_run_whose_contract_stays_unmet_ends_contract_unmet() {
    let dir = tempfile::tempdir().unwrap();
    let contract = TaskContract {
        required_outputs: vec!["summary.md".into()],
        ..TaskContract::default()
    };
    let declare = |s: &str| call("work_complete", json!({"summary": s}));
    let script = vec![
        declare("one"),
        declare("two"),
        declare("three"),
        declare("four"),
    ];
    let mut h = file_harness(
        dir.path(),
        script,
        StopMode::StrictAutomation,
        Some(contract),
    );
    let request = PhaseRequest::new("write summary.md")
        .with_max_iterations(10)
        .completing_task();
    let r = h.run_bounded(request).await;
    assert_eq!(r.stop_reason, StopReason::ContractUnmet);
    h.finish(RunOutcome::Stopped(StopReason::ContractUnmet))
        .await;
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(h.run_dir().join("run_summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["run_outcome"], "contract_unmet");
    assert_eq!(
        summary["contract"]["unmet"][0],
        "required_output summary.md: no such file"
    );
}

// ---------- completion with a report ----------

#[tokio::test]
async fn complete_ends_the_phase_with_a_report_whose_evidence_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "Soil holds carbon.\n").unwrap();
    let script = vec![
        call("read_file", json!({"path": "notes.md"})),
        call(
            "complete",
            json!({"summary": "Read the notes.",
                   "findings": [{"claim": "Soil holds carbon", "confidence": 0.9,
                                 "evidence_refs": ["call_1_0", "notes.md", "invented.md"]}],
                   "learnings": ["the notes are short"],
                   "escalations": ["nothing on tillage"]}),
        ),
    ];
    let mut h = file_harness(dir.path(), script, StopMode::Interactive, None);
    let r = h
        .run_bounded(PhaseRequest::new("read the notes").with_max_iterations(5))
        .await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(r.final_text, "Read the notes.");
    let report = h.report().unwrap();
    assert!(report.success);
    assert_eq!(report.findings[0].evidence_refs, ["call_1_0", "notes.md"]);
    assert_eq!(report.dropped_evidence, ["invented.md"]);
    assert_eq!(report.escalations, ["nothing on tillage"]);
    h.finish(RunOutcome::Completed).await;
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(h.run_dir().join("run_summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["report"]["learnings"][0], "the notes are short");
    assert_eq!(summary["report"]["dropped_evidence"][0], "invented.md");
    assert!(
        summary["report"].get("tokens_used").is_none(),
        "no accounting in it"
    );
}

#[tokio::test]
async fn a_model_that_just_stops_talking_completes_with_an_empty_report() {
    let dir = tempfile::tempdir().unwrap();
    let script = vec![ScriptedResponse::text("All done.").with_usage(10, 5)];
    let mut h = file_harness(dir.path(), script, StopMode::Interactive, None);
    assert!(h.report().is_none(), "no phase yet");
    let r = h.run_bounded(PhaseRequest::new("x")).await;
    assert_eq!(r.stop_reason, StopReason::Done);
    let report = h.report().unwrap();
    assert_eq!(report.summary, "All done.");
    assert!(report.success && report.findings.is_empty() && report.escalations.is_empty());
}
