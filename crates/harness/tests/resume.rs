//! Resume: a run cut off after any journal line continues to the same end, with no model
//! call made twice and no side-effecting tool call run twice.
//!
//! A crash is simulated by cutting the finished run's journal after line N (what a process
//! killed right after writing line N leaves behind) and resuming from that folder.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lsm_harness::{
    AgentHarness, HarnessConfig, HarnessError, ResumePoint, RunEvent, RunUsage, read_journal,
};
use lsm_phase::{AgentIdentity, PhaseExecutor, PhaseRequest, RunOutcome, StopReason};
use lsm_providers::{ScriptedProvider, ScriptedResponse};
use lsm_sandbox::{
    RiskLevel, Sandbox, SandboxConfig, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use serde_json::{Value, json};

/// Counts its executions; `read_only` or not.
struct Counted {
    name: &'static str,
    risk: RiskLevel,
    calls: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Tool for Counted {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Counts."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}},
               "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        self.risk
    }
    fn needs_permission(&self) -> bool {
        false
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!("{} #{n}", self.name)))
    }
}

struct Tools {
    writes: Arc<AtomicUsize>,
    reads: Arc<AtomicUsize>,
}

fn sandbox() -> (Arc<Sandbox>, Tools) {
    let tools = Tools {
        writes: Arc::new(AtomicUsize::new(0)),
        reads: Arc::new(AtomicUsize::new(0)),
    };
    let registry = ToolRegistry::new()
        .with(Arc::new(Counted {
            name: "write",
            risk: RiskLevel::WritesWorkspace,
            calls: Arc::clone(&tools.writes),
        }))
        .with(Arc::new(Counted {
            name: "read",
            risk: RiskLevel::ReadOnly,
            calls: Arc::clone(&tools.reads),
        }));
    let sandbox = Sandbox::new(SandboxConfig::default(), registry, None).unwrap();
    (Arc::new(sandbox), tools)
}

fn script() -> Vec<ScriptedResponse> {
    let two = ScriptedResponse {
        tool_calls: vec![
            lsm_providers::ScriptedToolCall {
                id: None,
                name: "write".into(),
                arguments: json!({"n": 1}),
            },
            lsm_providers::ScriptedToolCall {
                id: None,
                name: "read".into(),
                arguments: json!({"n": 2}),
            },
        ],
        ..Default::default()
    };
    vec![
        ScriptedResponse::tool("read", json!({"n": 0})).with_usage(10, 3),
        two.with_usage(20, 5),
        ScriptedResponse::text("phase one done").with_usage(30, 2),
        ScriptedResponse::tool("write", json!({"n": 3})).with_usage(40, 4),
        ScriptedResponse::text("all done").with_usage(50, 1),
    ]
}

fn identity() -> AgentIdentity {
    AgentIdentity {
        name: "agent".into(),
        tool_allowlist: vec!["write".into(), "read".into()],
        tier: lsm_phase::LlmTier::Normal,
        topic: "topic".into(),
    }
}

fn config(dir: &Path) -> HarnessConfig {
    HarnessConfig {
        agents_folder: dir.to_path_buf(),
        ..HarnessConfig::default()
    }
}

/// The agent's orchestration: two phases, then finish.
async fn orchestrate(h: &mut AgentHarness) -> Vec<StopReason> {
    let a = h
        .run_bounded(PhaseRequest::new("first").with_max_iterations(5))
        .await;
    let b = h
        .run_bounded(
            PhaseRequest::new("second")
                .with_max_iterations(5)
                .with_context_label(Some("other")),
        )
        .await;
    h.finish(RunOutcome::Completed).await;
    vec![a.stop_reason, b.stop_reason]
}

struct Outcome {
    usage: RunUsage,
    writes: usize,
    responses: usize,
    run_dir: std::path::PathBuf,
}

async fn uninterrupted(dir: &Path) -> Outcome {
    let (sandbox, tools) = sandbox();
    let provider = Arc::new(ScriptedProvider::new(script()));
    let mut h = AgentHarness::new(identity(), "sys", config(dir), provider, sandbox);
    let stops = orchestrate(&mut h).await;
    assert_eq!(stops, [StopReason::Done, StopReason::Done]);
    let run_dir = h.run_dir();
    let usage = h.usage();
    drop(h);
    Outcome {
        usage,
        writes: tools.writes.load(Ordering::SeqCst),
        responses: count(&run_dir, "llm_response"),
        run_dir,
    }
}

fn count(run_dir: &Path, name: &str) -> usize {
    read_journal(&run_dir.join("transcript.jsonl"))
        .unwrap()
        .events
        .iter()
        .filter(|e| e.event.name() == name)
        .count()
}

/// Keep the first `n` lines of the journal (and a torn half of the next one, when asked);
/// the summary and the lock go, as after a SIGKILL.
fn cut(run_dir: &Path, n: usize, torn: bool) {
    let path = run_dir.join("transcript.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut kept: String = lines[..n].iter().map(|l| format!("{l}\n")).collect();
    if torn && n < lines.len() {
        kept.push_str(&lines[n][..lines[n].len() / 2]);
    }
    std::fs::write(&path, kept).unwrap();
    let _ = std::fs::remove_file(run_dir.join("run_summary.json"));
}

#[tokio::test]
async fn a_run_cut_after_any_line_resumes_to_the_same_end_without_repeating_anything() {
    let base = tempfile::tempdir().unwrap();
    let reference = uninterrupted(&base.path().join("ref")).await;
    let total_lines = read_journal(&reference.run_dir.join("transcript.jsonl"))
        .unwrap()
        .events
        .len();
    // Every line but the last (`run_finished`): a cut after it is a finished run.
    for n in 1..total_lines {
        for torn in [false, true] {
            let dir = base.path().join(format!("cut-{n}-{torn}"));
            let first = uninterrupted(&dir).await;
            let writes_before: usize = {
                // The write calls the cut journal shows as started (run before the crash).
                let text = std::fs::read_to_string(first.run_dir.join("transcript.jsonl")).unwrap();
                text.lines()
                    .take(n)
                    .filter(|l| l.contains("\"tool_call_started\"") && l.contains("\"write\""))
                    .count()
            };
            cut(&first.run_dir, n, torn);

            let point = ResumePoint::open(&first.run_dir).unwrap();
            assert_eq!(point.warning().is_some(), torn, "cut {n}");
            let served = point.model_calls_made() as usize;
            let (sandbox, tools) = sandbox();
            let provider = Arc::new(ScriptedProvider::new(script()).starting_at(served));
            let mut h = AgentHarness::resumed(
                point,
                identity(),
                "sys",
                config(&dir),
                provider.clone(),
                sandbox,
            );
            let stops = orchestrate(&mut h).await;
            let usage = h.usage();
            drop(h);
            assert_eq!(stops, [StopReason::Done, StopReason::Done], "cut {n}");
            assert_eq!(
                usage.tokens_used, reference.usage.tokens_used,
                "cut {n} torn {torn}: token totals"
            );
            assert_eq!(usage.llm_calls, reference.usage.llm_calls, "cut {n}");
            assert_eq!(
                served + provider.requests().len(),
                script().len(),
                "cut {n}: no response served twice"
            );
            assert_eq!(
                count(&first.run_dir, "llm_response"),
                reference.responses,
                "cut {n}"
            );
            let resumed_writes = tools.writes.load(Ordering::SeqCst);
            assert!(
                writes_before + resumed_writes <= reference.writes,
                "cut {n}: a write ran twice ({writes_before} + {resumed_writes})"
            );
            let journal = read_journal(&first.run_dir.join("transcript.jsonl")).unwrap();
            assert!(journal.warning.is_none(), "cut {n}: valid JSONL");
            let seqs: Vec<u64> = journal.events.iter().map(|e| e.seq).collect();
            assert_eq!(
                seqs,
                (1..=seqs.len() as u64).collect::<Vec<_>>(),
                "cut {n}: seq continues"
            );
            assert!(matches!(
                journal.events.last().unwrap().event,
                RunEvent::RunFinished { .. }
            ));
            assert!(first.run_dir.join("run_summary.json").exists());
            assert!(!first.run_dir.join(lsm_harness::lock::LOCK_FILE).exists());
            let _ = first.writes;
        }
    }
}

#[tokio::test]
async fn a_side_effecting_call_cut_before_its_result_is_reported_interrupted_and_a_read_runs_again()
{
    let base = tempfile::tempdir().unwrap();
    let first = uninterrupted(base.path()).await;
    let text = std::fs::read_to_string(first.run_dir.join("transcript.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let write_started = lines
        .iter()
        .position(|l| l.contains("\"tool_call_started\"") && l.contains("\"write\""))
        .unwrap();
    cut(&first.run_dir, write_started + 1, false);
    let point = ResumePoint::open(&first.run_dir).unwrap();
    let served = point.model_calls_made() as usize;
    let (sandbox, tools) = sandbox();
    let provider = Arc::new(ScriptedProvider::new(script()).starting_at(served));
    let mut h = AgentHarness::resumed(
        point,
        identity(),
        "sys",
        config(base.path()),
        provider.clone(),
        sandbox,
    );
    orchestrate(&mut h).await;
    drop(h);
    let journal = read_journal(&first.run_dir.join("transcript.jsonl")).unwrap();
    let repaired: Vec<&RunEvent> = journal
        .events
        .iter()
        .map(|e| &e.event)
        .filter(|e| matches!(e, RunEvent::ToolCallRepaired { .. }))
        .collect();
    assert!(
        matches!(repaired[..], [RunEvent::ToolCallRepaired { tool, action: lsm_harness::RepairAction::ReportInterrupted, .. }] if tool == "write"),
        "{repaired:?}"
    );
    // The model saw the interrupted result in its next request.
    let next = &provider.requests()[0];
    assert!(
        next.messages.iter().any(|m| m
            .content
            .contains("interrupted and may or may not have taken effect")),
        "{next:?}"
    );
    // The cut write is not run again; the read of the same batch runs.
    assert_eq!(
        tools.writes.load(Ordering::SeqCst),
        1,
        "only the second phase's write"
    );
    assert_eq!(tools.reads.load(Ordering::SeqCst), 1, "the batch's read");
}

#[tokio::test]
async fn a_second_resume_of_a_run_being_resumed_is_refused_and_a_finished_run_cannot_be_resumed() {
    let base = tempfile::tempdir().unwrap();
    let first = uninterrupted(base.path()).await;
    let e = ResumePoint::open(&first.run_dir).unwrap_err();
    assert!(matches!(e, HarnessError::Resume { .. }), "{e}");
    assert!(e.to_string().contains("already finished"), "{e}");
    cut(&first.run_dir, 3, false);
    let held = ResumePoint::open(&first.run_dir).unwrap();
    let e = ResumePoint::open(&first.run_dir).unwrap_err();
    assert!(matches!(e, HarnessError::Locked { .. }), "{e}");
    drop(held);
    ResumePoint::open(&first.run_dir).unwrap();
}

#[path = "resume/wall_time.rs"]
mod wall_time;

#[path = "resume/conversation.rs"]
mod conversation;
