//! Read-only calls of one answer run at the same time on the real driver: a tool that waits
//! for its partners only finishes when they run together; the journal keeps the answer's
//! order; `max_parallel_tools = 1` runs them one by one (and the waiting tool never finishes).

use lsm_providers::ScriptedToolCall;

use super::*;

/// Waits until `parties` calls of it are running at once, then answers its `text`.
struct Meet(Arc<tokio::sync::Barrier>);

#[async_trait::async_trait]
impl Tool for Meet {
    fn name(&self) -> &str {
        "meet"
    }
    fn description(&self) -> &str {
        "Wait for the others."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.wait().await;
        Ok(ToolOutput::text(format!("met:{}", ctx.str_arg("text")?)))
    }
}

/// A harness whose model asks for three `meet` calls in one answer, then is done.
fn meeting(dir: &std::path::Path, max_parallel_tools: usize) -> AgentHarness {
    let registry = ToolRegistry::new().with(Arc::new(Meet(Arc::new(tokio::sync::Barrier::new(3)))));
    let sandbox = Arc::new(
        Sandbox::new(
            SandboxConfig {
                working_dir: Some(dir.to_path_buf()),
                ..SandboxConfig::default()
            },
            registry,
            None,
        )
        .unwrap(),
    );
    let calls = ["x", "y", "z"]
        .iter()
        .map(|t| ScriptedToolCall {
            id: Some(format!("call-{t}")),
            name: "meet".into(),
            arguments: json!({"text": t}),
        })
        .collect();
    let script = vec![
        ScriptedResponse {
            tool_calls: calls,
            ..ScriptedResponse::default()
        },
        done("all met"),
    ];
    AgentHarness::new(
        AgentIdentity {
            name: "meeter".into(),
            tool_allowlist: vec!["meet".into()],
            tier: Default::default(),
            topic: "meet".into(),
        },
        "You are a test agent.",
        HarnessConfig {
            agents_folder: dir.join("Agents"),
            max_parallel_tools,
            ..HarnessConfig::default()
        },
        Arc::new(ScriptedProvider::new(script)),
        sandbox,
    )
}

#[tokio::test(start_paused = true)]
async fn three_reads_of_one_answer_run_together_and_are_journaled_in_its_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = meeting(dir.path(), 4);
    // Under the paused clock a run that waited forever times out at once.
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        h.run_bounded(PhaseRequest::new("go").with_max_iterations(3)),
    )
    .await
    .expect("the three calls met: they ran at the same time");
    assert_eq!(r.stop_reason, StopReason::Done);
    let outcomes: Vec<&ToolOutcome> = r.tool_calls.iter().map(|c| &c.outcome).collect();
    assert_eq!(
        outcomes,
        [
            &ToolOutcome::Result("met:x".into()),
            &ToolOutcome::Result("met:y".into()),
            &ToolOutcome::Result("met:z".into()),
        ]
    );
    let journal = std::fs::read_to_string(h.run_dir().join("transcript.jsonl")).unwrap();
    let order: Vec<String> = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "tool_call_started" || e["event"] == "tool_result")
        .map(|e| {
            format!(
                "{} {}",
                e["event"].as_str().unwrap(),
                e["call_id"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            "tool_call_started call-x",
            "tool_call_started call-y",
            "tool_call_started call-z",
            "tool_result call-x",
            "tool_result call-y",
            "tool_result call-z",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn with_max_parallel_tools_one_the_calls_run_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = meeting(dir.path(), 1);
    let r = h
        .run_bounded(PhaseRequest::new("go").with_max_iterations(3))
        .await;
    // Alone, a call waits for partners that never come, until the sandbox's time limit (the
    // third finds the two that gave up counted, and passes).
    assert_eq!(r.tool_calls.len(), 3);
    for call in &r.tool_calls[..2] {
        assert!(
            matches!(&call.outcome, ToolOutcome::Error(e) if e.contains("timed out")),
            "{call:?}"
        );
    }
}
