//! Seed 000 §2.2 and seed 001 §6.3 layer 2, in Rust: the harness on a scripted provider.

// Helpers outside #[test] functions may fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use lsm_harness::{
    AgentHarness, BudgetLimits, BudgetedProvider, HarnessConfig, MemoryProvider, RunBudget,
    RunSummary,
};
use lsm_phase::{
    AgentIdentity, DirectToolCall, PhaseExecutor, PhaseRequest, RunOutcome, StopReason, ToolOutcome,
};
use lsm_providers::{
    CallObserver, CallOptions, LlmRequest, LlmResponse, Message, Pricing, Provider, ProviderError,
    Role, ScriptedProvider, ScriptedResponse,
};
use lsm_sandbox::{
    RateLimit, RiskLevel, Sandbox, SandboxConfig, Tool, ToolContext, ToolError, ToolEvent,
    ToolEventKind, ToolOutput, ToolRegistry,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

// ---------- test tools ----------

/// Echoes its `text` argument, prefixed by its name.
struct Echo {
    name: &'static str,
    needs_permission: bool,
    calls: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Tool for Echo {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Echo the text back."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}},
               "required": ["text"], "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        if self.needs_permission {
            RiskLevel::Exec
        } else {
            RiskLevel::ReadOnly
        }
    }
    fn needs_permission(&self) -> bool {
        self.needs_permission
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!(
            "{}:{}",
            self.name,
            ctx.str_arg("text")?
        )))
    }
}

/// Panics when called.
struct Panicky;

#[async_trait::async_trait]
impl Tool for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }
    fn description(&self) -> &str {
        "Always panics."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        panic!("boom inside a tool")
    }
}

/// Cancels the run's stop token when called (a person pressing stop mid-phase).
struct StopButton(CancellationToken);

#[async_trait::async_trait]
impl Tool for StopButton {
    fn name(&self) -> &str {
        "stop_button"
    }
    fn description(&self) -> &str {
        "Requests a stop."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.0.cancel();
        Ok(ToolOutput::text("stopping"))
    }
}

/// Calls the model itself, as a knowledge-base tool does: one call per execution, through the
/// provider it was given (the run's gated one). A refused or failed call is its error result.
struct AskModel(Arc<dyn Provider>);

#[async_trait::async_trait]
impl Tool for AskModel {
    fn name(&self) -> &str {
        "ask_model"
    }
    fn description(&self) -> &str {
        "Ask the model a question."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
                   "text": {"type": "string"},
                   "max_output_tokens": {"type": "integer"}},
               "required": ["text"], "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let request = LlmRequest {
            messages: vec![Message::user(ctx.str_arg("text")?).into()],
            tools: Vec::new(),
            options: CallOptions {
                max_output_tokens: Some(ctx.opt_u64_arg("max_output_tokens").unwrap_or(1024)),
                ..CallOptions::default()
            },
        };
        let response = self
            .0
            .complete(&request)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        Ok(ToolOutput::text(format!("model:{}", response.text)))
    }
}

/// One call as a provider saw it, in the run's order across the harness and its tools.
#[derive(Debug, Clone)]
struct LoggedCall {
    from_tool: bool,
    max_output_tokens: Option<u64>,
    usage: Option<lsm_providers::Usage>,
}

type CallLog = Arc<std::sync::Mutex<Vec<LoggedCall>>>;

/// Logs every call that reaches `inner` (so a refused call is never logged).
struct Logged {
    inner: Arc<ScriptedProvider>,
    from_tool: bool,
    log: CallLog,
}

#[async_trait::async_trait]
impl Provider for Logged {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    async fn complete(&self, request: &LlmRequest) -> Result<LlmResponse, ProviderError> {
        self.complete_observed(request, &lsm_providers::NoObserver)
            .await
    }
    async fn complete_observed(
        &self,
        request: &LlmRequest,
        observer: &dyn CallObserver,
    ) -> Result<LlmResponse, ProviderError> {
        let r = self.inner.complete_observed(request, observer).await;
        self.log.lock().unwrap().push(LoggedCall {
            from_tool: self.from_tool,
            max_output_tokens: request.options.max_output_tokens,
            usage: r.as_ref().ok().map(|r| r.usage),
        });
        r
    }
    fn estimate_prompt_tokens(&self, request: &LlmRequest) -> u64 {
        self.inner.estimate_prompt_tokens(request)
    }
    fn pricing(&self) -> Option<Pricing> {
        self.inner.pricing()
    }
}

// ---------- fixture ----------

struct Fixture {
    dir: tempfile::TempDir,
    provider: Arc<ScriptedProvider>,
    /// The model `ask_model` calls, behind the run's budget.
    tool_provider: Arc<ScriptedProvider>,
    /// Every call that reached either model, in order.
    calls: CallLog,
    harness: AgentHarness,
    a_calls: Arc<AtomicUsize>,
    b_calls: Arc<AtomicUsize>,
    stop: CancellationToken,
}

struct Options {
    budget: u64,
    allowlist: Vec<&'static str>,
    sandbox: SandboxConfig,
    max_output_tokens: Option<u64>,
    pricing: Option<Pricing>,
    max_cost_usd: Option<f64>,
    reserve_prompt_estimate: bool,
    /// What the model answers `ask_model`'s calls.
    tool_script: Vec<ScriptedResponse>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            budget: 1_000_000,
            allowlist: vec!["tool_a", "tool_b", "guarded", "panicky", "stop_button"],
            sandbox: SandboxConfig::default(),
            max_output_tokens: Some(4096),
            pricing: None,
            max_cost_usd: None,
            reserve_prompt_estimate: false,
            tool_script: Vec::new(),
        }
    }
}

fn fixture(script: Vec<ScriptedResponse>) -> Fixture {
    fixture_with(script, Options::default())
}

fn fixture_with(script: Vec<ScriptedResponse>, opts: Options) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let a_calls = Arc::new(AtomicUsize::new(0));
    let b_calls = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();
    let config = HarnessConfig {
        agents_folder: dir.path().join("Agents"),
        max_tokens_budget: opts.budget,
        max_iterations: 25,
        max_output_tokens: opts.max_output_tokens,
        max_cost_usd: opts.max_cost_usd,
        reserve_prompt_estimate: opts.reserve_prompt_estimate,
        ..HarnessConfig::default()
    };
    // One budget for the run, shared by the harness and the tool that calls the model.
    let budget = RunBudget::new(BudgetLimits::from_config(&config));
    let calls = CallLog::default();
    let mut tool_scripted = ScriptedProvider::new(opts.tool_script);
    if let Some(p) = opts.pricing {
        tool_scripted = tool_scripted.with_pricing(p);
    }
    let tool_provider = Arc::new(tool_scripted);
    let gated = BudgetedProvider::new(
        Arc::new(Logged {
            inner: Arc::clone(&tool_provider),
            from_tool: true,
            log: Arc::clone(&calls),
        }),
        budget.clone(),
    );
    let registry = ToolRegistry::new()
        .with(Arc::new(AskModel(Arc::new(gated))))
        .with(Arc::new(Echo {
            name: "tool_a",
            needs_permission: false,
            calls: a_calls.clone(),
        }))
        .with(Arc::new(Echo {
            name: "tool_b",
            needs_permission: false,
            calls: b_calls.clone(),
        }))
        .with(Arc::new(Echo {
            name: "tool_c",
            needs_permission: false,
            calls: Arc::new(AtomicUsize::new(0)),
        }))
        .with(Arc::new(Echo {
            name: "guarded",
            needs_permission: true,
            calls: Arc::new(AtomicUsize::new(0)),
        }))
        .with(Arc::new(Panicky))
        .with(Arc::new(StopButton(stop.clone())));
    let mut sandbox_config = opts.sandbox;
    sandbox_config.working_dir = Some(dir.path().to_path_buf());
    let sandbox = Arc::new(Sandbox::new(sandbox_config, registry, None).unwrap());
    let mut scripted = ScriptedProvider::new(script);
    if let Some(p) = opts.pricing {
        scripted = scripted.with_pricing(p);
    }
    let provider = Arc::new(scripted);
    let identity = AgentIdentity {
        name: "tester".into(),
        tool_allowlist: opts.allowlist.iter().map(|s| s.to_string()).collect(),
        tier: Default::default(),
        topic: "test the harness".into(),
    };
    let harness = AgentHarness::new(
        identity,
        "You are a test agent.",
        config,
        Arc::new(Logged {
            inner: Arc::clone(&provider),
            from_tool: false,
            log: Arc::clone(&calls),
        }),
        sandbox,
    )
    .with_stop_token(stop.clone())
    .with_budget(budget);
    Fixture {
        dir,
        provider,
        tool_provider,
        calls,
        harness,
        a_calls,
        b_calls,
        stop,
    }
}

fn tool(name: &str, text: &str) -> ScriptedResponse {
    ScriptedResponse::tool(name, json!({"text": text})).with_usage(10, 5)
}

fn done(text: &str) -> ScriptedResponse {
    ScriptedResponse::text(text).with_usage(10, 5)
}

fn contents(req: &lsm_providers::LlmRequest) -> Vec<String> {
    req.messages.iter().map(|m| m.content.clone()).collect()
}

/// The tools offered, the control tools (offered with every call) aside.
fn offered(req: &lsm_providers::LlmRequest) -> Vec<String> {
    req.tools
        .iter()
        .map(|t| t.name.clone())
        .filter(|n| !lsm_harness::is_control_tool(n))
        .collect()
}

fn read_summary(fx: &Fixture) -> RunSummary {
    let path = fx.harness.run_dir().join("run_summary.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn transcript(fx: &Fixture) -> Vec<Value> {
    let text = std::fs::read_to_string(fx.harness.run_dir().join("transcript.jsonl")).unwrap();
    text.lines()
        .map(|l| {
            // A line is written without serde's flattening: it must be the very bytes the
            // envelope's derived serialization gives.
            let envelope: lsm_harness::EventEnvelope = serde_json::from_str(l).unwrap();
            assert_eq!(serde_json::to_string(&envelope).unwrap(), l);
            serde_json::from_str(l).unwrap()
        })
        .collect()
}

fn events(fx: &Fixture) -> Vec<String> {
    transcript(fx)
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect()
}

// ---------- loop mechanics ----------

#[tokio::test]
async fn done_when_the_model_answers_before_the_limit() {
    let mut fx = fixture(vec![tool("tool_a", "x"), done("finished")]);
    let r = fx
        .harness
        .run_bounded(PhaseRequest::new("go").with_max_iterations(5))
        .await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(r.final_text, "finished");
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(
        r.tool_calls[0].outcome,
        ToolOutcome::Result("tool_a:x".into())
    );
    assert_eq!(fx.provider.calls(), 2);
}

#[tokio::test]
async fn max_iterations_after_exactly_that_many_calls() {
    let script = (0..10).map(|i| tool("tool_a", &i.to_string())).collect();
    let mut fx = fixture(script);
    let r = fx
        .harness
        .run_bounded(PhaseRequest::new("loop").with_max_iterations(3))
        .await;
    assert_eq!(r.stop_reason, StopReason::MaxIterations);
    assert_eq!(fx.provider.calls(), 3);
    assert_eq!(r.tool_calls.len(), 3);
    assert_eq!(fx.a_calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn zero_max_iterations_makes_no_call() {
    let mut fx = fixture(vec![done("never")]);
    let r = fx
        .harness
        .run_bounded(PhaseRequest::new("x").with_max_iterations(0))
        .await;
    assert_eq!(r.stop_reason, StopReason::MaxIterations);
    assert_eq!(fx.provider.calls(), 0);
}

// ---------- budget ----------

#[tokio::test]
async fn budget_exhausted_on_entry_makes_no_llm_or_tool_call() {
    let mut fx = fixture_with(
        vec![tool("tool_a", "1").with_usage(60, 40), tool("tool_a", "2")],
        Options {
            budget: 100,
            ..Options::default()
        },
    );
    let first = fx.harness.run_bounded(PhaseRequest::new("spend")).await;
    assert_eq!(first.stop_reason, StopReason::BudgetExhausted);
    assert_eq!(
        fx.provider.calls(),
        1,
        "the first call spends the whole budget"
    );
    let a_before = fx.a_calls.load(Ordering::SeqCst);

    let second = fx.harness.run_bounded(PhaseRequest::new("again")).await;
    assert_eq!(second.stop_reason, StopReason::BudgetExhausted);
    assert!(second.tool_calls.is_empty());
    assert_eq!(fx.provider.calls(), 1, "no LLM call after exhaustion");
    assert_eq!(
        fx.a_calls.load(Ordering::SeqCst),
        a_before,
        "no tool call either"
    );

    // Any later phase, in any context, returns the same way.
    let third = fx
        .harness
        .run_bounded(
            PhaseRequest::new("other label")
                .with_context_label(Some("elsewhere"))
                .with_continue_context(false),
        )
        .await;
    assert_eq!(third.stop_reason, StopReason::BudgetExhausted);
    assert_eq!(fx.provider.calls(), 1);
}

#[tokio::test]
async fn budget_is_checked_before_every_call_not_after() {
    // 3 calls of 40 tokens against a budget of 100: the third call must not happen.
    let script = (0..5)
        .map(|i| tool("tool_a", &i.to_string()).with_usage(30, 10))
        .collect();
    let mut fx = fixture_with(
        script,
        Options {
            budget: 100,
            ..Options::default()
        },
    );
    let r = fx
        .harness
        .run_bounded(PhaseRequest::new("go").with_max_iterations(10))
        .await;
    assert_eq!(r.stop_reason, StopReason::BudgetExhausted);
    assert_eq!(
        fx.provider.calls(),
        3,
        "40+40 < 100 allows a third call; 120 ≥ 100 stops"
    );
    assert_eq!(fx.harness.usage().tokens_used, 120);
}

#[tokio::test]
async fn max_output_tokens_is_capped_to_what_is_left() {
    let mut fx = fixture_with(
        vec![
            tool("tool_a", "1").with_usage(50, 20),
            done("end").with_usage(5, 5),
        ],
        Options {
            budget: 100,
            max_output_tokens: Some(4096),
            ..Options::default()
        },
    );
    fx.harness.run_bounded(PhaseRequest::new("go")).await;
    let reqs = fx.provider.requests();
    assert_eq!(reqs[0].options.max_output_tokens, Some(100));
    assert_eq!(reqs[1].options.max_output_tokens, Some(30));
}

#[test]
fn phase_result_carries_no_accounting() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut fx = fixture(vec![done("x").with_usage(1000, 1000)]);
    let r = rt.block_on(fx.harness.run_bounded(PhaseRequest::new("x")));
    let v = serde_json::to_value(&r).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 3);
    assert!(v.get("tokens_used").is_none() && v.get("cost_usd").is_none());
    assert!(
        !v.to_string().contains("2000"),
        "no usage figure leaks into the result"
    );
}

// ---------- stop ----------

#[tokio::test]
async fn stop_requested_at_entry_makes_no_call() {
    let mut fx = fixture(vec![done("never")]);
    fx.stop.cancel();
    let r = fx.harness.run_bounded(PhaseRequest::new("x")).await;
    assert_eq!(r.stop_reason, StopReason::StopRequested);
    assert_eq!(fx.provider.calls(), 0);
}

#[tokio::test]
async fn stop_signaled_mid_loop_ends_the_phase_before_the_next_call() {
    let mut fx = fixture(vec![
        ScriptedResponse::tool("stop_button", json!({})),
        done("never reached"),
    ]);
    let r = fx
        .harness
        .run_bounded(PhaseRequest::new("x").with_max_iterations(5))
        .await;
    assert_eq!(r.stop_reason, StopReason::StopRequested);
    assert_eq!(fx.provider.calls(), 1);
    assert_eq!(r.tool_calls.len(), 1);
}

/// A provider that never answers: only a stop can end the call.
struct Hanging;

#[async_trait::async_trait]
impl Provider for Hanging {
    fn name(&self) -> &str {
        "hanging"
    }
    fn model(&self) -> &str {
        "none"
    }
    async fn complete(
        &self,
        _request: &lsm_providers::LlmRequest,
    ) -> Result<lsm_providers::LlmResponse, lsm_providers::ProviderError> {
        std::future::pending().await
    }
}

#[tokio::test(start_paused = true)]
async fn stop_aborts_an_in_flight_llm_call() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox =
        Arc::new(Sandbox::new(SandboxConfig::default(), ToolRegistry::new(), None).unwrap());
    let stop = CancellationToken::new();
    let mut h = AgentHarness::new(
        AgentIdentity {
            name: "t".into(),
            tool_allowlist: vec![],
            tier: Default::default(),
            topic: String::new(),
        },
        "",
        HarnessConfig {
            agents_folder: dir.path().to_path_buf(),
            ..HarnessConfig::default()
        },
        Arc::new(Hanging),
        sandbox,
    )
    .with_stop_token(stop.clone());
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        stop.cancel();
    });
    let r = h.run_bounded(PhaseRequest::new("x")).await;
    assert_eq!(r.stop_reason, StopReason::StopRequested);
    stopper.await.unwrap();
}

// ---------- contexts ----------

#[tokio::test]
async fn continue_context_true_carries_the_prior_phase_into_the_next() {
    let mut fx = fixture(vec![done("first answer"), done("second answer")]);
    fx.harness.run_bounded(PhaseRequest::new("phase one")).await;
    fx.harness.run_bounded(PhaseRequest::new("phase two")).await;
    let reqs = fx.provider.requests();
    let second = contents(&reqs[1]);
    assert!(second.contains(&"phase one".to_string()));
    assert!(second.contains(&"first answer".to_string()));
    assert_eq!(second.last().unwrap(), "phase two");
}

#[tokio::test]
async fn continue_context_false_resets_that_label_only() {
    let mut fx = fixture(vec![done("p1"), done("a1"), done("p2"), done("a2")]);
    fx.harness
        .run_bounded(PhaseRequest::new("primary one"))
        .await;
    fx.harness
        .run_bounded(PhaseRequest::new("label a one").with_context_label(Some("a")))
        .await;
    fx.harness
        .run_bounded(PhaseRequest::new("primary two").with_continue_context(false))
        .await;
    fx.harness
        .run_bounded(PhaseRequest::new("label a two").with_context_label(Some("a")))
        .await;
    let reqs = fx.provider.requests();
    let reset = contents(&reqs[2]);
    assert!(!reset.contains(&"primary one".to_string()), "history reset");
    assert_eq!(reset, vec!["You are a test agent.", "primary two"]);
    let kept = contents(&reqs[3]);
    assert!(
        kept.contains(&"label a one".to_string()),
        "other label kept"
    );
}

#[tokio::test]
async fn named_contexts_are_independent_and_none_is_its_own() {
    let mut fx = fixture(vec![
        done("A1"),
        done("B1"),
        done("P1"),
        done("A2"),
        done("B2"),
    ]);
    let a = || PhaseRequest::new("").with_context_label(Some("label_a"));
    let b = || PhaseRequest::new("").with_context_label(Some("label_b"));
    fx.harness
        .run_bounded(PhaseRequest {
            user_message: "about a".into(),
            ..a()
        })
        .await;
    fx.harness
        .run_bounded(PhaseRequest {
            user_message: "about b".into(),
            ..b()
        })
        .await;
    fx.harness
        .run_bounded(PhaseRequest::new("about primary"))
        .await;
    fx.harness
        .run_bounded(PhaseRequest {
            user_message: "more a".into(),
            ..a()
        })
        .await;
    fx.harness
        .run_bounded(PhaseRequest {
            user_message: "more b".into(),
            ..b()
        })
        .await;
    let reqs = fx.provider.requests();
    let a2 = contents(&reqs[3]).join("|");
    let b2 = contents(&reqs[4]).join("|");
    let p1 = contents(&reqs[2]).join("|");
    assert!(a2.contains("about a") && a2.contains("A1"));
    assert!(!a2.contains("about b") && !a2.contains("B1") && !a2.contains("primary"));
    assert!(b2.contains("about b") && !b2.contains("about a"));
    assert!(
        !p1.contains("about a") && !p1.contains("about b"),
        "None is separate"
    );
}

#[tokio::test]
async fn response_ids_chain_per_label_and_cache_key_is_agent_and_label() {
    let mut fx = fixture(vec![done("1"), done("2"), done("3"), done("4")]);
    fx.harness.run_bounded(PhaseRequest::new("a")).await;
    fx.harness
        .run_bounded(PhaseRequest::new("b").with_context_label(Some("x")))
        .await;
    fx.harness.run_bounded(PhaseRequest::new("c")).await;
    fx.harness
        .run_bounded(PhaseRequest::new("d").with_continue_context(false))
        .await;
    let reqs = fx.provider.requests();
    assert_eq!(reqs[0].options.previous_response_id, None);
    assert_eq!(
        reqs[1].options.previous_response_id, None,
        "labels never share"
    );
    assert_eq!(
        reqs[2].options.previous_response_id.as_deref(),
        Some("scripted-1")
    );
    assert_eq!(
        reqs[3].options.previous_response_id, None,
        "reset clears it"
    );
    assert_eq!(
        reqs[0].options.prompt_cache_key.as_deref(),
        Some("tester:__default__")
    );
    assert_eq!(
        reqs[1].options.prompt_cache_key.as_deref(),
        Some("tester:x")
    );

    fx.harness.finish(RunOutcome::Completed).await;
    let s = read_summary(&fx);
    assert_eq!(s.context_tracking.context_labels_seen, ["__default__", "x"]);
    let d = &s.context_tracking.per_label["__default__"];
    assert_eq!(d.iterations, 3);
    assert_eq!(d.response_id.as_deref(), Some("scripted-4"));
    assert!(d.conversation_id.as_deref().unwrap().starts_with("conv-"));
    let x = &s.context_tracking.per_label["x"];
    assert_eq!(x.response_id.as_deref(), Some("scripted-2"));
    assert_ne!(x.conversation_id, d.conversation_id);
}

// ---------- tool_names ----------

#[tokio::test]
async fn tool_names_subset_offers_only_that_tool_and_rejects_others() {
    let mut fx = fixture(vec![tool("tool_b", "sneaky"), done("ok")]);
    let r = fx
        .harness
        .run_bounded(PhaseRequest::new("x").with_tool_names(["tool_a"]))
        .await;
    let reqs = fx.provider.requests();
    assert_eq!(offered(&reqs[0]), ["tool_a"]);
    assert_eq!(
        r.tool_calls[0].outcome,
        ToolOutcome::Error("Tool 'tool_b' is not in the requested tool_names list".into())
    );
    assert_eq!(fx.b_calls.load(Ordering::SeqCst), 0);
    // The model was told, and the loop went on.
    assert!(
        contents(&reqs[1])
            .iter()
            .any(|c| c.starts_with("Error: Tool 'tool_b'"))
    );
    assert_eq!(r.stop_reason, StopReason::Done);
}

#[tokio::test]
async fn empty_tool_names_runs_the_model_but_rejects_every_call() {
    let mut fx = fixture(vec![tool("tool_a", "x"), done("fine")]);
    let r = fx
        .harness
        .run_bounded(PhaseRequest::new("x").with_tool_names(Vec::<String>::new()))
        .await;
    assert!(offered(&fx.provider.requests()[0]).is_empty());
    assert!(r.tool_calls[0].outcome.is_error());
    assert_eq!(fx.a_calls.load(Ordering::SeqCst), 0);
    assert_eq!(fx.provider.calls(), 2);
}

#[tokio::test]
async fn no_tool_names_offers_every_allowlisted_registered_tool() {
    let mut fx = fixture(vec![done("x")]);
    fx.harness.run_bounded(PhaseRequest::new("x")).await;
    let mut names = offered(&fx.provider.requests()[0]);
    names.sort();
    // tool_c is registered but not allowlisted.
    assert_eq!(
        names,
        ["guarded", "panicky", "stop_button", "tool_a", "tool_b"]
    );
}

#[tokio::test]
async fn a_tool_outside_the_allowlist_is_refused_with_the_original_message() {
    let mut fx = fixture(vec![tool("tool_c", "x"), done("ok")]);
    let r = fx.harness.run_bounded(PhaseRequest::new("x")).await;
    assert_eq!(
        r.tool_calls[0].outcome,
        ToolOutcome::Error("Tool 'tool_c' is not allowed for this harness run".into())
    );
}

/// Refuses `tool_a` calls whose text says "remote" (a stand-in for a knowledge-base mode that
/// enables remote sources without URL access).
struct NoRemote;

impl lsm_harness::ToolCallGuard for NoRemote {
    fn check(&self, tool: &str, arguments: &Value) -> Result<(), lsm_harness::GuardRefusal> {
        if tool == "tool_a" && arguments["text"] == "remote" {
            Err(lsm_harness::GuardRefusal::new(
                "remote sources need allow_url_access",
            ))
        } else {
            Ok(())
        }
    }
}

#[tokio::test]
async fn a_call_guard_refusal_goes_back_to_the_model_and_the_tool_does_not_run() {
    let mut fx = fixture(vec![
        tool("tool_a", "remote"),
        tool("tool_a", "local"),
        done("ok"),
    ]);
    let harness = std::mem::replace(&mut fx.harness, fixture(vec![]).harness);
    fx.harness = harness.with_call_guard(Arc::new(NoRemote));
    let r = fx.harness.run_bounded(PhaseRequest::new("x")).await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(
        r.tool_calls[0].outcome,
        ToolOutcome::Error(
            "Tool 'tool_a' was refused: remote sources need allow_url_access".into()
        )
    );
    assert_eq!(
        r.tool_calls[1].outcome,
        ToolOutcome::Result("tool_a:local".into())
    );
    assert_eq!(
        fx.a_calls.load(Ordering::SeqCst),
        1,
        "the refused call did not run"
    );
    // The model saw the refusal.
    let third = &fx.provider.requests()[2];
    assert!(
        contents(third)
            .iter()
            .any(|c| c.contains("was refused: remote sources"))
    );
    assert!(events(&fx).contains(&"tool_denied".to_string()));
    fx.harness.finish(RunOutcome::Completed).await;
    assert_eq!(read_summary(&fx).approvals_denials.denials, 1);
}

/// A model answer asking for `n` calls of `ask_model`.
fn ask_model_calls(n: usize) -> ScriptedResponse {
    ScriptedResponse {
        tool_calls: (0..n)
            .map(|i| lsm_providers::ScriptedToolCall {
                id: None,
                name: "ask_model".into(),
                arguments: json!({"text": format!("question {i}")}),
            })
            .collect(),
        ..ScriptedResponse::default()
    }
}

const TOKENS_SPENT: &str = "budget exhausted: the run's token budget (300) is spent; no further model calls are possible in this run";

#[tokio::test]
async fn model_calls_inside_tools_stop_at_the_runs_token_budget() {
    // The reported defect: one answer asking for four tool calls that each call the model
    // spent 1215 tokens of a 300-token budget.
    let mut fx = fixture_with(
        vec![ask_model_calls(4).with_usage(10, 5), done("never")],
        Options {
            budget: 300,
            allowlist: vec!["ask_model"],
            tool_script: (0..4)
                // A prompt of 4 tokens (within the provider's estimate), a long answer.
                .map(|i| ScriptedResponse::text(format!("answer {i}")).with_usage(4, 400))
                .collect(),
            ..Options::default()
        },
    );
    let r = fx.harness.run_bounded(PhaseRequest::new("ask")).await;
    assert_eq!(r.stop_reason, StopReason::BudgetExhausted);
    // The first internal call ran with its output capped to the 285 tokens left; the other
    // three were refused before reaching the model.
    assert_eq!(fx.tool_provider.calls(), 1);
    assert_eq!(
        fx.tool_provider.requests()[0].options.max_output_tokens,
        Some(285)
    );
    assert_eq!(
        r.tool_calls[0].outcome,
        ToolOutcome::Result("model:answer 0".into())
    );
    for call in &r.tool_calls[1..] {
        assert_eq!(
            call.outcome,
            ToolOutcome::Error(format!("Tool 'ask_model' failed: {TOKENS_SPENT}"))
        );
    }
    let spent = fx.harness.usage().tokens_used;
    assert_eq!(spent, 15 + 4 + 285);
    let estimate = fx
        .tool_provider
        .estimate_prompt_tokens(&fx.tool_provider.requests()[0]);
    assert!(spent <= 300 + estimate, "{spent} > 300 + {estimate}");
    assert_eq!(
        fx.provider.calls(),
        1,
        "no harness call after the tools spent it"
    );
    let usage = transcript(&fx)
        .into_iter()
        .find(|e| e["event"] == "tool_usage")
        .unwrap();
    assert_eq!(usage["tokens"], 289);
    assert_eq!(usage["llm_calls"], 1);
    fx.harness.finish(RunOutcome::Completed).await;
    let s = read_summary(&fx);
    assert_eq!(s.token_usage.tokens_used, 304);
    assert_eq!(
        (s.token_usage.input_tokens, s.token_usage.output_tokens),
        (14, 290)
    );
    assert_eq!(s.token_usage.iterations, 1, "the loop's own calls");
}

#[tokio::test]
async fn a_tool_calls_output_is_capped_to_what_is_left_of_the_budget() {
    let mut fx = fixture_with(
        vec![ask_model_calls(1).with_usage(10, 5), done("end")],
        Options {
            budget: 100,
            allowlist: vec!["ask_model"],
            tool_script: vec![ScriptedResponse::text("a").with_usage(5, 1000)],
            ..Options::default()
        },
    );
    fx.harness.run_bounded(PhaseRequest::new("ask")).await;
    // 100 - 15 spent by the harness's call; the tool asked for 1024.
    assert_eq!(
        fx.tool_provider.requests()[0].options.max_output_tokens,
        Some(85)
    );
    assert_eq!(fx.harness.usage().tokens_used, 15 + 5 + 85);
}

#[tokio::test]
async fn the_cost_ceiling_covers_model_calls_inside_tools() {
    // $1 / $10 per million. The harness's call costs $0.003 of $0.005; the $0.002 left buys
    // 200 output tokens; the tool's call then costs 0.002 + 0.002.
    let mut fx = fixture_with(
        vec![ask_model_calls(2).with_usage(2000, 100), done("never")],
        Options {
            allowlist: vec!["ask_model"],
            pricing: Some(PRICES),
            max_cost_usd: Some(0.005),
            tool_script: vec![
                ScriptedResponse::text("a").with_usage(2000, 1000),
                ScriptedResponse::text("b").with_usage(10, 10),
            ],
            ..Options::default()
        },
    );
    let r = fx.harness.run_bounded(PhaseRequest::new("ask")).await;
    assert_eq!(r.stop_reason, StopReason::BudgetExhausted);
    assert_eq!(
        fx.tool_provider.requests()[0].options.max_output_tokens,
        Some(200)
    );
    assert_eq!(fx.tool_provider.calls(), 1, "the second call was refused");
    let refusal = r.tool_calls[1].outcome.text();
    assert!(
        refusal
            .contains("budget exhausted: the run's cost ceiling (max_cost_usd $0.005) is reached"),
        "{refusal}"
    );
    let cost = fx.harness.usage().cost_usd.unwrap();
    assert!((cost - 0.007).abs() < 1e-12, "{cost}");
    fx.harness.finish(RunOutcome::Completed).await;
    let s = read_summary(&fx);
    assert!((s.token_usage.cost_usd.unwrap() - 0.007).abs() < 1e-12);
}

#[tokio::test]
async fn a_tool_call_refused_by_the_budget_never_reaches_the_model() {
    // The harness's own call spends the whole budget: the tool's call is refused outright.
    let mut fx = fixture_with(
        vec![ask_model_calls(1).with_usage(90, 10), done("never")],
        Options {
            budget: 100,
            allowlist: vec!["ask_model"],
            tool_script: vec![ScriptedResponse::text("a").with_usage(1, 1)],
            ..Options::default()
        },
    );
    let r = fx.harness.run_bounded(PhaseRequest::new("ask")).await;
    assert_eq!(r.stop_reason, StopReason::BudgetExhausted);
    assert_eq!(fx.tool_provider.calls(), 0);
    assert!(
        r.tool_calls[0]
            .outcome
            .text()
            .contains("budget exhausted: the run's token budget (100) is spent")
    );
    assert!(!events(&fx).contains(&"tool_usage".to_string()));
}

// ---------- failures are values ----------

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_result_and_the_loop_continues() {
    let mut fx = fixture(vec![
        ScriptedResponse::tool("panicky", json!({})),
        done("recovered"),
    ]);
    let r = fx.harness.run_bounded(PhaseRequest::new("x")).await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(r.final_text, "recovered");
    let e = r.tool_calls[0].outcome.text();
    assert!(
        e.contains("panicked") && e.contains("boom inside a tool"),
        "{e}"
    );
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_go_back_to_the_model() {
    let mut fx = fixture_with(
        vec![
            ScriptedResponse::tool("tool_a", json!({"text": 5})),
            ScriptedResponse::tool("nonexistent", json!({})),
            done("ok"),
        ],
        Options {
            allowlist: vec!["tool_a", "nonexistent"],
            ..Options::default()
        },
    );
    let r = fx.harness.run_bounded(PhaseRequest::new("x")).await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert!(r.tool_calls[0].outcome.text().contains("invalid arguments"));
    assert!(r.tool_calls[1].outcome.text().contains("does not exist"));
    assert_eq!(fx.a_calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_permission_tool_with_nobody_to_ask_is_denied_and_recorded() {
    let mut fx = fixture(vec![tool("guarded", "x"), done("ok")]);
    let r = fx.harness.run("try it").await;
    assert!(
        r.result.tool_calls[0]
            .outcome
            .text()
            .contains("denied permission")
    );
    assert_eq!(r.summary.approvals_denials.denials, 1);
    assert_eq!(r.summary.approvals_denials.by_tool["guarded"].denials, 1);
    assert!(!r.summary.approvals_denials.events[0].allowed);
    assert!(events(&fx).contains(&"tool_denied".to_string()));
}

#[tokio::test]
async fn provider_failure_is_an_error_stop_with_records_written() {
    let mut fx = fixture(vec![tool("tool_a", "x")]); // runs out on the second call
    let report = fx.harness.run("task").await;
    assert_eq!(report.result.stop_reason, StopReason::Error);
    assert!(
        report
            .result
            .final_text
            .contains("no response left for call 2")
    );
    assert_eq!(
        report.result.tool_calls.len(),
        1,
        "work done before the failure is kept"
    );
    let s = read_summary(&fx);
    assert_eq!(s.status, "failed");
    assert_eq!(s.run_outcome, "error");
    assert!(s.error.unwrap().contains("no response left"));
    assert!(events(&fx).contains(&"llm_error".to_string()));
}

#[tokio::test]
async fn the_block_control_tool_ends_the_phase_as_blocked() {
    let mut fx = fixture(vec![ScriptedResponse::tool(
        "block",
        json!({"reason": "the file I need is missing"}),
    )]);
    let r = fx.harness.run_bounded(PhaseRequest::new("x")).await;
    assert_eq!(r.stop_reason, StopReason::Blocked);
    assert_eq!(r.final_text, "the file I need is missing");
    assert!(
        fx.provider.requests()[0]
            .tools
            .iter()
            .any(|t| t.name == "block")
    );
}

#[tokio::test]
async fn unwritable_agents_folder_is_a_clear_error_stop() {
    let mut fx = fixture(vec![done("x")]);
    let blocker = fx.dir.path().join("file_not_folder");
    std::fs::write(&blocker, "x").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Arc::new(
        Sandbox::new(
            SandboxConfig::confined_to(dir.path()),
            ToolRegistry::new(),
            None,
        )
        .unwrap(),
    );
    fx.harness = AgentHarness::new(
        AgentIdentity {
            name: "a".into(),
            tool_allowlist: vec![],
            tier: Default::default(),
            topic: String::new(),
        },
        "",
        HarnessConfig {
            agents_folder: blocker,
            ..HarnessConfig::default()
        },
        fx.provider.clone() as Arc<dyn Provider>,
        sandbox,
    );
    let report = fx.harness.run("x").await;
    assert_eq!(report.result.stop_reason, StopReason::Error);
    assert!(
        report
            .result
            .final_text
            .contains("cannot create the run's log folder")
    );
    assert!(report.records_error.is_some());
    assert_eq!(fx.provider.calls(), 0, "nothing runs unrecorded");
}

// ---------- tool-only mode ----------

fn direct(name: &str, text: &str) -> DirectToolCall {
    DirectToolCall {
        name: name.into(),
        arguments: json!({"text": text}),
    }
}

#[tokio::test]
async fn direct_tool_calls_run_without_any_llm_call() {
    let mut fx = fixture(vec![]);
    let r = fx
        .harness
        .run_bounded(PhaseRequest::direct(vec![
            direct("tool_a", "1"),
            direct("tool_b", "2"),
        ]))
        .await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(r.final_text, "");
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(
        r.tool_calls[1].outcome,
        ToolOutcome::Result("tool_b:2".into())
    );
    assert_eq!(fx.provider.calls(), 0);
}

#[tokio::test]
async fn empty_direct_tool_calls_is_done_with_nothing() {
    let mut fx = fixture(vec![]);
    let r = fx.harness.run_bounded(PhaseRequest::direct(vec![])).await;
    assert_eq!(r, lsm_phase::PhaseResult::empty(StopReason::Done));
    assert_eq!(fx.provider.calls(), 0);
}

#[tokio::test]
async fn direct_tool_calls_with_stop_requested_execute_nothing() {
    let mut fx = fixture(vec![]);
    fx.stop.cancel();
    let r = fx
        .harness
        .run_bounded(PhaseRequest::direct(vec![direct("tool_a", "1")]))
        .await;
    assert_eq!(r.stop_reason, StopReason::StopRequested);
    assert!(r.tool_calls.is_empty());
    assert_eq!(fx.a_calls.load(Ordering::SeqCst), 0);
    let mut empty = fixture(vec![]);
    empty.stop.cancel();
    let r = empty
        .harness
        .run_bounded(PhaseRequest::direct(vec![]))
        .await;
    assert_eq!(r.stop_reason, StopReason::StopRequested);
}

#[tokio::test]
async fn direct_tool_calls_ignore_an_exhausted_budget() {
    let mut fx = fixture_with(
        vec![tool("tool_a", "spend").with_usage(500, 500)],
        Options {
            budget: 100,
            ..Options::default()
        },
    );
    let r = fx.harness.run_bounded(PhaseRequest::new("spend")).await;
    assert_eq!(r.stop_reason, StopReason::BudgetExhausted);
    let r = fx
        .harness
        .run_bounded(PhaseRequest::direct(vec![direct("tool_a", "still")]))
        .await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(
        r.tool_calls[0].outcome,
        ToolOutcome::Result("tool_a:still".into())
    );
}

#[tokio::test]
async fn direct_call_outside_the_allowlist_is_an_error_and_others_still_run() {
    let mut fx = fixture(vec![]);
    let r = fx
        .harness
        .run_bounded(PhaseRequest::direct(vec![
            direct("tool_c", "no"),
            direct("tool_a", "yes"),
        ]))
        .await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(
        r.tool_calls[0].outcome,
        ToolOutcome::Error("Tool 'tool_c' is not allowed for this harness run".into())
    );
    assert_eq!(
        r.tool_calls[1].outcome,
        ToolOutcome::Result("tool_a:yes".into())
    );
}

#[tokio::test]
async fn direct_calls_go_through_the_sandbox_risk_and_rate_limit_checks() {
    let mut sandbox = SandboxConfig::default();
    sandbox.rate_limits.insert(
        "tool_a".into(),
        RateLimit {
            calls: 2,
            per_seconds: 3600,
        },
    );
    sandbox
        .require_permission_by_risk
        .insert(RiskLevel::ReadOnly, false);
    let mut fx = fixture_with(
        vec![],
        Options {
            sandbox,
            ..Options::default()
        },
    );
    let r = fx
        .harness
        .run_bounded(PhaseRequest::direct(vec![
            direct("tool_a", "1"),
            direct("tool_a", "2"),
            direct("tool_a", "3"),
            direct("guarded", "exec risk needs a person"),
        ]))
        .await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert!(!r.tool_calls[1].outcome.is_error());
    assert!(
        r.tool_calls[2].outcome.text().contains("rate limited"),
        "{:?}",
        r.tool_calls[2]
    );
    assert!(r.tool_calls[3].outcome.text().contains("denied permission"));
    assert_eq!(fx.a_calls.load(Ordering::SeqCst), 2);
}

// ---------- records ----------

#[tokio::test]
async fn summary_token_totals_are_the_sum_over_all_phases_and_contexts() {
    let mut fx = fixture(vec![
        tool("tool_a", "1").with_usage(100, 10),
        done("a").with_usage(120, 20),
        done("b").with_usage(7, 3),
        done("c").with_usage(50, 5),
    ]);
    fx.harness.run_bounded(PhaseRequest::new("one")).await;
    fx.harness
        .run_bounded(PhaseRequest::new("two").with_context_label(Some("x")))
        .await;
    fx.harness
        .run_bounded(PhaseRequest::direct(vec![direct("tool_b", "free")]))
        .await;
    fx.harness.run_bounded(PhaseRequest::new("three")).await;
    // Nothing is written before the run ends...
    assert!(!fx.harness.run_dir().join("run_summary.json").exists());
    fx.harness.finish(RunOutcome::Completed).await;
    let s = read_summary(&fx);
    assert_eq!(s.token_usage.tokens_used, 315);
    assert_eq!(s.token_usage.input_tokens, 277);
    assert_eq!(s.token_usage.output_tokens, 38);
    assert_eq!(s.token_usage.iterations, 4);
    assert_eq!(s.status, "completed");
    assert_eq!(s.tools_used["tool_a"], 1);
    assert_eq!(s.tools_used["tool_b"], 1);
    assert_eq!(s.tool_sequence, ["tool_a", "tool_b"]);
    assert_eq!(s.agent_name, "tester");
}

#[tokio::test]
async fn run_wraps_run_bounded_and_writes_a_complete_summary() {
    let mut fx = fixture(vec![tool("tool_a", "x"), done("all done")]);
    let report = fx
        .harness
        .run("Summarize the notes. Do not touch drafts; must cite sources")
        .await;
    assert_eq!(report.result.stop_reason, StopReason::Done);
    assert_eq!(report.result.final_text, "all done");
    assert!(report.records_error.is_none());
    let s = read_summary(&fx);
    assert_eq!(s, report.summary);
    assert_eq!(s.status, "completed");
    assert_eq!(s.run_outcome, "done");
    assert_eq!(s.constraints, ["Do not touch drafts", "must cite sources"]);
    assert_eq!(s.token_usage.max_tokens_budget, 1_000_000);
    // The transcript shows the whole loop, in order.
    assert_eq!(
        events(&fx),
        [
            "run_started",
            "phase_started",
            "llm_request",
            "llm_response",
            "tool_call_started",
            "tool_result",
            "llm_request",
            "llm_response",
            "phase_ended",
            "run_finished"
        ]
    );
    let t = transcript(&fx);
    assert!(t.iter().all(|e| e["run_id"] == report.summary.run_id));
    assert_eq!(t[5]["content"], "tool_a:x");
    assert_eq!(t[5]["success"], true);
    assert!(
        t.iter()
            .all(|e| e["schema_version"] == lsm_harness::SCHEMA_VERSION)
    );
}

#[tokio::test]
async fn a_dropped_harness_still_leaves_a_summary() {
    let fx = fixture(vec![done("x")]);
    let Fixture {
        dir, mut harness, ..
    } = fx;
    harness.run_bounded(PhaseRequest::new("x")).await;
    let run_dir = harness.run_dir();
    drop(harness);
    let s: RunSummary =
        serde_json::from_slice(&std::fs::read(run_dir.join("run_summary.json")).unwrap()).unwrap();
    assert_eq!(s.status, "failed");
    assert!(s.error.unwrap().contains("without finishing"));
    drop(dir);
}

/// Reports a file it "wrote" as an artifact.
struct Reporter;

#[async_trait::async_trait]
impl Tool for Reporter {
    fn name(&self) -> &str {
        "reporter"
    }
    fn description(&self) -> &str {
        "Reports an artifact."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let name = ctx.str_arg("text")?;
        Ok(ToolOutput::wrote(
            "wrote it",
            std::path::PathBuf::from(format!("/out/{name}.md")),
        ))
    }
}

#[tokio::test]
async fn artifacts_from_every_tool_execution_are_tracked_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::new().with(Arc::new(Reporter));
    let sandbox = Arc::new(Sandbox::new(SandboxConfig::default(), registry, None).unwrap());
    let provider = Arc::new(ScriptedProvider::new(vec![
        tool("reporter", "a"),
        tool("reporter", "b"),
        tool("reporter", "a"),
        done("ok"),
    ]));
    let mut h = AgentHarness::new(
        AgentIdentity {
            name: "t".into(),
            tool_allowlist: vec!["reporter".into()],
            tier: Default::default(),
            topic: String::new(),
        },
        "",
        HarnessConfig {
            agents_folder: dir.path().to_path_buf(),
            ..HarnessConfig::default()
        },
        provider,
        sandbox,
    );
    h.run_bounded(PhaseRequest::new("one")).await;
    h.run_bounded(PhaseRequest::direct(vec![DirectToolCall {
        name: "reporter".into(),
        arguments: json!({"text": "c"}),
    }]))
    .await;
    let report = h.run("").await;
    assert_eq!(
        report.summary.artifacts_created,
        ["/out/a.md", "/out/b.md", "/out/c.md"]
    );
}

#[tokio::test]
async fn an_artifact_the_agent_layer_saved_is_listed_once_and_recorded() {
    let fx = fixture(vec![done("x")]);
    let Fixture {
        dir, mut harness, ..
    } = fx;
    harness.run_bounded(PhaseRequest::new("x")).await;
    let saved = dir
        .path()
        .join("Agents/tester/artifacts/outline_20240101_000000.md");
    harness.record_artifact(&saved);
    harness.record_artifact(&saved);
    harness.finish(RunOutcome::Completed).await;
    let run_dir = harness.run_dir();
    let s: RunSummary =
        serde_json::from_slice(&std::fs::read(run_dir.join("run_summary.json")).unwrap()).unwrap();
    assert_eq!(s.artifacts_created, [saved.display().to_string()]);
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    let events: Vec<Value> = transcript
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &Value| e["event"] == "artifact")
        .collect();
    assert_eq!(events.len(), 2, "each note is recorded");
    assert_eq!(events[0]["path"], saved.display().to_string());
}

// ---------- standing memory ----------

struct FixedMemory;

#[async_trait::async_trait]
impl MemoryProvider for FixedMemory {
    async fn standing_context(&self, agent: &str, topic: &str) -> Option<String> {
        Some(format!("Standing context for {agent} about '{topic}'"))
    }
}

#[tokio::test]
async fn standing_memory_is_injected_before_every_call() {
    let fx = fixture(vec![tool("tool_a", "x"), done("y")]);
    let Fixture {
        dir: _dir,
        provider,
        harness,
        ..
    } = fx;
    let mut harness = harness.with_memory(Arc::new(FixedMemory));
    harness.run_bounded(PhaseRequest::new("the topic")).await;
    for req in provider.requests() {
        assert_eq!(req.messages[1].role, Role::System);
        assert_eq!(
            req.messages[1].content,
            "Standing context for tester about 'the topic'"
        );
    }
}

/// Changes with the topic: the block differs between phases, not between calls of a phase.
struct TopicMemory;

#[async_trait::async_trait]
impl MemoryProvider for TopicMemory {
    async fn standing_context(&self, _agent: &str, topic: &str) -> Option<String> {
        (!topic.starts_with("nothing")).then(|| format!("remember {topic}"))
    }
}

#[tokio::test]
async fn the_standing_block_is_recorded_when_it_changes_and_each_request_says_if_one_was_sent() {
    let fx = fixture(vec![tool("tool_a", "x"), done("y"), done("z"), done("w")]);
    let Fixture {
        dir: _dir,
        provider,
        harness,
        ..
    } = fx;
    let mut harness = harness.with_memory(Arc::new(TopicMemory));
    harness.run_bounded(PhaseRequest::new("alpha")).await;
    harness.run_bounded(PhaseRequest::new("beta")).await;
    harness.run_bounded(PhaseRequest::new("nothing here")).await;
    assert_eq!(provider.requests().len(), 4);
    let text = std::fs::read_to_string(harness.run_dir().join("transcript.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let standing: Vec<&Value> = lines
        .iter()
        .filter(|e| e["event"] == "standing_context")
        .map(|e| &e["text"])
        .collect();
    // alpha (twice: recorded once), beta, then none.
    assert_eq!(
        standing,
        [
            &json!("remember alpha"),
            &json!("remember beta"),
            &Value::Null
        ]
    );
    let sent: Vec<&Value> = lines
        .iter()
        .filter(|e| e["event"] == "llm_request")
        .map(|e| &e["standing_context"])
        .collect();
    assert_eq!(
        sent,
        [&json!(true), &json!(true), &json!(true), &json!(false)]
    );
}

// ---------- tool side effects in the records ----------

/// A memory-like tool: reports who called it and a written + approved event per call, and a
/// removal when asked to forget.
struct Rememberer;

#[async_trait::async_trait]
impl Tool for Rememberer {
    fn name(&self) -> &str {
        "rememberer"
    }
    fn description(&self) -> &str {
        "Remembers."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}},
               "required": ["text"], "additionalProperties": false})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::WritesWorkspace
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let text = ctx.str_arg("text")?.to_string();
        let caller = ctx.caller().cloned().unwrap_or_default();
        let out = ToolOutput::text(format!("{}@{}", caller.agent, caller.run_id));
        if text == "forget" {
            return Ok(out.with_event(ToolEvent::new(
                ToolEventKind::MemoryRemoved,
                json!({"id": "m1"}),
            )));
        }
        Ok(out
            .with_event(ToolEvent::new(
                ToolEventKind::MemoryWritten,
                // A tool cannot overwrite the record's own keys.
                json!({"id": "m1", "text": text, "event": "bogus", "seq": 0}),
            ))
            .with_event(ToolEvent::new(
                ToolEventKind::MemoryApproved,
                json!({"id": "m1"}),
            )))
    }
}

#[tokio::test]
async fn tool_events_become_transcript_events_and_summary_counts_and_tools_know_their_caller() {
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::new().with(Arc::new(Rememberer));
    let sandbox = Arc::new(Sandbox::new(SandboxConfig::default(), registry, None).unwrap());
    let provider = Arc::new(ScriptedProvider::new(vec![
        tool("rememberer", "the sky is green"),
        tool("rememberer", "forget"),
        done("ok"),
    ]));
    let mut h = AgentHarness::new(
        AgentIdentity {
            name: "librarian".into(),
            tool_allowlist: vec!["rememberer".into()],
            tier: Default::default(),
            topic: String::new(),
        },
        "",
        HarnessConfig {
            agents_folder: dir.path().to_path_buf(),
            ..HarnessConfig::default()
        },
        provider,
        sandbox,
    );
    let run_id = h.run_id().to_string();
    let r = h
        .run_bounded(PhaseRequest::direct(vec![DirectToolCall {
            name: "rememberer".into(),
            arguments: json!({"text": "tool-only too"}),
        }]))
        .await;
    assert_eq!(
        r.tool_calls[0].outcome,
        ToolOutcome::Result(format!("librarian@{run_id}"))
    );
    let report = h.run("remember things").await;
    assert_eq!(report.result.stop_reason, StopReason::Done);
    let counts = report.summary.memory;
    assert_eq!((counts.written, counts.approved, counts.removed), (2, 2, 1));
    let on_disk: RunSummary =
        serde_json::from_slice(&std::fs::read(&report.summary_path).unwrap()).unwrap();
    assert_eq!(on_disk.memory, counts);

    let text = std::fs::read_to_string(&report.transcript_path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let memory: Vec<&Value> = lines
        .iter()
        .filter(|e| e["event"].as_str().unwrap().starts_with("memory_"))
        .collect();
    let names: Vec<&str> = memory
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "memory_written",
            "memory_approved",
            "memory_written",
            "memory_approved",
            "memory_removed"
        ]
    );
    let written = memory[2];
    assert_eq!(written["tool"], "rememberer");
    assert_eq!(written["id"], "m1");
    assert_eq!(written["text"], "the sky is green");
    assert_eq!(written["label"], "__default__");
    assert_eq!(written["run_id"], run_id.as_str());
    assert_ne!(written["seq"], 0);
    // Each event follows its tool call and precedes its result.
    let pos = |pred: &dyn Fn(&Value) -> bool| lines.iter().position(pred).unwrap();
    let call = pos(&|e| e["event"] == "tool_call_started" && e["arguments"]["text"] == "forget");
    let removed = pos(&|e| e["event"] == "memory_removed");
    let result = pos(&|e| e["event"] == "tool_result" && e["seq"].as_u64() > Some(call as u64 + 1));
    assert!(
        call < removed && removed < result,
        "{call} {removed} {result}"
    );
}

#[test]
fn a_summary_written_before_memory_counts_existed_still_reads() {
    let fx = fixture(vec![]);
    let mut v = serde_json::to_value(fx.harness.summary("completed", "done")).unwrap();
    v.as_object_mut().unwrap().remove("memory");
    let s: RunSummary = serde_json::from_value(v).unwrap();
    assert_eq!(s.memory, lsm_harness::MemoryCounts::default());
}

// ---------- the budget rule, for any usage sequence ----------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn no_call_after_exhaustion_and_overshoot_bounded_by_one_prompt(
        budget in 1u64..2_000,
        usages in proptest::collection::vec((0u64..300, 0u64..300), 1..20),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // Distinct arguments per call: a run of identical calls would end as stalled.
        let script: Vec<_> = usages
            .iter()
            .enumerate()
            .map(|(k, &(i, o))| ScriptedResponse::tool("tool_a", json!({"text": format!("t{k}")})).with_usage(i, o))
            .collect();
        let n = script.len();
        let mut fx = fixture_with(script, Options { budget, max_output_tokens: None, ..Options::default() });
        let r = rt.block_on(fx.harness.run_bounded(PhaseRequest::new("go").with_max_iterations(n as u32 + 5)));
        let reqs = fx.provider.requests();
        // Replay the accounting: every call saw a cap ≤ what was left, and none was made at 0.
        let mut used = 0u64;
        let mut max_input = 0u64;
        for (k, req) in reqs.iter().enumerate() {
            prop_assert!(used < budget, "call {} made with nothing left", k + 1);
            prop_assert_eq!(req.options.max_output_tokens, Some(budget - used));
            // One call past the end of the script finds it exhausted (an error stop).
            let Some(&(i, o)) = usages.get(k) else { break };
            used += i + o.min(budget - used);
            max_input = max_input.max(i);
        }
        prop_assert_eq!(fx.harness.usage().tokens_used, used);
        prop_assert!(used <= budget + max_input);
        if reqs.len() <= n && used >= budget {
            prop_assert_eq!(r.stop_reason, StopReason::BudgetExhausted);
            prop_assert!(used >= budget);
        } else {
            prop_assert_eq!(reqs.len(), n + 1);
            prop_assert_eq!(r.stop_reason, StopReason::Error);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// The same bound over the harness's calls and the calls its tools make through the run's
    /// budget: every call, from either, gets an output cap of at most what is left, none is
    /// made once nothing is left, and the run overshoots by at most one call's prompt.
    #[test]
    fn the_bound_holds_across_harness_and_tool_calls(
        budget in 1u64..2_000,
        // Per model answer: call ask_model (else tool_a), its usage, the tool's requested
        // output cap and its call's usage.
        steps in proptest::collection::vec(
            (any::<bool>(), (0u64..300, 0u64..300), 1u64..500, (0u64..300, 0u64..300)),
            1..15,
        ),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // Distinct arguments per call: a run of identical calls would end as stalled.
        let script: Vec<_> = steps
            .iter()
            .enumerate()
            .map(|(k, &(ask, (i, o), requested, _))| {
                let call = if ask {
                    ScriptedResponse::tool("ask_model", json!({"text": format!("q{k}"), "max_output_tokens": requested}))
                } else {
                    ScriptedResponse::tool("tool_a", json!({"text": format!("t{k}")}))
                };
                call.with_usage(i, o)
            })
            .collect();
        let tool_script: Vec<_> = steps
            .iter()
            .filter(|s| s.0)
            .map(|&(_, _, _, (i, o))| ScriptedResponse::text("a").with_usage(i, o))
            .collect();
        let n = script.len();
        let mut fx = fixture_with(script, Options {
            budget,
            max_output_tokens: None,
            allowlist: vec!["tool_a", "ask_model"],
            tool_script,
            ..Options::default()
        });
        let r = rt.block_on(fx.harness.run_bounded(PhaseRequest::new("go").with_max_iterations(n as u32 + 5)));

        // Replay the run's calls in order (harness and tool alike).
        let calls = fx.calls.lock().unwrap().clone();
        let mut used = 0u64;
        let mut max_input = 0u64;
        let mut harness_calls = 0usize;
        let mut tool_calls = 0usize;
        for (k, call) in calls.iter().enumerate() {
            prop_assert!(used < budget, "call {} made with nothing left", k + 1);
            let left = budget - used;
            let expected_cap = if call.from_tool {
                let asking: Vec<u64> = steps.iter().filter(|s| s.0).map(|s| s.2).collect();
                let cap = asking[tool_calls].min(left);
                tool_calls += 1;
                cap
            } else {
                harness_calls += 1;
                left
            };
            prop_assert_eq!(call.max_output_tokens, Some(expected_cap), "call {}", k + 1);
            // The harness's call past the end of its script fails (an error stop).
            let Some(usage) = call.usage else { break };
            used += usage.total();
            max_input = max_input.max(usage.input_tokens);
        }
        prop_assert_eq!(fx.harness.usage().tokens_used, used);
        prop_assert!(used <= budget + max_input, "{} > {} + {}", used, budget, max_input);

        // Every ask_model call either reached the model or was refused with the budget text.
        let asked: Vec<&ToolOutcome> = r
            .tool_calls
            .iter()
            .filter(|c| c.name == "ask_model")
            .map(|c| &c.outcome)
            .collect();
        let answered = asked.iter().filter(|o| matches!(o, ToolOutcome::Result(_))).count();
        prop_assert_eq!(answered, tool_calls);
        let refusal = format!("budget exhausted: the run's token budget ({budget}) is spent");
        for o in &asked {
            if let ToolOutcome::Error(e) = o {
                prop_assert!(e.contains(&refusal), "{}", e);
            }
        }
        if harness_calls <= n && used >= budget {
            prop_assert_eq!(r.stop_reason, StopReason::BudgetExhausted);
        } else {
            prop_assert_eq!(harness_calls, n + 1);
            prop_assert_eq!(r.stop_reason, StopReason::Error);
        }
    }
}

// ---------- records from outside the loop ----------

/// Records every event it is sent.
#[derive(Default)]
struct Collect(std::sync::Mutex<Vec<Value>>);

impl lsm_harness::EventSink for Collect {
    fn event(&self, event: &lsm_harness::EventEnvelope) {
        self.0
            .lock()
            .unwrap()
            .push(serde_json::to_value(event).unwrap());
    }
}

/// `fx` with `sink` hearing its run's events.
fn with_sink(fx: Fixture, sink: Arc<dyn lsm_harness::EventSink>) -> Fixture {
    Fixture {
        harness: fx.harness.with_event_sink(sink),
        ..fx
    }
}

#[tokio::test]
async fn a_record_handle_appends_to_the_same_numbered_transcript_and_sink() {
    let sink = Arc::new(Collect::default());
    let mut fx = with_sink(
        fixture(vec![tool("tool_a", "x"), done("finished")]),
        sink.clone(),
    );
    let handle = fx.harness.record_handle();
    let r = fx
        .harness
        .run_bounded(PhaseRequest::new("go").with_max_iterations(5))
        .await;
    assert_eq!(r.stop_reason, StopReason::Done);
    let written = handle
        .clone()
        .record("interaction_request", json!({"request_id": "perm-1"}))
        .unwrap();
    assert_eq!(written.event.name(), "interaction_request");
    let t = transcript(&fx);
    let last = t.last().unwrap();
    assert_eq!(last["request_id"], "perm-1");
    // One sequence: the handle's line follows the loop's.
    let seqs: Vec<u64> = t.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(sink.0.lock().unwrap().last().unwrap(), last);
}

/// Records the batches it is sent: one entry per call of `events` (or of `event`).
#[derive(Default)]
struct Batches(std::sync::Mutex<Vec<Vec<String>>>);

impl lsm_harness::EventSink for Batches {
    fn event(&self, event: &lsm_harness::EventEnvelope) {
        self.events(std::slice::from_ref(event));
    }

    fn events(&self, batch: &[lsm_harness::EventEnvelope]) {
        let names = batch.iter().map(|e| e.event.name().to_string()).collect();
        self.0.lock().unwrap().push(names);
    }
}

#[tokio::test]
async fn a_sink_hears_the_lines_of_one_step_at_once_in_the_transcripts_order() {
    let sink = Arc::new(Batches::default());
    let mut fx = with_sink(
        fixture(vec![tool("tool_a", "x"), done("finished")]),
        sink.clone(),
    );
    let r = fx
        .harness
        .run_bounded(PhaseRequest::new("go").with_max_iterations(5))
        .await;
    assert_eq!(r.stop_reason, StopReason::Done);
    let batches = sink.0.lock().unwrap().clone();
    // The answer that asks for a tool and the call of that tool are one step's lines.
    assert!(
        batches.iter().any(|b| b.len() > 1
            && b.windows(2)
                .any(|w| w[0] == "llm_response" && w[1] == "tool_call_started")),
        "{batches:?}"
    );
    // Every journaled line is heard once, in the transcript's order.
    let heard: Vec<String> = batches.concat();
    let written: Vec<String> = transcript(&fx)
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(heard, written);
}

// ---------- cost, estimates, provider events ----------

/// $1 per million input tokens, $10 per million output tokens.
const PRICES: Pricing = Pricing {
    input: 1.0,
    output: 10.0,
    cached_input: None,
    cache_write: None,
};

#[tokio::test]
async fn cost_is_accounted_from_the_providers_prices() {
    let mut fx = fixture_with(
        vec![
            tool("tool_a", "1").with_usage(1000, 100),
            done("end").with_usage(2000, 50),
        ],
        Options {
            pricing: Some(PRICES),
            ..Options::default()
        },
    );
    fx.harness.run_bounded(PhaseRequest::new("go")).await;
    // (1000 + 2000) × 1 + (100 + 50) × 10 per million
    let cost = fx.harness.usage().cost_usd.unwrap();
    assert!((cost - 0.0045).abs() < 1e-12, "{cost}");
    fx.harness.finish(RunOutcome::Completed).await;
    let s = read_summary(&fx);
    assert!((s.token_usage.cost_usd.unwrap() - 0.0045).abs() < 1e-12);
    let responses: Vec<Value> = transcript(&fx)
        .into_iter()
        .filter(|e| e["event"] == "llm_response")
        .collect();
    assert!((responses[0]["cost_usd"].as_f64().unwrap() - 0.002).abs() < 1e-12);
}

#[tokio::test]
async fn without_prices_no_cost_is_claimed() {
    let mut fx = fixture(vec![done("x")]);
    fx.harness.run_bounded(PhaseRequest::new("go")).await;
    assert_eq!(fx.harness.usage().cost_usd, None);
    fx.harness.finish(RunOutcome::Completed).await;
    let raw = std::fs::read_to_string(fx.harness.run_dir().join("run_summary.json")).unwrap();
    assert!(!raw.contains("cost_usd"), "{raw}");
}

#[tokio::test]
async fn the_cost_ceiling_ends_the_run_as_budget_exhausted() {
    // Each call costs 0.002 + 0.001 = $0.003; the ceiling is $0.005: two calls, then stop.
    let script = (0..5)
        .map(|i| tool("tool_a", &i.to_string()).with_usage(2000, 100))
        .collect();
    let mut fx = fixture_with(
        script,
        Options {
            pricing: Some(PRICES),
            max_cost_usd: Some(0.005),
            ..Options::default()
        },
    );
    let r = fx
        .harness
        .run_bounded(PhaseRequest::new("go").with_max_iterations(10))
        .await;
    assert_eq!(r.stop_reason, StopReason::BudgetExhausted);
    assert_eq!(fx.provider.calls(), 2);
    let later = fx.harness.run_bounded(PhaseRequest::new("again")).await;
    assert_eq!(later.stop_reason, StopReason::BudgetExhausted);
    assert_eq!(fx.provider.calls(), 2, "no call in a later phase either");
    let exhausted = transcript(&fx)
        .into_iter()
        .find(|e| e["event"] == "budget_exhausted")
        .unwrap();
    assert!(
        exhausted["reason"]
            .as_str()
            .unwrap()
            .contains("max_cost_usd"),
        "{exhausted}"
    );
    fx.harness.finish(RunOutcome::Completed).await;
    assert_eq!(read_summary(&fx).token_usage.max_cost_usd, Some(0.005));
}

#[tokio::test]
async fn the_cost_ceiling_caps_the_output_tokens() {
    // $0.001 left at $10 per million output tokens buys 100 tokens.
    let mut fx = fixture_with(
        vec![done("x").with_usage(10, 5)],
        Options {
            pricing: Some(PRICES),
            max_cost_usd: Some(0.001),
            ..Options::default()
        },
    );
    fx.harness.run_bounded(PhaseRequest::new("go")).await;
    assert_eq!(
        fx.provider.requests()[0].options.max_output_tokens,
        Some(100)
    );
}

#[tokio::test]
async fn the_prompt_estimate_is_recorded_before_every_call() {
    let mut fx = fixture(vec![done("x")]);
    fx.harness.run_bounded(PhaseRequest::new("go")).await;
    let req = &fx.provider.requests()[0];
    let expected = fx.provider.estimate_prompt_tokens(req);
    let event = transcript(&fx)
        .into_iter()
        .find(|e| e["event"] == "llm_request")
        .unwrap();
    assert_eq!(event["prompt_tokens_estimate"], expected);
}

#[tokio::test]
async fn with_reserve_prompt_estimate_a_prompt_that_does_not_fit_is_not_sent() {
    // The offered tools alone make the prompt hundreds of tokens; 1000 left after the first
    // call fits it, 60 do not.
    let probe = fixture(vec![done("x")]);
    let estimate = {
        let mut probe = probe;
        probe.harness.run_bounded(PhaseRequest::new("go")).await;
        let req = probe.provider.requests().remove(0);
        probe.provider.estimate_prompt_tokens(&req)
    };
    assert!(estimate > 60, "{estimate}");
    let budget = estimate + 1000;
    let mut fx = fixture_with(
        vec![
            tool("tool_a", "1").with_usage(estimate, 1000 - 60),
            done("never"),
        ],
        Options {
            budget,
            reserve_prompt_estimate: true,
            ..Options::default()
        },
    );
    let r = fx.harness.run_bounded(PhaseRequest::new("go")).await;
    assert_eq!(r.stop_reason, StopReason::BudgetExhausted);
    assert_eq!(
        fx.provider.calls(),
        1,
        "the second prompt does not fit in 60 tokens"
    );
    // The first call's output cap left room for its prompt.
    assert_eq!(
        fx.provider.requests()[0].options.max_output_tokens,
        Some(1000)
    );
    let exhausted = transcript(&fx)
        .into_iter()
        .find(|e| e["event"] == "budget_exhausted")
        .unwrap();
    assert!(exhausted["prompt_tokens_estimate"].as_u64().unwrap() > 60);
    assert!(
        exhausted["reason"]
            .as_str()
            .unwrap()
            .contains("does not fit")
    );

    // The same run without the reservation makes the second call (the documented rule).
    let mut fx = fixture_with(
        vec![
            tool("tool_a", "1").with_usage(estimate, 1000 - 60),
            done("sent"),
        ],
        Options {
            budget,
            ..Options::default()
        },
    );
    let r = fx.harness.run_bounded(PhaseRequest::new("go")).await;
    assert_eq!(r.stop_reason, StopReason::Done);
    assert_eq!(fx.provider.calls(), 2);
}

/// Reports a retry, streamed text and a chain reset, then answers; with
/// `fail_with_broken_chain`, a call that chains from a previous response fails instead.
struct Eventful {
    fail_with_broken_chain: bool,
}

#[async_trait::async_trait]
impl Provider for Eventful {
    fn name(&self) -> &str {
        "eventful"
    }
    fn model(&self) -> &str {
        "m"
    }
    async fn complete(
        &self,
        request: &lsm_providers::LlmRequest,
    ) -> Result<lsm_providers::LlmResponse, lsm_providers::ProviderError> {
        self.complete_observed(request, &lsm_providers::NoObserver)
            .await
    }
    async fn complete_observed(
        &self,
        request: &lsm_providers::LlmRequest,
        observer: &dyn lsm_providers::CallObserver,
    ) -> Result<lsm_providers::LlmResponse, lsm_providers::ProviderError> {
        use lsm_providers::ProviderEvent;
        observer.on_event(ProviderEvent::Retry {
            attempt: 1,
            delay: std::time::Duration::from_millis(250),
            reason: "503 overloaded".into(),
        });
        observer.on_event(ProviderEvent::TextDelta { text: "hel".into() });
        observer.on_event(ProviderEvent::TextDelta { text: "lo".into() });
        if self.fail_with_broken_chain && request.options.previous_response_id.is_some() {
            return Err(lsm_providers::ProviderError::PreviousResponseNotFound {
                provider: "eventful".into(),
                response_id: request
                    .options
                    .previous_response_id
                    .clone()
                    .unwrap_or_default(),
                message: "gone".into(),
            });
        }
        observer.on_event(ProviderEvent::ChainReset {
            reason: "previous response not found".into(),
        });
        Ok(lsm_providers::LlmResponse {
            text: "hello".into(),
            response_id: Some("r-new".into()),
            usage: lsm_providers::Usage {
                input_tokens: 5,
                output_tokens: 2,
                ..Default::default()
            },
            ..Default::default()
        })
    }
}

#[derive(Default)]
struct Sink(std::sync::Mutex<Vec<Value>>);

impl lsm_harness::EventSink for Sink {
    fn event(&self, event: &lsm_harness::EventEnvelope) {
        self.0
            .lock()
            .unwrap()
            .push(serde_json::to_value(event).unwrap());
    }
}

fn eventful_harness(dir: &std::path::Path, fail: bool, sink: Arc<Sink>) -> AgentHarness {
    eventful_harness_with(dir, fail, sink)
}

fn eventful_harness_with(
    dir: &std::path::Path,
    fail: bool,
    sink: Arc<dyn lsm_harness::EventSink>,
) -> AgentHarness {
    let sandbox =
        Arc::new(Sandbox::new(SandboxConfig::default(), ToolRegistry::new(), None).unwrap());
    AgentHarness::new(
        AgentIdentity {
            name: "t".into(),
            tool_allowlist: vec![],
            tier: Default::default(),
            topic: String::new(),
        },
        "",
        HarnessConfig {
            agents_folder: dir.to_path_buf(),
            ..HarnessConfig::default()
        },
        Arc::new(Eventful {
            fail_with_broken_chain: fail,
        }),
        sandbox,
    )
    .with_event_sink(sink)
}

#[tokio::test]
async fn provider_progress_reaches_the_event_stream_and_retries_the_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(Sink::default());
    let mut h = eventful_harness(dir.path(), false, sink.clone());
    let r = h.run_bounded(PhaseRequest::new("x")).await;
    assert_eq!(r.final_text, "hello");
    let seen: Vec<String> = sink
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    assert!(seen.contains(&"llm_stream".to_string()), "{seen:?}");
    let streamed: String = sink
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "llm_stream" && e["kind"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(streamed, "hello");

    let text = std::fs::read_to_string(h.run_dir().join("transcript.jsonl")).unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"llm_stream"),
        "deltas stay out of the transcript"
    );
    let retry = names.iter().position(|n| *n == "llm_retry").unwrap();
    let reset = names.iter().position(|n| *n == "llm_chain_reset").unwrap();
    let response = names.iter().position(|n| *n == "llm_response").unwrap();
    assert!(retry < reset && reset < response, "{names:?}");
    assert_eq!(events[retry]["delay_ms"], 250);
    assert_eq!(events[retry]["reason"], "503 overloaded");
    h.finish(RunOutcome::Completed).await;
    let s: RunSummary =
        serde_json::from_slice(&std::fs::read(h.run_dir().join("run_summary.json")).unwrap())
            .unwrap();
    assert_eq!(
        s.context_tracking.per_label["__default__"]
            .response_id
            .as_deref(),
        Some("r-new"),
        "the fresh chain's id replaces the lost one"
    );
}

#[tokio::test]
async fn a_broken_chain_error_clears_the_stored_response_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = eventful_harness(dir.path(), true, Arc::new(Sink::default()));
    let first = h.run_bounded(PhaseRequest::new("x")).await;
    assert_eq!(first.stop_reason, StopReason::Done);
    let r = h.run_bounded(PhaseRequest::new("y")).await;
    assert_eq!(
        r.stop_reason,
        StopReason::Error,
        "the second call chains from r-new"
    );
    assert!(r.final_text.contains("gone"), "{}", r.final_text);
    h.finish(RunOutcome::Stopped(StopReason::Error)).await;
    let s: RunSummary =
        serde_json::from_slice(&std::fs::read(h.run_dir().join("run_summary.json")).unwrap())
            .unwrap();
    assert_eq!(
        s.context_tracking.per_label["__default__"].response_id,
        None
    );
    assert_eq!(s.status, "failed");
}

// ---------- the journal is the state ----------

/// The run's journal, parsed line by line.
fn journal(h: &AgentHarness) -> Vec<lsm_harness::EventEnvelope> {
    let text = std::fs::read_to_string(h.run_dir().join("transcript.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn scripted_answer() -> impl Strategy<Value = ScriptedResponse> {
    let tool_names = prop::sample::select(vec![
        "tool_a",
        "tool_b",
        "tool_c",
        "panicky",
        "guarded",
        "nope",
        "ask_model",
    ]);
    let call =
        (tool_names, "[a-z]{0,6}").prop_map(|(name, text)| lsm_providers::ScriptedToolCall {
            id: None,
            name: name.to_string(),
            arguments: json!({"text": text}),
        });
    (
        "[a-z ]{0,12}",
        prop::collection::vec(call, 0..3),
        prop::bool::weighted(0.05),
        1u64..50,
        1u64..20,
    )
        .prop_map(|(text, mut tool_calls, block, input, output)| {
            if block {
                tool_calls.push(lsm_providers::ScriptedToolCall {
                    id: None,
                    name: "block".into(),
                    arguments: json!({"reason": "stuck"}),
                });
            }
            ScriptedResponse {
                text,
                tool_calls,
                ..ScriptedResponse::default()
            }
            .with_usage(input, output)
        })
}

fn phase_request() -> impl Strategy<Value = PhaseRequest> {
    let label = prop::option::of(prop::sample::select(vec!["x", "y"]));
    let llm = (
        "[a-z]{0,8}",
        label,
        1u32..4,
        any::<bool>(),
        prop::option::of(prop::sample::subsequence(vec!["tool_a", "tool_b"], 0..2)),
    )
        .prop_map(|(message, label, n, keep, names)| {
            let mut r = PhaseRequest::new(message)
                .with_context_label(label)
                .with_max_iterations(n)
                .with_continue_context(keep);
            if let Some(names) = names {
                r = r.with_tool_names(names);
            }
            r
        });
    let direct = prop::collection::vec(
        prop::sample::select(vec!["tool_a", "tool_b", "tool_c", "panicky"]),
        0..3,
    )
    .prop_map(|names| PhaseRequest::direct(names.into_iter().map(|n| direct(n, "d")).collect()));
    prop_oneof![3 => llm, 1 => direct]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Folding the journal after every phase gives exactly the live state, whatever the
    /// model answers, the tools do and the phases ask for; also after the run ends.
    #[test]
    fn folding_the_journal_gives_the_live_state_after_every_phase(
        script in prop::collection::vec(scripted_answer(), 0..10),
        tool_script in prop::collection::vec(scripted_answer(), 0..3),
        phases in prop::collection::vec(phase_request(), 1..5),
        budget in prop::sample::select(vec![1_000_000u64, 150]),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut fx = fixture_with(script, Options { budget, tool_script, ..Options::default() });
        rt.block_on(async {
            for request in phases {
                fx.harness.run_bounded(request).await;
                let folded = lsm_harness::RunState::fold(&journal(&fx.harness));
                prop_assert_eq!(&folded, fx.harness.state());
            }
            fx.harness.finish(RunOutcome::Completed).await;
            let folded = lsm_harness::RunState::fold(&journal(&fx.harness));
            prop_assert_eq!(&folded, fx.harness.state());
            // The fold survives a round trip through JSON (it is what a resume would keep).
            let text = serde_json::to_string(&folded).unwrap();
            let back: lsm_harness::RunState = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&back, &folded);
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn the_live_state_is_the_fold_of_the_journal_in_a_run_with_every_kind_of_step() {
    let mut fx = fixture(vec![
        tool("tool_a", "x"),
        tool("nope", "y"),
        tool("guarded", "z"),
        done("finished"),
    ]);
    fx.harness
        .run_bounded(PhaseRequest::new("go").with_context_label(Some("a")))
        .await;
    fx.harness
        .run_bounded(PhaseRequest::direct(vec![direct("tool_b", "d")]))
        .await;
    let state = fx.harness.state().clone();
    assert_eq!(lsm_harness::RunState::fold(&journal(&fx.harness)), state);
    assert_eq!(state.phases.len(), 2);
    assert_eq!(state.tool_sequence, ["tool_a", "nope", "guarded", "tool_b"]);
    assert_eq!(state.approvals.denials, 2, "{:?}", state.approvals);
    assert!(state.current.is_none());
}

#[path = "harness/control.rs"]
mod control;

#[path = "harness/compaction.rs"]
mod compaction;

#[path = "harness/workers.rs"]
mod workers;

#[path = "harness/context.rs"]
mod context;

#[path = "harness/parallel.rs"]
mod parallel;

/// Counts the journal's lines on disk each time a line is about to be written.
struct LineWatcher {
    each_line: bool,
    transcript: std::sync::Mutex<Option<std::path::PathBuf>>,
    /// (the line about to be written, how many lines were on disk then)
    seen: std::sync::Mutex<Vec<(u64, usize)>>,
}

impl lsm_harness::EventSink for LineWatcher {
    fn event(&self, _event: &lsm_harness::EventEnvelope) {}

    fn before_journal(&self, seq: u64, _event: &lsm_harness::RunEvent) {
        let path = self.transcript.lock().unwrap().clone().unwrap();
        let on_disk = std::fs::read_to_string(path)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        self.seen.lock().unwrap().push((seq, on_disk));
    }

    fn watches_each_line(&self) -> bool {
        self.each_line
    }
}

async fn watch_lines(each_line: bool) -> (Vec<(u64, usize)>, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let watcher = Arc::new(LineWatcher {
        each_line,
        transcript: std::sync::Mutex::new(None),
        seen: std::sync::Mutex::new(Vec::new()),
    });
    let mut h = eventful_harness_with(dir.path(), false, watcher.clone());
    *watcher.transcript.lock().unwrap() = Some(h.run_dir().join("transcript.jsonl"));
    h.run_bounded(PhaseRequest::new("x")).await;
    h.finish(RunOutcome::Completed).await;
    let journal = lsm_harness::read_journal(&h.run_dir().join("transcript.jsonl")).unwrap();
    let seqs = journal.events.iter().map(|e| e.seq).collect();
    let seen = watcher.seen.lock().unwrap().clone();
    (seen, seqs)
}

#[tokio::test]
async fn a_steps_lines_are_written_at_once_unless_a_sink_watches_each_line() {
    let (batched, seqs) = watch_lines(false).await;
    let n = seqs.len() as u64;
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>(), "every line, in order");
    assert_eq!(
        batched.len() as u64,
        n,
        "told of every line before it is written"
    );
    assert!(batched.iter().all(|&(seq, on_disk)| (on_disk as u64) < seq));
    assert!(
        batched
            .iter()
            .any(|&(seq, on_disk)| (on_disk as u64) < seq - 1),
        "some step wrote several lines at once: {batched:?}"
    );
    let (each, seqs) = watch_lines(true).await;
    assert_eq!(seqs.len() as u64, n);
    assert!(
        each.iter().all(|&(seq, on_disk)| on_disk as u64 == seq - 1),
        "a watching sink sees every earlier line on disk: {each:?}"
    );
}
