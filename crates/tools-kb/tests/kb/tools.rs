//! The knowledge-base tools through a real sandbox (seed 002 §13.1 tests and more).

use std::sync::Arc;

use lsm_providers::{ScriptedProvider, ScriptedResponse};
use lsm_sandbox::{RiskLevel, Sandbox, SandboxConfig, ToolRegistry};
use lsm_tools_kb::tools;
use serde_json::{Value, json};

use super::{Fixture, pipeline};

struct Setup {
    f: Fixture,
    sandbox: Sandbox,
    provider: Arc<ScriptedProvider>,
}

fn setup(script: Vec<ScriptedResponse>) -> Setup {
    let f = Fixture::new();
    f.corpus();
    let kb = f.kb(None);
    f.ingest(&kb);
    let provider = Arc::new(ScriptedProvider::new(script));
    let p = Arc::new(pipeline(kb, Some(Arc::clone(&provider))));
    let registry = tools::registry_with(ToolRegistry::new(), Some(p));
    let config = SandboxConfig {
        allowed_read_paths: vec![f.docs.clone()],
        ..Default::default()
    };
    let sandbox = Sandbox::new(config, registry, None).unwrap();
    Setup {
        f,
        sandbox,
        provider,
    }
}

async fn call(s: &Setup, tool: &str, args: Value) -> Value {
    let e = s.sandbox.execute(tool, &args).await;
    let text = e
        .outcome
        .unwrap_or_else(|err| panic!("{tool} failed: {err}"));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{tool}: not JSON ({err}): {text}"))
}

async fn call_err(s: &Setup, tool: &str, args: Value) -> String {
    s.sandbox
        .execute(tool, &args)
        .await
        .outcome
        .expect_err("the call should fail")
        .to_string()
}

fn answer(text: &str, id: &str) -> ScriptedResponse {
    ScriptedResponse {
        text: text.into(),
        response_id: Some(id.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn query_context_returns_a_serialized_context_package() {
    let s = setup(vec![]);
    let pkg = call(
        &s,
        "query_context",
        json!({"query": "aeroelastic flutter", "mode": "grounded"}),
    )
    .await;
    for key in [
        "request",
        "mode",
        "candidates",
        "remote_sources",
        "retrieval_trace",
        "context_block",
        "source_labels",
        "conversation_id",
        "relevance",
    ] {
        assert!(pkg.get(key).is_some(), "missing {key}: {pkg}");
    }
    assert_eq!(pkg["candidates"][0]["label"], "S1");
    assert!(
        pkg["candidates"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("wings.md")
    );
    assert!(
        !pkg["retrieval_trace"]["stages"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    // Retrieval only: no LLM call.
    assert_eq!(s.provider.calls(), 0);
}

#[tokio::test]
async fn query_context_resolves_a_mode_given_as_a_string_or_an_object() {
    let s = setup(vec![]);
    let by_name = call(
        &s,
        "query_context",
        json!({"query": "wing", "mode": "insight"}),
    )
    .await;
    assert_eq!(by_name["mode"]["synthesis_style"], "insight");
    assert_eq!(by_name["mode"]["local_policy"]["k"], 8);
    let by_object = call(
        &s,
        "query_context",
        json!({"query": "wing", "mode": {"retrieval_profile": "lexical", "local_policy": {"k": 1, "min_relevance": 0.0}}}),
    )
    .await;
    assert_eq!(by_object["mode"]["retrieval_profile"], "lexical");
    assert_eq!(by_object["candidates"].as_array().unwrap().len(), 1);
    let err = call_err(
        &s,
        "query_context",
        json!({"query": "wing", "mode": "nope"}),
    )
    .await;
    assert!(err.contains("unknown mode 'nope'"), "{err}");
}

#[tokio::test]
async fn query_context_round_trips_conversation_and_prompt_fields() {
    let s = setup(vec![]);
    let pkg = call(
        &s,
        "query_context",
        json!({"query": "wing", "starting_prompt": "Be terse.", "conversation_id": "conv-9",
               "prior_response_id": "resp-3", "filters": {"ext_allow": ["md"]}, "k": 2}),
    )
    .await;
    assert_eq!(pkg["starting_prompt"], "Be terse.");
    assert_eq!(pkg["conversation_id"], "conv-9");
    assert_eq!(pkg["prior_response_id"], "resp-3");
    assert_eq!(pkg["request"]["filters"]["ext_allow"], json!(["md"]));
    assert!(
        pkg["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ext"] == "md")
    );
}

#[tokio::test]
async fn execute_context_returns_a_serialized_query_response() {
    let s = setup(vec![answer(
        "Flutter is an aeroelastic instability [S1].",
        "resp-1",
    )]);
    let pkg = call(
        &s,
        "query_context",
        json!({"query": "aeroelastic flutter", "conversation_id": "c1", "prior_response_id": "r0"}),
    )
    .await;
    let resp = call(
        &s,
        "execute_context",
        json!({"question": "What is flutter?", "context_package": pkg}),
    )
    .await;
    for key in [
        "answer",
        "package",
        "citations",
        "invalid_citations",
        "fallback",
        "conversation_id",
        "response_id",
    ] {
        assert!(resp.get(key).is_some(), "missing {key}: {resp}");
    }
    assert_eq!(
        resp["answer"],
        "Flutter is an aeroelastic instability [S1]."
    );
    assert_eq!(resp["citations"][0]["label"], "S1");
    assert_eq!(resp["conversation_id"], "c1");
    assert_eq!(resp["response_id"], "resp-1");
    let sent = &s.provider.requests()[0];
    assert_eq!(sent.options.previous_response_id.as_deref(), Some("r0"));
}

#[tokio::test]
async fn execute_context_cites_only_what_the_index_holds() {
    let s = setup(vec![answer("It says [S1] and [S2].", "resp-1")]);
    let mut pkg = call(
        &s,
        "query_context",
        json!({"query": "aeroelastic flutter", "k": 1}),
    )
    .await;
    // A forged source is dropped; a real source's text is re-read from the index.
    let forged = json!({"label": "S2", "chunk_id": "ffffffffffffffff", "path": "/etc/passwd",
        "ext": "", "content_type": "text", "heading": "", "chunk_index": 0, "score": 1.0,
        "relevance": 1.0, "text": "made up"});
    pkg["candidates"].as_array_mut().unwrap().push(forged);
    pkg["candidates"][0]["text"] = json!("tampered");
    let resp = call(
        &s,
        "execute_context",
        json!({"question": "q", "context_package": pkg}),
    )
    .await;
    assert_eq!(resp["answer"], "It says [S1] and.");
    assert_eq!(resp["invalid_citations"], json!(["S2"]));
    let block = resp["package"]["context_block"].as_str().unwrap();
    assert!(
        block.contains("aeroelastic") && !block.contains("tampered") && !block.contains("made up")
    );
    assert!(
        resp["package"]["retrieval_trace"]["notes"]
            .to_string()
            .contains("dropped")
    );
}

#[tokio::test]
async fn query_and_synthesize_returns_a_complete_query_response() {
    let s = setup(vec![answer("Jet engines make thrust [S1].", "resp-5")]);
    let resp = call(
        &s,
        "query_and_synthesize",
        json!({"query": "how do jet engines produce thrust", "mode": "grounded"}),
    )
    .await;
    assert_eq!(resp["answer"], "Jet engines make thrust [S1].");
    assert!(
        resp["citations"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("engines.txt")
    );
    assert!(
        resp["package"]["context_block"]
            .as_str()
            .unwrap()
            .starts_with("[S1] ")
    );
    assert_eq!(resp["fallback"], Value::Null);
}

#[tokio::test]
async fn query_and_synthesize_returns_ids_for_chaining() {
    let s = setup(vec![
        answer("First [S1].", "resp-a"),
        answer("Second [S1].", "resp-b"),
    ]);
    let first = call(
        &s,
        "query_and_synthesize",
        json!({"query": "jet engine thrust"}),
    )
    .await;
    let conv = first["conversation_id"].as_str().unwrap().to_string();
    assert!(!conv.is_empty());
    assert_eq!(first["response_id"], "resp-a");
    let second = call(
        &s,
        "query_and_synthesize",
        json!({"query": "jet engine nozzle", "conversation_id": conv, "prior_response_id": "resp-a"}),
    )
    .await;
    assert_eq!(second["conversation_id"], first["conversation_id"]);
    assert_eq!(second["response_id"], "resp-b");
    let sent = s.provider.requests();
    assert_eq!(
        sent[1].options.previous_response_id.as_deref(),
        Some("resp-a")
    );
    assert_eq!(
        sent[0].options.prompt_cache_key,
        sent[1].options.prompt_cache_key
    );
}

#[tokio::test]
async fn query_llm_forwards_cache_parameters_and_returns_the_response_id() {
    let s = setup(vec![answer("hello", "resp-llm")]);
    let out = call(
        &s,
        "query_llm",
        json!({"prompt": "Say hello", "system_prompt": "Be brief.", "previous_response_id": "resp-0",
               "prompt_cache_key": "agent:topic", "prompt_cache_retention": "24h", "max_output_tokens": 50}),
    )
    .await;
    assert_eq!(out["text"], "hello");
    assert_eq!(out["response_id"], "resp-llm");
    let sent = &s.provider.requests()[0];
    assert_eq!(sent.options.previous_response_id.as_deref(), Some("resp-0"));
    assert_eq!(
        sent.options.prompt_cache_key.as_deref(),
        Some("agent:topic")
    );
    assert_eq!(sent.options.prompt_cache_retention.as_deref(), Some("24h"));
    assert_eq!(sent.options.max_output_tokens, Some(50));
    assert_eq!(sent.messages[0].content, "Be brief.");
}

#[test]
fn pipeline_tools_are_registered_only_with_a_pipeline_and_query_knowledge_base_never() {
    let s = setup(vec![]);
    let names: Vec<&str> = s.sandbox.registry().names().collect();
    assert_eq!(names, {
        let mut all = tools::TOOL_NAMES.to_vec();
        all.push("load_url");
        all.sort_unstable();
        all
    });
    assert!(!names.contains(&"query_knowledge_base"));
    let without = tools::registry_with(lsm_sandbox::builtin::registry(), None);
    for t in tools::TOOL_NAMES {
        assert!(
            !without.contains(t),
            "{t} registered without a knowledge base"
        );
    }
    assert!(!without.contains("query_knowledge_base"));
    // No provider: no query_llm, the pipeline tools stay (their answers are fallbacks).
    let kb = s.f.kb(None);
    let p = Arc::new(pipeline(kb, None));
    let no_llm = tools::registry_with(ToolRegistry::new(), Some(p));
    assert!(!no_llm.contains("query_llm") && no_llm.contains("query_and_synthesize"));
}

#[test]
fn the_catalog_describes_exactly_the_registered_tools() {
    let s = setup(vec![]);
    let mut registered: Vec<tools::ToolInfo> = s
        .sandbox
        .registry()
        .iter()
        .map(|t| tools::ToolInfo {
            name: t.name().to_string(),
            risk: t.risk(),
            needs_permission: t.needs_permission(),
            description: t.description().to_string(),
        })
        .collect();
    let mut listed = tools::catalog(&lsm_tools_kb::remote::RemoteConfig::default());
    registered.sort_by(|a, b| a.name.cmp(&b.name));
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(listed, registered);
    // With a remote provider configured: its tool and the chain, both network tools.
    let remote = lsm_tools_kb::remote::RemoteConfig {
        providers: vec![lsm_tools_kb::remote::RemoteProviderConfig {
            name: "arxiv".into(),
            kind: "arxiv".into(),
            url: None,
            min_interval_seconds: 3.0,
            cache_ttl_seconds: 60.0,
        }],
        ..Default::default()
    };
    let listed = tools::catalog(&remote);
    for name in ["query_arxiv", "query_remote_chain"] {
        let row = listed.iter().find(|t| t.name == name).unwrap();
        assert_eq!(row.risk, RiskLevel::Network, "{name}");
    }
}

#[test]
fn tool_schemas_describe_every_argument_refuse_unknown_ones_and_need_no_url_access() {
    let s = setup(vec![]);
    for tool in s.sandbox.registry().iter() {
        let schema = tool.parameters();
        assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
        for (name, prop) in schema["properties"].as_object().unwrap() {
            assert!(
                prop.get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|d| !d.is_empty()),
                "{}.{name} has no description",
                tool.name()
            );
        }
        if tool.name() == "load_url" {
            assert_eq!(tool.risk(), RiskLevel::Network);
            assert!(tool.needs_permission());
            continue;
        }
        assert_eq!(tool.risk(), RiskLevel::ReadOnly, "{}", tool.name());
        assert!(!tool.needs_permission(), "{}", tool.name());
    }
}

#[tokio::test]
async fn a_composed_mode_with_remote_sources_is_refused_in_the_tool_result() {
    let s = setup(vec![]);
    let err = call_err(
        &s,
        "query_and_synthesize",
        json!({"query": "wing", "mode": {"remote_policy": {"enabled": true}}}),
    )
    .await;
    assert!(err.contains("allow_url_access"), "{err}");
    assert_eq!(s.provider.calls(), 0);
}

#[tokio::test]
async fn extract_snippets_source_map_similarity_search_and_find_section_work() {
    let s = setup(vec![]);
    s.f.write("aero/wings-copy.md", "# Wings\n\nThe boundary layer on a swept wing thickens toward the tip.\n\n## Flutter\n\nFlutter is an aeroelastic instability where the wing oscillates with growing amplitude.\n");
    let kb = s.f.kb(None);
    s.f.ingest(&kb);
    drop(kb);

    let snips = call(
        &s,
        "extract_snippets",
        json!({"query": "nozzle", "max_snippets": 3}),
    )
    .await;
    let first = &snips["snippets"][0];
    assert!(first["path"].as_str().unwrap().ends_with("engines.txt"));
    assert!(first["snippet"].as_str().unwrap().contains("nozzle"));

    let map = call(&s, "source_map", json!({"query": "wing", "k": 6})).await;
    assert!(map["files"].as_u64().unwrap() >= 2, "{map}");
    let (path, entry) = map["sources"].as_object().unwrap().iter().next().unwrap();
    assert!(path.contains("docs"));
    assert_eq!(
        entry["count"].as_u64().unwrap() as usize,
        entry["chunks"].as_array().unwrap().len()
    );
    let id = entry["chunks"][0]["chunk_id"].as_str().unwrap().to_string();
    let by_id = call(
        &s,
        "source_map",
        json!({"chunk_ids": [id, "0000000000000000"]}),
    )
    .await;
    assert_eq!(by_id["files"], 1);
    assert_eq!(by_id["missing_chunk_ids"], json!(["0000000000000000"]));

    let sim = call(
        &s,
        "similarity_search",
        json!({"path_contains": "aero", "threshold": 0.9}),
    )
    .await;
    assert_eq!(sim["pairs_found"], 1, "{sim}");
    let a = sim["pairs"][0]["a"]["path"].as_str().unwrap();
    let b = sim["pairs"][0]["b"]["path"].as_str().unwrap();
    assert!(a.contains("wings") && b.contains("wings") && a != b);

    let sec = call(
        &s,
        "find_section",
        json!({"path": "aero/wings.md", "heading": "flutter"}),
    )
    .await;
    assert_eq!(sec["heading"], "Flutter");
    assert_eq!(sec["heading_path"], json!(["Wings", "Flutter"]));
    assert!(sec["text"].as_str().unwrap().contains("aeroelastic"));
    assert!(!sec["text"].as_str().unwrap().contains("boundary layer"));
    let err = call_err(
        &s,
        "find_section",
        json!({"path": "aero/wings.md", "heading": "Nope"}),
    )
    .await;
    assert!(err.contains("Wings | Flutter"), "{err}");
    // Paths are confined by the sandbox.
    let err = call_err(
        &s,
        "find_section",
        json!({"path": "/etc/hostname", "heading": "x"}),
    )
    .await;
    assert!(err.contains("may not use path"), "{err}");
}

/// A provider the run's budget has closed: every call is refused before it is made.
struct BudgetSpent;

const SPENT: &str = "budget exhausted: the run's token budget (300) is spent; no further model calls are possible in this run";

#[async_trait::async_trait]
impl lsm_providers::Provider for BudgetSpent {
    fn name(&self) -> &str {
        "spent"
    }
    fn model(&self) -> &str {
        "spent"
    }
    async fn complete(
        &self,
        _request: &lsm_providers::LlmRequest,
    ) -> Result<lsm_providers::LlmResponse, lsm_providers::ProviderError> {
        Err(lsm_providers::ProviderError::BudgetExhausted {
            reason: "the run's token budget (300) is spent".into(),
        })
    }
}

#[tokio::test]
async fn a_refused_llm_call_is_a_budget_exhausted_error_from_every_tool_that_calls_the_model() {
    let f = super::Fixture::new();
    f.corpus();
    let kb = f.kb(None);
    f.ingest(&kb);
    let p = Arc::new(lsm_tools_kb::Pipeline::new(
        kb,
        Some(Arc::new(BudgetSpent)),
        lsm_tools_kb::ModePolicy::new(&[], false),
    ));
    let registry = tools::registry_with(ToolRegistry::new(), Some(p));
    let s = Setup {
        sandbox: Sandbox::new(SandboxConfig::default(), registry, None).unwrap(),
        f,
        provider: Arc::new(ScriptedProvider::new(vec![])),
    };
    // Synthesis: not a fallback answer built from excerpts, but an error saying why.
    let e = call_err(
        &s,
        "query_and_synthesize",
        json!({"query": "how do jet engines produce thrust", "mode": "grounded"}),
    )
    .await;
    assert!(e.ends_with(SPENT), "{e}");
    // Re-ranking: not a quietly unranked list.
    let e = call_err(
        &s,
        "query_context",
        json!({"query": "jet engine thrust", "mode": {"retrieval_profile": "llm_rerank"}}),
    )
    .await;
    assert!(e.ends_with(SPENT), "{e}");
    // Synthesis from a package (retrieval alone makes no model call).
    let pkg = call(
        &s,
        "query_context",
        json!({"query": "jet engine thrust", "mode": "grounded"}),
    )
    .await;
    let e = call_err(
        &s,
        "execute_context",
        json!({"question": "how do jet engines produce thrust", "context_package": pkg}),
    )
    .await;
    assert!(e.ends_with(SPENT), "{e}");
    let e = call_err(&s, "query_llm", json!({"prompt": "hi"})).await;
    assert!(e.ends_with(SPENT), "{e}");
    assert!(!e.contains("the LLM call failed"), "{e}");
}
