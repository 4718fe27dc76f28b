//! The records' tests: the summary's fields, the journal read back, torn tails cut.

use std::collections::BTreeMap;
use std::fs::OpenOptions;

use lsm_run::summary::{
    ApprovalsDenials, ContextTracking, ContractReport, MemoryCounts, TokenUsage,
};

use super::*;
use crate::journal::read_journal;
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

#[test]
fn a_kept_timestamp_is_never_older_than_its_millisecond() {
    // Stamps are kept while the clock stays in one millisecond: each must still be the time
    // of its own call, to the millisecond, across the clock moving on several times.
    let mut r = Recorder::new(PathBuf::new(), "r".into(), "a".into(), false);
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 4 {
        let before = timestamp(Utc::now());
        let stamp = now_stamp();
        let after = timestamp(Utc::now());
        // Same width and layout: the text order is the time order.
        assert!(
            before <= stamp && stamp <= after,
            "{before} <= {stamp} <= {after}"
        );
        seen.insert(stamp);
    }
    // A step's lines share the stamp made for it.
    let records = r
        .append_all(
            vec![
                RunEvent::Artifact { path: "a".into() },
                RunEvent::Artifact { path: "b".into() },
            ],
            true,
        )
        .unwrap();
    assert_eq!(records[0].ts, records[1].ts);
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
        deliverables: Vec::new(),
        contract: Some(ContractReport {
            description: Some(format!("keep {key} out")),
            ..ContractReport::default()
        }),
        unmet_checks: vec![format!("text_contains {key}: no")],
        report: None,
        deferred_call: None,
        continues: None,
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

/// One write to a journal: the line numbers written, and whether it was synced.
type WriteCall = (Vec<u64>, bool);

/// A journal that remembers how it was written to: single lines and batches.
#[derive(Debug, Default, Clone)]
struct Calls(Arc<std::sync::Mutex<Vec<WriteCall>>>);

#[derive(Debug)]
struct CountingWriter(Calls);

impl JournalWriter for CountingWriter {
    fn append(
        &mut self,
        seq: u64,
        _event: &RunEvent,
        line: &[u8],
        sync: bool,
    ) -> Result<(), HarnessError> {
        assert!(line.ends_with(b"\n"));
        self.0.0.lock().unwrap().push((vec![seq], sync));
        Ok(())
    }

    fn append_lines(&mut self, lines: &[JournalLine<'_>], sync: bool) -> Result<(), HarnessError> {
        for l in lines {
            let v: Value = serde_json::from_slice(l.line).unwrap();
            assert_eq!(v["seq"], l.seq, "each line carries its own number");
        }
        let seqs = lines.iter().map(|l| l.seq).collect();
        self.0.0.lock().unwrap().push((seqs, sync));
        Ok(())
    }

    fn sync(&mut self) -> Result<(), HarnessError> {
        Ok(())
    }

    fn finished(&mut self, _summary: &Value) -> Result<(), HarnessError> {
        Ok(())
    }

    fn release(self: Box<Self>) {}

    fn location(&self) -> String {
        "memory".into()
    }
}

#[test]
fn a_steps_events_are_written_as_one_batch_synced_when_any_must_be() {
    let calls = Calls::default();
    let mut r = Recorder::new(PathBuf::new(), "r1".into(), "a".into(), true)
        .with_fsync(JournalFsync::Batched, ["write".to_string()].into())
        .continuing(0, Box::new(CountingWriter(calls.clone())));
    let started = |tool: &str| RunEvent::ToolCallStarted {
        label: None,
        call_id: "c".into(),
        tool: tool.into(),
        arguments: Value::Null,
    };
    let written = r
        .append_all(
            vec![RunEvent::Artifact { path: "a".into() }, started("read")],
            true,
        )
        .unwrap();
    assert_eq!(written.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
    r.append_all(
        vec![RunEvent::Artifact { path: "b".into() }, started("write")],
        false,
    )
    .unwrap();
    r.append(RunEvent::Artifact { path: "c".into() }).unwrap();
    assert_eq!(
        *calls.0.lock().unwrap(),
        [
            (vec![1, 2], false),
            (vec![3, 4], true), // a side effect's start must be durable before it runs
            (vec![5], false),
        ]
    );
    assert_eq!(r.next_seq(), 6);
}

#[test]
fn a_batch_in_the_file_store_reads_back_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = Recorder::new(dir.path().join("run"), "r1".into(), "a".into(), true);
    r.append(RunEvent::Artifact { path: "a".into() }).unwrap();
    r.append_all(
        vec![
            RunEvent::Artifact { path: "b".into() },
            RunEvent::Artifact { path: "c".into() },
        ],
        false,
    )
    .unwrap();
    let j = read_journal(&r.transcript_path()).unwrap();
    assert_eq!(j.warning, None);
    let got: Vec<(u64, RunEvent)> = j.events.into_iter().map(|e| (e.seq, e.event)).collect();
    assert_eq!(
        got,
        [
            (1, RunEvent::Artifact { path: "a".into() }),
            (2, RunEvent::Artifact { path: "b".into() }),
            (3, RunEvent::Artifact { path: "c".into() }),
        ]
    );
    // Without records nothing is written, and the numbering goes on all the same.
    let mut off = Recorder::new(dir.path().join("off"), "r2".into(), "a".into(), false);
    let shown = off
        .append_all(vec![RunEvent::Artifact { path: "x".into() }; 2], true)
        .unwrap();
    assert_eq!(shown.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
    assert!(!off.transcript_path().exists());
}

/// A line is written without serde's flattening and by sonic-rs; the bytes are those serde_json
/// writes for the derived serialization, for every shape an event takes: plain fields, skipped
/// ones, a flattened map, a flattened struct, a newtype of a map, and text that needs escaping
/// in the envelope and the event.
#[test]
fn a_line_is_the_envelopes_derived_serialization() {
    let mut data = serde_json::Map::new();
    data.insert("kind".into(), "text_delta".into());
    data.insert("text".into(), "a \"quoted\"\n\\ piece\u{1}".into());
    let events = [
        RunEvent::StopRequested {
            label: None,
            at: None,
        },
        RunEvent::Artifact {
            path: "ü/\u{7f}\t.md".into(),
        },
        RunEvent::LlmStream {
            label: "__default__".into(),
            data: data.clone(),
        },
        RunEvent::ToolEvent {
            kind: "note".into(),
            fields: crate::event::ToolSideEffect {
                label: Some("x".into()),
                tool: "t".into(),
                data: data.clone(),
            },
        },
        RunEvent::InteractionRequest(data),
        RunEvent::LlmError {
            label: "x".into(),
            error: "</script> \u{2028}".into(),
            chain_broken: true,
        },
    ];
    for (seq, event) in (1..).zip(events) {
        let record = Recorder::envelope_at("r\"1\\", event, seq, "2026-12-06T00:00:00.000Z".into());
        let mut line = Vec::new();
        write_envelope(&record, &mut line).unwrap();
        assert_eq!(
            String::from_utf8(line).unwrap(),
            serde_json::to_string(&record).unwrap()
        );
    }
}
