//! Context compaction on a real harness: long runs whose tool results overflow a small
//! window (every prompt fits; the ladder's rungs in order; the system prompt and the open
//! work items survive), a failing summary call (the next rung, never the end of the run),
//! and a run killed right after a compaction (resumed, it sends the same next request).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use lsm_harness::compaction::{CompactionConfig, SUMMARY_PROMPT};
use lsm_harness::{AgentHarness, HarnessConfig, ResumePoint, RunEvent, read_journal};
use lsm_phase::{AgentIdentity, PhaseExecutor, PhaseRequest, RunOutcome, StopReason};
use lsm_providers::{
    LlmRequest, LlmResponse, Provider, ProviderError, ScriptedProvider, ScriptedResponse, Usage,
};
use lsm_sandbox::{
    RiskLevel, Sandbox, SandboxConfig, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use serde_json::{Value, json};

const WINDOW: u64 = 8192;

/// Returns 2.5 KB of text naming its argument: a large tool result every call.
struct Big;

#[async_trait::async_trait]
impl Tool for Big {
    fn name(&self) -> &str {
        "big"
    }
    fn description(&self) -> &str {
        "Returns a large page."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"page": {"type": "integer"}},
               "required": ["page"], "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let page = ctx.args.get("page").and_then(Value::as_u64).unwrap_or(0);
        Ok(ToolOutput::text(format!(
            "page {page}: {}",
            "lorem ipsum dolor sit amet ".repeat(95)
        )))
    }
}

/// How the summarizer answers.
#[derive(Clone, Copy)]
enum Summaries {
    /// Always a short summary.
    Answer,
    /// Every other call fails, the first among them.
    FailEveryOther,
    /// Every call fails.
    Fail,
}

/// The phase's answers come from a script; the compaction's summary calls (recognised by
/// their fixed instructions) are answered here, deterministically from the request.
struct Model {
    script: ScriptedProvider,
    summaries: Summaries,
    summary_calls: AtomicUsize,
    requests: Mutex<Vec<LlmRequest>>,
}

impl Model {
    fn new(script: Vec<ScriptedResponse>, summaries: Summaries) -> Self {
        Model {
            script: ScriptedProvider::new(script).without_recording(),
            summaries,
            summary_calls: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
        }
    }

    fn starting_at(mut self, served: usize) -> Self {
        // Phase answers served = all served minus the summary calls among them; a test that
        // resumes passes the phase answers' count.
        self.script = self.script.starting_at(served);
        self
    }

    fn requests(&self) -> Vec<LlmRequest> {
        self.requests.lock().unwrap().clone()
    }
}

fn is_summary(request: &LlmRequest) -> bool {
    request
        .messages
        .first()
        .is_some_and(|m| m.content == SUMMARY_PROMPT)
}

#[async_trait::async_trait]
impl Provider for Model {
    fn name(&self) -> &str {
        "scripted"
    }
    fn model(&self) -> &str {
        "scripted"
    }
    fn context_window(&self) -> Option<u64> {
        Some(WINDOW)
    }
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        if !is_summary(request) {
            return self.script.complete(request).await;
        }
        let n = self.summary_calls.fetch_add(1, Ordering::SeqCst);
        let fail = match self.summaries {
            Summaries::Answer => false,
            Summaries::FailEveryOther => n % 2 == 0,
            Summaries::Fail => true,
        };
        if fail {
            return Err(ProviderError::Call {
                provider: "scripted".into(),
                message: "the summarizer is down".into(),
            });
        }
        let lines = request.messages[1].content.lines().count();
        Ok(LlmResponse {
            text: format!("Earlier: {lines} lines of reading pages; nothing else happened."),
            tool_calls: Vec::new(),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 20,
                ..Usage::default()
            },
            response_id: None,
        })
    }
}

const SYSTEM: &str = "You read pages. The secret word is PAPAYA.";

fn harness(dir: &Path, model: Arc<Model>) -> AgentHarness {
    let registry = ToolRegistry::new().with(Arc::new(Big));
    let sandbox = Arc::new(Sandbox::new(SandboxConfig::default(), registry, None).unwrap());
    AgentHarness::new(identity(), SYSTEM, config(dir), model, sandbox)
}

fn identity() -> AgentIdentity {
    AgentIdentity {
        name: "reader".into(),
        tool_allowlist: vec!["big".into(), "work_item_add".into()],
        tier: Default::default(),
        topic: "read every page".into(),
    }
}

fn config(dir: &Path) -> HarnessConfig {
    HarnessConfig {
        agents_folder: dir.to_path_buf(),
        max_tokens_budget: 100_000_000,
        max_output_tokens: Some(1024),
        compaction: CompactionConfig::default(),
        ..HarnessConfig::default()
    }
}

/// A work item, then `pages` reads, then an answer.
fn script(pages: usize) -> Vec<ScriptedResponse> {
    let mut lines = vec![
        ScriptedResponse::tool("work_item_add", json!({"title": "Read every page"}))
            .with_usage(10, 5),
    ];
    for page in 0..pages {
        lines.push(ScriptedResponse::tool("big", json!({"page": page})).with_usage(10, 5));
    }
    lines.push(ScriptedResponse::text("All pages read.").with_usage(10, 5));
    lines
}

fn request() -> PhaseRequest {
    PhaseRequest::new("Read every page, one at a time.").with_max_iterations(400)
}

fn estimate(r: &LlmRequest) -> u64 {
    lsm_providers::estimate_tokens_conservatively(r)
}

fn events(run_dir: &Path) -> Vec<RunEvent> {
    read_journal(&run_dir.join("transcript.jsonl"))
        .unwrap()
        .events
        .into_iter()
        .map(|e| e.event)
        .collect()
}

#[tokio::test]
async fn a_300_iteration_run_never_overflows_an_8k_window_and_keeps_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(Model::new(script(300), Summaries::FailEveryOther));
    let mut h = harness(dir.path(), Arc::clone(&model));
    let r = h.run_bounded(request()).await;
    assert_eq!(r.stop_reason, StopReason::Done, "{}", r.final_text);
    h.finish(RunOutcome::Completed).await;
    let run_dir = h.run_dir();
    let summary = h.summary("completed", "done");
    drop(h);

    let requests = model.requests();
    let phase_requests: Vec<&LlmRequest> = requests.iter().filter(|r| !is_summary(r)).collect();
    assert_eq!(phase_requests.len(), 302);
    for (i, r) in requests.iter().enumerate() {
        let e = estimate(r);
        assert!(
            e <= WINDOW,
            "request {i}: {e} tokens > the {WINDOW}-token window"
        );
        let cap = r.options.max_output_tokens.unwrap_or(0);
        assert!(
            e + cap <= WINDOW,
            "request {i}: {e} + {cap} output tokens > the window"
        );
    }
    // The rules survive: the system prompt's fact and the open work item, in the last call.
    let last = phase_requests.last().unwrap();
    assert!(last.messages[0].content.contains("PAPAYA"));
    assert!(
        last.messages
            .iter()
            .any(|m| m.content.starts_with("[work items: 1 open of 1")),
        "the open work item is in the last request"
    );
    assert_eq!(
        last.messages[1].content, "Read every page, one at a time.",
        "the task stays"
    );

    // Every compaction took the rungs in the ladder's order; all three were needed.
    let order = ["elide_tool_results", "summarize", "drop_oldest"];
    let mut seen = std::collections::BTreeSet::new();
    let mut compactions = 0;
    for e in events(&run_dir) {
        if std::env::var_os("DEBUG_COMPACTION").is_some() && e.name().starts_with("compaction") {
            eprintln!(
                "{}",
                serde_json::to_string(&e)
                    .unwrap()
                    .chars()
                    .take(300)
                    .collect::<String>()
            );
        }
        if let RunEvent::CompactionFinished {
            steps,
            tokens_before,
            tokens_after,
            ..
        } = e
        {
            compactions += 1;
            let ranks: Vec<usize> = steps
                .iter()
                .map(|s| order.iter().position(|o| o == s).unwrap())
                .collect();
            assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{steps:?}");
            assert!(
                tokens_after < tokens_before,
                "{tokens_before} -> {tokens_after}"
            );
            seen.extend(steps);
        }
    }
    assert!(compactions >= 10, "{compactions} compactions");
    assert_eq!(seen.len(), 3, "{seen:?}");
    let failures = events(&run_dir)
        .iter()
        .filter(|e| matches!(e, RunEvent::CompactionSummaryFailed { .. }))
        .count();
    assert!(
        failures > 0,
        "a failing summary fell through to dropping turns"
    );
    let per_label = &summary.context_tracking.per_label["__default__"];
    assert_eq!(per_label.compactions, compactions);
    // The summary calls count against the run's budget.
    assert_eq!(
        summary.token_usage.tokens_used,
        302 * 15 + 120 * (model.summary_calls.load(Ordering::SeqCst) - failures) as u64
    );
}

#[tokio::test]
async fn a_failing_summary_falls_through_to_dropping_turns_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(Model::new(script(300), Summaries::Fail));
    let mut h = harness(dir.path(), Arc::clone(&model));
    let r = h.run_bounded(request()).await;
    assert_eq!(r.stop_reason, StopReason::Done, "{}", r.final_text);
    let run_dir = h.run_dir();
    drop(h);
    let evs = events(&run_dir);
    let failed = evs
        .iter()
        .filter(|e| matches!(e, RunEvent::CompactionSummaryFailed { called: true, .. }))
        .count();
    assert!(failed > 0);
    assert!(evs.iter().any(|e| matches!(
        e,
        RunEvent::CompactionFinished { steps, .. } if steps.last().is_some_and(|s| s == "drop_oldest")
    )));
    for r in model.requests() {
        assert!(estimate(&r) <= WINDOW);
    }
}

#[tokio::test]
async fn a_run_killed_right_after_a_compaction_sends_the_same_next_request() {
    let base = tempfile::tempdir().unwrap();
    let reference = Arc::new(Model::new(script(30), Summaries::Answer));
    let mut h = harness(&base.path().join("ref"), Arc::clone(&reference));
    assert_eq!(h.run_bounded(request()).await.stop_reason, StopReason::Done);
    let ref_dir = h.run_dir();
    drop(h);
    let journal = read_journal(&ref_dir.join("transcript.jsonl")).unwrap();
    let finished: Vec<usize> = journal
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.event, RunEvent::CompactionFinished { .. }))
        .map(|(i, _)| i + 1)
        .collect();
    assert!(finished.len() >= 2, "{} compactions", finished.len());
    // Also kill it right after a summary was asked for, and right after a rung.
    let mid: Vec<usize> = journal
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(
                e.event,
                RunEvent::CompactionSummaryRequested { .. } | RunEvent::CompactionStep { .. }
            )
        })
        .map(|(i, _)| i + 1)
        .take(4)
        .collect();
    for n in finished.iter().take(2).chain(&mid) {
        let dir = base.path().join(format!("cut-{n}"));
        let first = Arc::new(Model::new(script(30), Summaries::Answer));
        let mut h = harness(&dir, Arc::clone(&first));
        assert_eq!(h.run_bounded(request()).await.stop_reason, StopReason::Done);
        let run_dir = h.run_dir();
        drop(h);
        // Keep the first n lines, as after a SIGKILL.
        let path = run_dir.join("transcript.jsonl");
        let text = std::fs::read_to_string(&path).unwrap();
        let kept: String = text.lines().take(*n).map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, kept).unwrap();
        let _ = std::fs::remove_file(run_dir.join("run_summary.json"));

        let point = ResumePoint::open(&run_dir).unwrap();
        let served = point.model_calls_made() as usize;
        let summaries_served = read_journal(&path)
            .unwrap()
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e.event,
                    RunEvent::CompactionStep { usage: Some(_), .. }
                        | RunEvent::CompactionSummaryFailed { called: true, .. }
                )
            })
            .count();
        let resumed_model = Arc::new(
            Model::new(script(30), Summaries::Answer).starting_at(served - summaries_served),
        );
        let registry = ToolRegistry::new().with(Arc::new(Big));
        let sandbox = Arc::new(Sandbox::new(SandboxConfig::default(), registry, None).unwrap());
        let mut h = AgentHarness::resumed(
            point,
            identity(),
            SYSTEM,
            config(&dir),
            Arc::clone(&resumed_model) as Arc<dyn Provider>,
            sandbox,
        );
        assert_eq!(h.run_bounded(request()).await.stop_reason, StopReason::Done);
        drop(h);
        let expected = reference.requests();
        let got = resumed_model.requests();
        assert_eq!(
            got.first().map(|r| &r.messages),
            expected.get(served).map(|r| &r.messages),
            "cut after line {n}: the next request"
        );
        assert_eq!(got.len(), expected.len() - served, "cut after line {n}");
        assert_eq!(
            got.last().map(|r| &r.messages),
            expected.last().map(|r| &r.messages),
            "cut after line {n}: the same end"
        );
    }
}
