//! Context compaction over a long run: a 300-iteration scripted run whose every tool result
//! is 2.5 KB, with an 8k-token window (`compact`, the ladder) and without compaction
//! (`full`, a window large enough for everything). Prints the prompt tokens sent in all, and
//! the share of them that repeats the previous request's prefix (what a provider's prompt
//! cache can serve), then times both runs.
//! Run: `cargo bench -p lsm-harness --bench compaction`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::cast_precision_loss
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use lsm_harness::compaction::{CompactionConfig, SUMMARY_PROMPT};
use lsm_harness::{AgentHarness, ContextStrategy, HarnessConfig};
use lsm_phase::{AgentIdentity, PhaseExecutor, PhaseRequest, StopReason};
use lsm_providers::{
    LlmRequest, LlmResponse, Provider, ProviderError, ScriptedProvider, ScriptedResponse, Usage,
    estimate_tokens_conservatively,
};
use lsm_sandbox::{
    RateLimit, RiskLevel, Sandbox, SandboxConfig, Tool, ToolContext, ToolError, ToolOutput,
    ToolRegistry,
};
use serde_json::{Value, json};

const ITERATIONS: usize = 300;

struct Page;

#[async_trait::async_trait]
impl Tool for Page {
    fn name(&self) -> &str {
        "page"
    }
    fn description(&self) -> &str {
        "Returns a page."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}},
               "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let n = ctx.args.get("n").and_then(Value::as_u64).unwrap_or(0);
        Ok(ToolOutput::text(format!(
            "page {n}: {}",
            "lorem ipsum dolor sit amet ".repeat(95)
        )))
    }
}

/// The script for the phase; summary calls answered here; every request kept.
struct Model {
    script: ScriptedProvider,
    window: u64,
    requests: Mutex<Vec<LlmRequest>>,
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
        Some(self.window)
    }
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        if request
            .messages
            .first()
            .is_some_and(|m| m.content == SUMMARY_PROMPT)
        {
            return Ok(LlmResponse {
                text: "Pages were read; each held lorem ipsum.".into(),
                tool_calls: Vec::new(),
                usage: Usage {
                    input_tokens: estimate_tokens_conservatively(request),
                    output_tokens: 12,
                    ..Usage::default()
                },
                response_id: None,
            });
        }
        self.script.complete(request).await
    }
}

fn script() -> ScriptedProvider {
    let mut lines: Vec<ScriptedResponse> = (0..ITERATIONS)
        .map(|n| ScriptedResponse::tool("page", json!({"n": n})).with_usage(10, 5))
        .collect();
    lines.push(ScriptedResponse::text("done").with_usage(10, 5));
    ScriptedProvider::new(lines).without_recording()
}

fn run(strategy: ContextStrategy, window: u64) -> Vec<LlmRequest> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut sandbox = SandboxConfig::confined_to(dir.path());
    sandbox.rate_limit = RateLimit {
        calls: u32::MAX,
        per_seconds: 1,
    };
    let sandbox =
        Arc::new(Sandbox::new(sandbox, ToolRegistry::new().with(Arc::new(Page)), None).unwrap());
    let model = Arc::new(Model {
        script: script(),
        window,
        requests: Mutex::new(Vec::new()),
    });
    let config = HarnessConfig {
        agents_folder: dir.path().join("Agents"),
        max_tokens_budget: u64::MAX,
        max_output_tokens: Some(1024),
        write_records: false,
        context_window_strategy: strategy,
        compaction: CompactionConfig::default(),
        ..HarnessConfig::default()
    };
    let identity = AgentIdentity {
        name: "reader".into(),
        tool_allowlist: vec!["page".into()],
        tier: Default::default(),
        topic: "read".into(),
    };
    let mut h = AgentHarness::new(
        identity,
        "You read pages.",
        config,
        Arc::clone(&model) as Arc<dyn Provider>,
        sandbox,
    );
    let r =
        rt.block_on(h.run_bounded(PhaseRequest::new("Read every page.").with_max_iterations(400)));
    assert_eq!(r.stop_reason, StopReason::Done);
    drop(h);
    model.requests.lock().map(|g| g.clone()).unwrap()
}

/// Prompt tokens in all, those that repeat the previous phase request's prefix, the summary
/// calls, and how often the history was rewritten (a request that does not extend the last).
fn tokens(requests: &[LlmRequest]) -> (u64, u64, usize, usize) {
    let phase: Vec<&LlmRequest> = requests
        .iter()
        .filter(|r| {
            r.messages
                .first()
                .is_none_or(|m| m.content != SUMMARY_PROMPT)
        })
        .collect();
    let total: u64 = requests.iter().map(estimate_tokens_conservatively).sum();
    let mut cached = 0;
    let mut rewrites = 0;
    for pair in phase.windows(2) {
        let shared = pair[0]
            .messages
            .iter()
            .zip(&pair[1].messages)
            .take_while(|(a, b)| a == b)
            .count();
        // The previous request ends with its tool results; a rewrite breaks before that.
        if shared + 1 < pair[0].messages.len() {
            rewrites += 1;
        }
        let prefix = LlmRequest {
            messages: pair[1].messages[..shared].to_vec(),
            tools: pair[1].tools.clone(),
            options: Default::default(),
        };
        cached += estimate_tokens_conservatively(&prefix);
    }
    (total, cached, requests.len() - phase.len(), rewrites)
}

fn bench(c: &mut Criterion) {
    println!(
        "\n| strategy | window | model calls (summaries) | history rewrites | prompt tokens sent | repeated prefix | largest prompt |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, strategy, window) in [
        ("compact", ContextStrategy::Compact, 8_192),
        ("full", ContextStrategy::Full, 1_000_000),
    ] {
        let requests = run(strategy, window);
        let (total, cached, summaries, rewrites) = tokens(&requests);
        let largest = requests
            .iter()
            .map(estimate_tokens_conservatively)
            .max()
            .unwrap_or(0);
        println!(
            "| {name} | {window} | {} ({summaries}) | {rewrites} | {total} | {:.1} % | {largest} |",
            requests.len(),
            100.0 * cached as f64 / total as f64
        );
    }
    let mut group = c.benchmark_group("compaction_300_iterations");
    group.sample_size(10);
    group.bench_function("compact_8k", |b| {
        b.iter(|| run(ContextStrategy::Compact, 8_192))
    });
    group.bench_function("full", |b| b.iter(|| run(ContextStrategy::Full, 1_000_000)));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(10));
    targets = bench
}
criterion_main!(benches);
