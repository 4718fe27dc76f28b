//! The records' tests: the summary's fields, the journal read back, torn tails cut.

use super::*;
use serde_json::Value;

#[test]
fn constraints_are_rule_clauses_only_and_at_most_eight() {
    let c = extract_constraints(
        "Summarize the notes. Do not touch drafts; avoid jargon, must cite sources. Nobody cares. No emojis",
    );
    assert_eq!(
        c,
        [
            "Do not touch drafts",
            "avoid jargon",
            "must cite sources",
            "No emojis"
        ]
    );
    let many = "must a. ".repeat(12);
    assert_eq!(extract_constraints(&many).len(), 8);
}

#[test]
fn transcript_lines_are_numbered_json_objects() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Recorder::new(dir.path().join("run"), "r1".into(), "a".into(), true);
    r.append(RunEvent::Artifact { path: "a".into() }).unwrap();
    r.append(RunEvent::StopRequested {
        label: None,
        at: None,
    })
    .unwrap();
    let text = std::fs::read_to_string(r.transcript_path()).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["seq"], 1);
    assert_eq!(lines[1]["event"], "stop_requested");
    assert_eq!(lines[1]["run_id"], "r1");
    assert_eq!(lines[1]["schema_version"], SCHEMA_VERSION);
}

fn two_lines(dir: &Path) -> PathBuf {
    let mut r = Recorder::new(dir.join("run"), "r1".into(), "a".into(), true);
    r.append(RunEvent::Artifact { path: "a".into() }).unwrap();
    r.append(RunEvent::Artifact { path: "b".into() }).unwrap();
    r.transcript_path()
}

#[test]
fn a_journal_reads_back_as_the_envelopes_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = two_lines(dir.path());
    let j = read_journal(&path).unwrap();
    assert_eq!(j.warning, None);
    assert_eq!(j.events.len(), 2);
    assert_eq!(j.events[1].event, RunEvent::Artifact { path: "b".into() });
    assert_eq!(j.events[1].seq, 2);
}

#[test]
fn a_torn_last_line_is_ignored_and_reported_never_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = two_lines(dir.path());
    let mut f = OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(br#"{"seq":3,"ts":"x","run_id":"r1","schema_ver"#)
        .unwrap();
    let j = read_journal(&path).unwrap();
    assert_eq!(j.events.len(), 2);
    let w = j.warning.unwrap();
    assert!(w.contains("last line (3)") && w.contains("ignored"), "{w}");
}

#[test]
fn a_broken_line_before_the_last_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, "garbage\n{}\n").unwrap();
    let e = read_journal(&path).unwrap_err().to_string();
    assert!(e.contains("line 1"), "{e}");
}

#[test]
fn the_batched_policy_syncs_before_side_effects_and_at_phase_and_run_end_only() {
    let r = Recorder::new(PathBuf::new(), "r".into(), "a".into(), false)
        .with_fsync(JournalFsync::Batched, ["write".to_string()].into());
    let started = |tool: &str| RunEvent::ToolCallStarted {
        label: None,
        call_id: "c".into(),
        tool: tool.into(),
        arguments: serde_json::Value::Null,
    };
    assert!(r.must_sync(&started("write")));
    assert!(!r.must_sync(&started("read")));
    assert!(!r.must_sync(&RunEvent::Artifact { path: "a".into() }));
    assert!(r.must_sync(&RunEvent::RunFinished {
        status: "completed".into(),
        run_outcome: "done".into(),
        tokens_used: 0,
    }));
    let always = Recorder::new(PathBuf::new(), "r".into(), "a".into(), false)
        .with_fsync(JournalFsync::Always, HashSet::new());
    assert!(always.must_sync(&RunEvent::Artifact { path: "a".into() }));
    let never = Recorder::new(PathBuf::new(), "r".into(), "a".into(), false)
        .with_fsync(JournalFsync::Never, ["write".to_string()].into());
    assert!(!never.must_sync(&started("write")));
}

#[test]
fn without_records_an_envelope_a_sink_will_show_is_still_redacted() {
    let key = "records-secret-Qx81Lm2";
    assert!(lsm_sandbox::register_secret(key));
    let mut r = Recorder::new(PathBuf::new(), "r1".into(), "a".into(), false);
    let event = || RunEvent::LlmError {
        label: "__default__".into(),
        error: format!("refused {key}"),
        chain_broken: false,
    };
    let shown = r.append_shown(event(), true).unwrap();
    assert!(
        matches!(&shown.event, RunEvent::LlmError { error, .. } if error == "refused [REDACTED]"),
        "{shown:?}"
    );
    assert_eq!(shown.seq, 1);
    // Neither written nor shown: returned as it is, numbered all the same.
    assert_eq!(r.append_shown(event(), false).unwrap().seq, 2);
}

#[test]
fn secrets_never_reach_the_transcript_or_the_summary() {
    let key = "records-secret-Vb52Qk0";
    assert!(lsm_sandbox::register_secret(key));
    let dir = tempfile::tempdir().unwrap();
    let mut r = Recorder::new(dir.path().join("run"), "r1".into(), "a".into(), true);
    let written = r
        .append(RunEvent::LlmError {
            label: "__default__".into(),
            error: format!("refused {key} and sk-proj-abc*****************xyz"),
            chain_broken: false,
        })
        .unwrap();
    assert!(
        matches!(&written.event, RunEvent::LlmError { error, .. }
            if error == "refused [REDACTED] and [REDACTED]"),
        "what event sinks get is redacted too: {written:?}"
    );
    let summary = RunSummary {
        run_id: "r1".into(),
        agent_name: "a".into(),
        topic: format!("use {key}"),
        status: "failed".into(),
        run_outcome: "error".into(),
        error: Some(format!("LLM call failed: {key}")),
        schema_version: SCHEMA_VERSION,
        final_text: String::new(),
        started_at: String::new(),
        finished_at: String::new(),
        duration_seconds: 0.0,
        provider: "openai".into(),
        model: "m".into(),
        tools_used: BTreeMap::new(),
        tool_sequence: Vec::new(),
        approvals_denials: ApprovalsDenials::default(),
        artifacts_created: Vec::new(),
        token_usage: TokenUsage::default(),
        constraints: Vec::new(),
        context_tracking: ContextTracking::default(),
        memory: MemoryCounts::default(),
        stop_mode: crate::StopMode::Interactive,
        work_items: Vec::new(),
        contract: Some(ContractReport {
            description: Some(format!("keep {key} out")),
            ..ContractReport::default()
        }),
        unmet_checks: vec![format!("text_contains {key}: no")],
        report: None,
    };
    r.write_summary(&summary).unwrap();
    for file in [r.transcript_path(), r.summary_path()] {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(key), "{}: {text}", file.display());
        assert!(!text.contains("sk-proj"), "{}: {text}", file.display());
        assert!(text.contains("[REDACTED]"), "{}: {text}", file.display());
    }
}

#[test]
fn unwritable_folder_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not_a_dir");
    std::fs::write(&file, "x").unwrap();
    let mut r = Recorder::new(file.join("run"), "r1".into(), "a".into(), true);
    let e = r
        .append(RunEvent::Artifact { path: "a".into() })
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot create the run's log folder"), "{e}");
}
