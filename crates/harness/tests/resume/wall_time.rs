//! The run's wall-clock limit, on a paused clock: a tool call that outlasts it pauses the
//! run (recorded, not finished), and a resumed run counts the time already spent.

use std::time::Duration;

use super::*;

/// A read-only tool that takes 100 s (of the paused clock).
struct Slow(Arc<AtomicUsize>);

#[async_trait::async_trait]
impl Tool for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> &str {
        "Takes 100 seconds."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(100)).await;
        Ok(ToolOutput::text("slow answer"))
    }
}

fn slow_sandbox(calls: &Arc<AtomicUsize>) -> Arc<Sandbox> {
    let config = SandboxConfig {
        // The tool's own time limit is not what this test is about.
        timeout_seconds: 1_000.0,
        ..SandboxConfig::default()
    };
    Arc::new(
        Sandbox::new(
            config,
            ToolRegistry::new().with(Arc::new(Slow(Arc::clone(calls)))),
            None,
        )
        .unwrap(),
    )
}

fn slow_script() -> Vec<ScriptedResponse> {
    vec![
        ScriptedResponse::tool("slow", json!({})).with_usage(10, 1),
        ScriptedResponse::text("finished").with_usage(10, 1),
    ]
}

fn limited(dir: &Path, seconds: u64) -> HarnessConfig {
    HarnessConfig {
        max_wall_seconds: Some(seconds),
        ..config(dir)
    }
}

fn slow_identity() -> AgentIdentity {
    AgentIdentity {
        tool_allowlist: vec!["slow".into()],
        ..identity()
    }
}

fn events_named(run_dir: &Path, name: &str) -> Vec<Value> {
    std::fs::read_to_string(run_dir.join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == name)
        .collect()
}

/// Move every `ts` of the journal but the last line's `by` into the past, as if the process
/// that wrote it had run that much longer.
fn stretch_last_process(run_dir: &Path, by: chrono::Duration) {
    let path = run_dir.join("transcript.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let mut e: Value = serde_json::from_str(line).unwrap();
        if i + 1 < lines.len() {
            let ts = chrono::DateTime::parse_from_rfc3339(e["ts"].as_str().unwrap()).unwrap();
            e["ts"] = json!((ts - by).to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        }
        out.push_str(&e.to_string());
        out.push('\n');
    }
    std::fs::write(&path, out).unwrap();
}

/// The run in `run_dir` resumed with a limit of `seconds`.
fn resume_slow(
    run_dir: &Path,
    base: &Path,
    seconds: u64,
    calls: &Arc<AtomicUsize>,
) -> AgentHarness {
    let point = ResumePoint::open(run_dir).unwrap();
    let served = point.model_calls_made() as usize;
    AgentHarness::resumed(
        point,
        slow_identity(),
        "sys",
        limited(base, seconds),
        Arc::new(ScriptedProvider::new(slow_script()).starting_at(served)),
        slow_sandbox(calls),
    )
}

#[tokio::test(start_paused = true)]
async fn a_run_out_of_time_pauses_and_a_resumed_one_counts_the_time_already_spent() {
    let base = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let mut h = AgentHarness::new(
        slow_identity(),
        "sys",
        limited(base.path(), 30),
        Arc::new(ScriptedProvider::new(slow_script())),
        slow_sandbox(&calls),
    );
    let r = h
        .run_bounded(PhaseRequest::new("go").with_max_iterations(5))
        .await;
    assert_eq!(r.stop_reason, StopReason::WallTimeExceeded);
    h.finish(RunOutcome::Stopped(r.stop_reason)).await;
    let run_dir = h.run_dir();
    drop(h);
    let paused = events_named(&run_dir, "wall_time_exceeded");
    assert_eq!(paused.len(), 1, "{paused:?}");
    assert_eq!(paused[0]["where"], "tools");
    assert_eq!(paused[0]["max_wall_seconds"], 30);
    assert!(paused[0]["elapsed_seconds"].as_f64().unwrap() >= 30.0);
    // Paused, not finished: no phase_ended, no run_finished; the summary says why.
    assert!(events_named(&run_dir, "phase_ended").is_empty());
    assert!(events_named(&run_dir, "run_finished").is_empty());
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run_summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["run_outcome"], "wall_time_exceeded");

    // The first process spent 25 s more than the paused clock says: a limit of 40 leaves
    // the resumed run about 15 s, not 40 — less than the 100 s read it runs again.
    stretch_last_process(&run_dir, chrono::Duration::seconds(25));
    let mut h = resume_slow(&run_dir, base.path(), 40, &calls);
    let started = tokio::time::Instant::now();
    let r = h
        .run_bounded(PhaseRequest::new("go").with_max_iterations(5))
        .await;
    assert_eq!(r.stop_reason, StopReason::WallTimeExceeded);
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(16),
        "the time already spent counts: {waited:?}"
    );
    h.finish(RunOutcome::Stopped(r.stop_reason)).await;
    drop(h);
    assert_eq!(events_named(&run_dir, "wall_time_exceeded").len(), 2);

    // With room enough, the resumed run repairs the read, runs it again and finishes.
    let mut h = resume_slow(&run_dir, base.path(), 1_000, &calls);
    let r = h
        .run_bounded(PhaseRequest::new("go").with_max_iterations(5))
        .await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(r.final_text, "finished");
    h.finish(RunOutcome::Completed).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3, "one try per process");
    assert_eq!(events_named(&run_dir, "run_finished").len(), 1);
    assert_eq!(events_named(&run_dir, "tool_call_repaired").len(), 2);
}
