//! The knowledge-base tools (`lsm_sandbox::Tool`), registered only when a knowledge base is
//! configured: `query_context`, `execute_context`, `query_and_synthesize` (seed 002 §13.1),
//! `query_llm`, `extract_snippets`, `source_map`, `similarity_search`, `find_section`.
//!
//! Every output is JSON and bounded ([`MAX_OUTPUT_BYTES`]): long texts are cut first, then
//! items dropped, and the output says so. None of these tools reaches the network: the ones
//! that call the configured LLM provider are not URL access, so their risk level is
//! `read_only`.

use std::collections::BTreeMap;
use std::sync::Arc;

use lsm_providers::{CallOptions, LlmRequest, Message};
use lsm_sandbox::{
    PathArg, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, schema_for,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::KbError;
use crate::mode::{ModeConfig, ModePolicy, ModeSpec};
use crate::pipeline::{ContextPackage, Pipeline, QueryRequest, QueryResponse, truncate_chars};
use crate::remote::{RemoteConfig, RemoteProvider};
use crate::retrieve::MinHash;
use crate::store::{Filters, dot};

/// Largest JSON output of one tool call, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 60 * 1024;

/// The names of every tool [`register`] may add.
pub const TOOL_NAMES: &[&str] = &[
    "query_context",
    "execute_context",
    "query_and_synthesize",
    "query_llm",
    "extract_snippets",
    "source_map",
    "similarity_search",
    "find_section",
];

/// Remote-source tools (risk `network`: they run only when the sandbox allows URL access):
/// `query_<provider>` per configured provider, `query_remote_chain`, `load_url`.
pub const REMOTE_TOOL_NAMES: &[&str] = &["query_remote_chain", "load_url"];

/// Tools whose arguments carry a mode, checked by [`ModeGuard`] before they run.
pub const MODE_TOOLS: &[&str] = &["query_context", "execute_context", "query_and_synthesize"];

/// Register the knowledge-base tools over `pipeline` (`query_llm` only when it has a
/// provider).
pub fn register(registry: &mut ToolRegistry, pipeline: Arc<Pipeline>) {
    registry.register(Arc::new(QueryContext(Arc::clone(&pipeline))));
    registry.register(Arc::new(ExecuteContext(Arc::clone(&pipeline))));
    registry.register(Arc::new(QueryAndSynthesize(Arc::clone(&pipeline))));
    if pipeline.provider().is_some() {
        registry.register(Arc::new(QueryLlm(Arc::clone(&pipeline))));
    }
    registry.register(Arc::new(ExtractSnippets(Arc::clone(&pipeline))));
    registry.register(Arc::new(SourceMap(Arc::clone(&pipeline))));
    registry.register(Arc::new(SimilaritySearch(Arc::clone(&pipeline))));
    registry.register(Arc::new(FindSection));
    for p in pipeline.remote() {
        registry.register(Arc::new(QueryRemote {
            name: format!("query_{}", p.name()),
            description: query_remote_description(p.name()),
            provider: Arc::clone(p),
        }));
    }
    if !pipeline.remote().is_empty() {
        let config = &pipeline.kb().config().remote;
        let chain: Vec<Arc<dyn RemoteProvider>> = if config.chain.is_empty() {
            pipeline.remote().to_vec()
        } else {
            config
                .chain
                .iter()
                .filter_map(|n| pipeline.remote().iter().find(|p| p.name() == n).cloned())
                .collect()
        };
        registry.register(Arc::new(QueryRemoteChain(chain)));
    }
    registry.register(Arc::new(LoadUrl(pipeline.kb().config().remote.clone())));
}

fn query_remote_description(provider: &str) -> String {
    format!("Search the remote source '{provider}' (network): titles, URLs and excerpts.")
}

/// What a tool is, without the tool: for listing the tools a configuration offers before
/// any index exists (`lsm tools list`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ToolInfo {
    /// The tool's name.
    pub name: String,
    /// Its risk level.
    pub risk: RiskLevel,
    /// Whether it needs a person's permission by default.
    pub needs_permission: bool,
    /// What it tells the model it does.
    pub description: String,
}

/// Every tool [`register`] adds for a knowledge base with `remote` configured, as
/// [`ToolInfo`] rows in registration order (`query_llm` included: it is offered whenever an
/// LLM provider is configured, which a run always has).
pub fn catalog(remote: &RemoteConfig) -> Vec<ToolInfo> {
    let info = |name: &str, risk: RiskLevel, needs_permission: bool, description: &str| ToolInfo {
        name: name.to_string(),
        risk,
        needs_permission,
        description: description.to_string(),
    };
    // The pipeline tools: all read-only (the configured LLM is not URL access), none asks.
    let pipeline_tools = [
        ("query_context", QUERY_CONTEXT_DESCRIPTION),
        ("execute_context", EXECUTE_CONTEXT_DESCRIPTION),
        ("query_and_synthesize", QUERY_AND_SYNTHESIZE_DESCRIPTION),
        ("query_llm", QUERY_LLM_DESCRIPTION),
        ("extract_snippets", EXTRACT_SNIPPETS_DESCRIPTION),
        ("source_map", SOURCE_MAP_DESCRIPTION),
        ("similarity_search", SIMILARITY_SEARCH_DESCRIPTION),
        ("find_section", FIND_SECTION_DESCRIPTION),
    ];
    let mut out: Vec<ToolInfo> = pipeline_tools
        .iter()
        .map(|(name, description)| info(name, RiskLevel::ReadOnly, false, description))
        .collect();
    for p in &remote.providers {
        out.push(info(
            &format!("query_{}", p.name),
            RiskLevel::Network,
            false,
            &query_remote_description(&p.name),
        ));
    }
    if !remote.providers.is_empty() {
        out.push(info(
            "query_remote_chain",
            RiskLevel::Network,
            false,
            QUERY_REMOTE_CHAIN_DESCRIPTION,
        ));
    }
    out.push(info(
        "load_url",
        RiskLevel::Network,
        true,
        LOAD_URL_DESCRIPTION,
    ));
    out
}

/// `base` plus the knowledge-base tools when there is a pipeline (a configured knowledge
/// base); without one, `base` unchanged.
pub fn registry_with(mut base: ToolRegistry, pipeline: Option<Arc<Pipeline>>) -> ToolRegistry {
    if let Some(p) = pipeline {
        register(&mut base, p);
    }
    base
}

fn parse<T: DeserializeOwned>(ctx: &ToolContext) -> Result<T, ToolError> {
    serde_json::from_value(ctx.args.clone()).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

fn tool_err(e: KbError) -> ToolError {
    match e {
        KbError::InvalidRequest(m) => ToolError::InvalidArguments(m),
        other => ToolError::Failed(other.to_string()),
    }
}

fn to_json(v: &impl serde::Serialize) -> Result<Value, ToolError> {
    serde_json::to_value(v).map_err(|e| ToolError::Failed(format!("cannot serialize: {e}")))
}

/// Serialize `value` within [`MAX_OUTPUT_BYTES`]: cut every string longer than a shrinking
/// limit, then drop array items from the end, noting it in `"truncated"`.
pub fn bounded(value: Value) -> String {
    let text = value.to_string();
    if text.len() <= MAX_OUTPUT_BYTES {
        return text;
    }
    for limit in [1500, 600, 200, 60] {
        let mut v = value.clone();
        cut_strings(&mut v, limit);
        mark_truncated(
            &mut v,
            &format!("texts cut to {limit} characters to fit the output limit"),
        );
        let t = v.to_string();
        if t.len() <= MAX_OUTPUT_BYTES {
            return t;
        }
    }
    let mut v = value;
    cut_strings(&mut v, 60);
    loop {
        if !drop_last_item(&mut v) {
            break;
        }
        mark_truncated(&mut v, "items dropped to fit the output limit");
        let t = v.to_string();
        if t.len() <= MAX_OUTPUT_BYTES {
            return t;
        }
    }
    json!({"truncated": "the output did not fit the limit"}).to_string()
}

fn cut_strings(v: &mut Value, limit: usize) {
    match v {
        Value::String(s) if s.chars().count() > limit => *s = truncate_chars(s, limit),
        Value::Array(items) => items.iter_mut().for_each(|i| cut_strings(i, limit)),
        Value::Object(map) => map.values_mut().for_each(|i| cut_strings(i, limit)),
        _ => {}
    }
}

fn mark_truncated(v: &mut Value, note: &str) {
    if let Value::Object(map) = v {
        map.insert("truncated".into(), Value::String(note.into()));
    }
}

/// Drop the last item of an array inside the largest member (depth first). Returns whether
/// one was dropped.
fn drop_last_item(v: &mut Value) -> bool {
    match v {
        Value::Array(items) => items.pop().is_some(),
        Value::Object(map) => {
            let mut keys: Vec<(usize, String)> = map
                .iter()
                .map(|(k, x)| (x.to_string().len(), k.clone()))
                .collect();
            keys.sort_by_key(|k| std::cmp::Reverse(k.0));
            keys.into_iter()
                .any(|(_, k)| map.get_mut(&k).is_some_and(drop_last_item))
        }
        _ => false,
    }
}

/// A package trimmed for the model: long source texts are cut.
fn package_json(pkg: &ContextPackage) -> Result<Value, ToolError> {
    let mut v = to_json(pkg)?;
    if let Some(cands) = v.get_mut("candidates").and_then(Value::as_array_mut) {
        for c in cands {
            if let Some(t) = c.get_mut("text")
                && let Some(s) = t.as_str()
            {
                *t = Value::String(truncate_chars(s, crate::pipeline::MAX_SOURCE_CHARS));
            }
        }
    }
    Ok(v)
}

fn response_json(r: &QueryResponse) -> Result<Value, ToolError> {
    let mut v = to_json(r)?;
    if let Some(obj) = v.as_object_mut() {
        obj.insert("package".into(), package_json(&r.package)?);
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------------

/// Checks the mode a tool call carries against a [`ModePolicy`] before the tool runs — what
/// the harness calls for every tool in [`MODE_TOOLS`] (seed 002 §13.2). A refusal is a clear
/// message for the model.
#[derive(Debug, Clone)]
pub struct ModeGuard {
    policy: ModePolicy,
    custom: BTreeMap<String, ModeConfig>,
}

impl ModeGuard {
    /// A guard with this policy and these configured modes.
    pub fn new(policy: ModePolicy, custom: BTreeMap<String, ModeConfig>) -> Self {
        ModeGuard { policy, custom }
    }

    /// Check the call's mode; calls of other tools pass.
    ///
    /// # Errors
    /// The reason the mode is refused.
    pub fn check(&self, tool: &str, args: &Value) -> Result<(), String> {
        if !MODE_TOOLS.contains(&tool) {
            return Ok(());
        }
        let mode = if tool == "execute_context" {
            match args.get("context_package").and_then(|p| p.get("mode")) {
                None | Some(Value::Null) => return Ok(()),
                Some(m) => {
                    let mut mode: ModeConfig = serde_json::from_value(m.clone())
                        .map_err(|e| format!("mode refused: the package's mode is invalid: {e}"))?;
                    // A package's mode was checked when it was built; remote sources are never
                    // used at this stage.
                    mode.remote_policy.enabled = false;
                    Some(mode)
                }
            }
        } else {
            match args.get("mode") {
                None | Some(Value::Null) => None,
                Some(m) => {
                    let spec: ModeSpec = serde_json::from_value(m.clone())
                        .map_err(|e| format!("mode refused: not a mode name or object: {e}"))?;
                    let composed = matches!(spec, ModeSpec::Config(_));
                    let mut mode =
                        crate::mode::resolve(&spec, &self.custom).map_err(|e| e.to_string())?;
                    if !composed {
                        // Named modes run without remote sources when URL access is off.
                        mode.remote_policy.enabled = false;
                    }
                    Some(mode)
                }
            }
        };
        match mode {
            None => Ok(()),
            Some(m) => self.policy.validate(&m).map_err(|e| e.to_string()),
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// `query_context`: retrieve sources (no LLM call) and return the `ContextPackage`.
#[derive(Debug)]
pub struct QueryContext(pub Arc<Pipeline>);

/// Arguments of `query_context`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryContextArgs {
    /// What to search the knowledge base for.
    pub query: String,
    /// A mode name (grounded, insight, hybrid, or a configured one) or a ModeConfig object.
    pub mode: Option<ModeSpec>,
    /// Filters: path_contains, ext_allow, ext_deny.
    pub filters: Option<Filters>,
    /// Number of sources to return (1..100; default: the mode's k).
    pub k: Option<u64>,
    /// Instructions to place before the sources when the package is executed.
    pub starting_prompt: Option<String>,
    /// Conversation id to continue (from an earlier result).
    pub conversation_id: Option<String>,
    /// The previous answer's response_id, for chaining.
    pub prior_response_id: Option<String>,
}

/// What `QueryContext` tells the model it does.
const QUERY_CONTEXT_DESCRIPTION: &str = "Search the knowledge base without writing an answer: \
    returns a ContextPackage (sources with labels, text, relevance, and a retrieval trace) to \
    inspect or pass to execute_context.";

#[async_trait::async_trait]
impl Tool for QueryContext {
    fn name(&self) -> &str {
        "query_context"
    }
    fn description(&self) -> &str {
        QUERY_CONTEXT_DESCRIPTION
    }
    fn parameters(&self) -> Value {
        schema_for::<QueryContextArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: QueryContextArgs = parse(&ctx)?;
        let request = QueryRequest {
            query: a.query,
            mode: a.mode,
            filters: a.filters.unwrap_or_default(),
            k: a.k.map(|k| k as usize),
            starting_prompt: a.starting_prompt,
            conversation_id: a.conversation_id,
            prior_response_id: a.prior_response_id,
        };
        let pkg = self.0.build_sources(request).await.map_err(tool_err)?;
        Ok(ToolOutput::text(bounded(package_json(&pkg)?)))
    }
}

/// `execute_context`: answer a question from a `ContextPackage`.
#[derive(Debug)]
pub struct ExecuteContext(pub Arc<Pipeline>);

/// Arguments of `execute_context`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteContextArgs {
    /// The question to answer.
    pub question: String,
    /// A ContextPackage as query_context returned it (its sources are re-read from the index).
    pub context_package: Value,
    /// Override the mode's synthesis style: grounded or insight.
    pub synthesis_style: Option<String>,
}

/// What `ExecuteContext` tells the model it does.
const EXECUTE_CONTEXT_DESCRIPTION: &str = "Write a cited answer to a question from a \
    ContextPackage returned by query_context; returns a QueryResponse (answer, citations, \
    response_id, conversation_id).";

#[async_trait::async_trait]
impl Tool for ExecuteContext {
    fn name(&self) -> &str {
        "execute_context"
    }
    fn description(&self) -> &str {
        EXECUTE_CONTEXT_DESCRIPTION
    }
    fn parameters(&self) -> Value {
        schema_for::<ExecuteContextArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: ExecuteContextArgs = parse(&ctx)?;
        let mut pkg: ContextPackage = serde_json::from_value(a.context_package).map_err(|e| {
            ToolError::InvalidArguments(format!(
                "context_package is not a ContextPackage from query_context: {e}"
            ))
        })?;
        let mut checked = pkg.mode.clone();
        checked.remote_policy.enabled = false;
        self.0.policy().validate(&checked).map_err(tool_err)?;
        if let Some(style) = a.synthesis_style {
            if !matches!(style.as_str(), "grounded" | "insight") {
                return Err(ToolError::InvalidArguments(format!(
                    "synthesis_style '{style}': use grounded or insight"
                )));
            }
            pkg.mode.synthesis_style = style;
        }
        let mut pkg = self.0.refresh_package(pkg).map_err(tool_err)?;
        let best = pkg
            .candidates
            .iter()
            .map(|c| c.relevance)
            .fold(0.0f32, f32::max);
        pkg.relevance = best;
        pkg.below_min_relevance =
            pkg.candidates.is_empty() || best < pkg.mode.local_policy.min_relevance;
        let pkg = self.0.synthesize_context(pkg);
        let resp = self.0.execute(&a.question, pkg).await.map_err(tool_err)?;
        Ok(ToolOutput::text(bounded(response_json(&resp)?)))
    }
}

/// `query_and_synthesize`: the whole pipeline, as a user's query.
#[derive(Debug)]
pub struct QueryAndSynthesize(pub Arc<Pipeline>);

/// Arguments of `query_and_synthesize`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryAndSynthesizeArgs {
    /// The question.
    pub query: String,
    /// A mode name (grounded, insight, hybrid, or a configured one) or a ModeConfig object.
    pub mode: Option<ModeSpec>,
    /// Instructions to place before the sources.
    pub starting_prompt: Option<String>,
    /// Conversation id to continue (from an earlier result).
    pub conversation_id: Option<String>,
    /// The previous answer's response_id, for chaining.
    pub prior_response_id: Option<String>,
}

/// What `QueryAndSynthesize` tells the model it does.
const QUERY_AND_SYNTHESIZE_DESCRIPTION: &str = "Ask the knowledge base a question: retrieves \
    sources and writes a cited answer. Returns a QueryResponse (answer, citations, sources, \
    response_id and conversation_id for follow-ups).";

#[async_trait::async_trait]
impl Tool for QueryAndSynthesize {
    fn name(&self) -> &str {
        "query_and_synthesize"
    }
    fn description(&self) -> &str {
        QUERY_AND_SYNTHESIZE_DESCRIPTION
    }
    fn parameters(&self) -> Value {
        schema_for::<QueryAndSynthesizeArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: QueryAndSynthesizeArgs = parse(&ctx)?;
        let request = QueryRequest {
            query: a.query,
            mode: a.mode,
            starting_prompt: a.starting_prompt,
            conversation_id: a.conversation_id,
            prior_response_id: a.prior_response_id,
            ..Default::default()
        };
        let resp = self.0.run(request).await.map_err(tool_err)?;
        Ok(ToolOutput::text(bounded(response_json(&resp)?)))
    }
}

/// `query_llm`: one direct call of the configured LLM, with cache chaining.
#[derive(Debug)]
pub struct QueryLlm(pub Arc<Pipeline>);

/// Arguments of `query_llm`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryLlmArgs {
    /// The prompt.
    pub prompt: String,
    /// An optional system prompt.
    pub system_prompt: Option<String>,
    /// The response_id of an earlier query_llm call, to continue that conversation.
    pub previous_response_id: Option<String>,
    /// A stable key for the provider's prompt cache.
    pub prompt_cache_key: Option<String>,
    /// How long the provider should keep the prompt cache (e.g. "24h").
    pub prompt_cache_retention: Option<String>,
    /// Upper bound on the answer's tokens (default 1024, at most 8192).
    pub max_output_tokens: Option<u64>,
}

/// What `QueryLlm` tells the model it does.
const QUERY_LLM_DESCRIPTION: &str = "Send a prompt straight to the configured LLM (no knowledge \
    base). Returns its text and a response_id; pass that as previous_response_id to continue the \
    conversation.";

#[async_trait::async_trait]
impl Tool for QueryLlm {
    fn name(&self) -> &str {
        "query_llm"
    }
    fn description(&self) -> &str {
        QUERY_LLM_DESCRIPTION
    }
    fn parameters(&self) -> Value {
        schema_for::<QueryLlmArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: QueryLlmArgs = parse(&ctx)?;
        let Some(provider) = self.0.provider() else {
            return Err(ToolError::Failed("no LLM provider is configured".into()));
        };
        let mut messages = Vec::new();
        if let Some(s) = a.system_prompt.filter(|s| !s.is_empty()) {
            messages.push(Message::system(s));
        }
        messages.push(Message::user(a.prompt));
        let request = LlmRequest {
            messages,
            tools: Vec::new(),
            options: CallOptions {
                max_output_tokens: Some(a.max_output_tokens.unwrap_or(1024).clamp(1, 8192)),
                previous_response_id: a.previous_response_id,
                prompt_cache_key: a.prompt_cache_key,
                prompt_cache_retention: a.prompt_cache_retention,
            },
        };
        let r = provider.complete(&request).await.map_err(|e| match e {
            // Said as it is: the model must learn that no further call is possible.
            e if e.is_budget_exhausted() => ToolError::Failed(e.to_string()),
            e => ToolError::Failed(format!("the LLM call failed: {e}")),
        })?;
        Ok(ToolOutput::text(bounded(json!({
            "text": r.text,
            "response_id": r.response_id,
            "model": provider.model(),
            "usage": r.usage,
        }))))
    }
}

// ---------------------------------------------------------------------------------------------

/// `extract_snippets`: short passages around the query's terms.
#[derive(Debug)]
pub struct ExtractSnippets(pub Arc<Pipeline>);

/// Arguments of `extract_snippets`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtractSnippetsArgs {
    /// What to look for.
    pub query: String,
    /// Only from files whose path contains this text.
    pub path_contains: Option<String>,
    /// How many snippets (default 5, at most 20).
    pub max_snippets: Option<u64>,
    /// Characters around the match (default 300, at most 2000).
    pub context_chars: Option<u64>,
}

/// What `ExtractSnippets` tells the model it does.
const EXTRACT_SNIPPETS_DESCRIPTION: &str = "Find short passages in the knowledge base around the \
    words of a query, with their file, heading and chunk.";

#[async_trait::async_trait]
impl Tool for ExtractSnippets {
    fn name(&self) -> &str {
        "extract_snippets"
    }
    fn description(&self) -> &str {
        EXTRACT_SNIPPETS_DESCRIPTION
    }
    fn parameters(&self) -> Value {
        schema_for::<ExtractSnippetsArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: ExtractSnippetsArgs = parse(&ctx)?;
        let n = a.max_snippets.unwrap_or(5).clamp(1, 20) as usize;
        let width = a.context_chars.unwrap_or(300).clamp(40, 2000) as usize;
        let filters = Filters {
            path_contains: a.path_contains,
            ..Default::default()
        };
        let snap = self.0.kb().store().snapshot().map_err(tool_err)?;
        let hits = snap.lexical(&a.query, &filters, n).map_err(tool_err)?;
        let terms = crate::store::analyze(&a.query);
        let mut out = Vec::new();
        for h in hits {
            let c = snap.chunk(h.addr).map_err(tool_err)?;
            out.push(json!({
                "path": c.path,
                "heading": c.heading(),
                "chunk_index": c.chunk_index,
                "chunk_id": c.chunk_id,
                "score": h.score,
                "snippet": snippet(&c.text, &terms, width),
            }));
        }
        Ok(ToolOutput::text(bounded(
            json!({"query": a.query, "snippets": out}),
        )))
    }
}

/// A window of about `width` characters of `text` around the first word whose analyzed form
/// is one of `terms`.
fn snippet(text: &str, terms: &[String], width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut start = 0;
    let mut found = None;
    for (i, c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if i > start {
                let word: String = chars[start..i].iter().collect();
                if crate::store::analyze(&word)
                    .iter()
                    .any(|w| terms.contains(w))
                {
                    found = Some(start);
                    break;
                }
            }
            start = i + 1;
        }
    }
    let center = found.unwrap_or(0);
    let from = center.saturating_sub(width / 3);
    let to = (from + width).min(chars.len());
    let mut s: String = chars[from..to].iter().collect();
    if from > 0 {
        s.insert(0, '…');
    }
    if to < chars.len() {
        s.push('…');
    }
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `source_map`: evidence grouped by file.
#[derive(Debug)]
pub struct SourceMap(pub Arc<Pipeline>);

/// Arguments of `source_map`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceMapArgs {
    /// Map the evidence for this query (or give chunk_ids).
    pub query: Option<String>,
    /// Map these chunks (ids from earlier results).
    pub chunk_ids: Option<Vec<String>>,
    /// Number of sources for a query (default 12, at most 50).
    pub k: Option<u64>,
    /// Filters for a query: path_contains, ext_allow, ext_deny.
    pub filters: Option<Filters>,
}

/// What `SourceMap` tells the model it does.
const SOURCE_MAP_DESCRIPTION: &str = "Map evidence to its sources: for a query (or a list of chunk \
    ids), the files it comes from, each with its chunks (heading, position, relevance, excerpt).";

#[async_trait::async_trait]
impl Tool for SourceMap {
    fn name(&self) -> &str {
        "source_map"
    }
    fn description(&self) -> &str {
        SOURCE_MAP_DESCRIPTION
    }
    fn parameters(&self) -> Value {
        schema_for::<SourceMapArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: SourceMapArgs = parse(&ctx)?;
        let mut entries: Vec<(String, Value)> = Vec::new();
        let mut missing = Vec::new();
        if let Some(ids) = a.chunk_ids.filter(|v| !v.is_empty()) {
            let snap = self.0.kb().store().snapshot().map_err(tool_err)?;
            for id in ids.iter().take(100) {
                match snap.find_chunk(id).map_err(tool_err)? {
                    Some(addr) => {
                        let c = snap.chunk(addr).map_err(tool_err)?;
                        entries.push((
                            c.path.clone(),
                            json!({"chunk_id": c.chunk_id, "heading": c.heading(),
                                   "chunk_index": c.chunk_index,
                                   "excerpt": truncate_chars(c.text.trim(), 200)}),
                        ));
                    }
                    None => missing.push(id.clone()),
                }
            }
        } else if let Some(query) = a.query.filter(|q| !q.trim().is_empty()) {
            let mut mode = crate::mode::grounded();
            mode.local_policy.min_relevance = 0.0;
            mode.retrieval_profile = if self.0.kb().embedder().is_some() {
                "hybrid_rrf".into()
            } else {
                "lexical".into()
            };
            let request = QueryRequest {
                query,
                mode: Some(ModeSpec::Config(Box::new(mode))),
                filters: a.filters.unwrap_or_default(),
                k: Some(a.k.unwrap_or(12).clamp(1, 50) as usize),
                ..Default::default()
            };
            let pkg = self.0.build_sources(request).await.map_err(tool_err)?;
            for s in pkg.candidates {
                entries.push((
                    s.path.clone(),
                    json!({"chunk_id": s.chunk_id, "label": s.label, "heading": s.heading,
                           "chunk_index": s.chunk_index, "relevance": s.relevance,
                           "excerpt": truncate_chars(s.text.trim(), 200)}),
                ));
            }
        } else {
            return Err(ToolError::InvalidArguments(
                "give a query or a list of chunk_ids".into(),
            ));
        }
        let mut map: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for (path, e) in entries {
            map.entry(path).or_default().push(e);
        }
        let files = map.len();
        let sources: serde_json::Map<String, Value> = map
            .into_iter()
            .map(|(p, chunks)| (p, json!({"count": chunks.len(), "chunks": chunks})))
            .collect();
        Ok(ToolOutput::text(bounded(json!({
            "files": files,
            "sources": sources,
            "missing_chunk_ids": missing,
        }))))
    }
}

/// `similarity_search`: pairs of chunks that say nearly the same thing.
#[derive(Debug)]
pub struct SimilaritySearch(pub Arc<Pipeline>);

/// Arguments of `similarity_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SimilaritySearchArgs {
    /// Compare the chunks most related to this query (default: all chunks passing the filter).
    pub query: Option<String>,
    /// Only chunks of files whose path contains this text.
    pub path_contains: Option<String>,
    /// Similarity (0..1) at or above which a pair is reported (default 0.85).
    pub threshold: Option<f64>,
    /// Most pairs returned (default 20, at most 100).
    pub max_pairs: Option<u64>,
}

/// Most chunks compared pairwise in one call.
const SIMILARITY_SCAN: usize = 400;

/// What `SimilaritySearch` tells the model it does.
const SIMILARITY_SEARCH_DESCRIPTION: &str = "Find pairs of knowledge-base chunks that are \
    near-duplicates or say nearly the same thing (cosine similarity with an embedder, else \
    shingle overlap).";

#[async_trait::async_trait]
impl Tool for SimilaritySearch {
    fn name(&self) -> &str {
        "similarity_search"
    }
    fn description(&self) -> &str {
        SIMILARITY_SEARCH_DESCRIPTION
    }
    fn parameters(&self) -> Value {
        schema_for::<SimilaritySearchArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: SimilaritySearchArgs = parse(&ctx)?;
        let threshold = a.threshold.unwrap_or(0.85).clamp(0.0, 1.0) as f32;
        let max_pairs = a.max_pairs.unwrap_or(20).clamp(1, 100) as usize;
        let filters = Filters {
            path_contains: a.path_contains,
            ..Default::default()
        };
        let snap = self.0.kb().store().snapshot().map_err(tool_err)?;
        let addrs: Vec<tantivy::DocAddress> =
            match a.query.as_deref().filter(|q| !q.trim().is_empty()) {
                Some(q) => snap
                    .lexical(q, &filters, SIMILARITY_SCAN)
                    .map_err(tool_err)?
                    .into_iter()
                    .map(|h| h.addr)
                    .collect(),
                None => snap.filtered(&filters, SIMILARITY_SCAN).map_err(tool_err)?,
            };
        let chunks: Vec<crate::store::ChunkRecord> = addrs
            .iter()
            .map(|a| snap.chunk(*a))
            .collect::<Result<_, _>>()
            .map_err(tool_err)?;
        let vectors: Vec<Option<&[f32]>> = addrs
            .iter()
            .map(|a| snap.dense().and_then(|d| d.vector_of(*a)))
            .collect();
        let sigs: Vec<MinHash> = chunks.iter().map(|c| MinHash::of(&c.text)).collect();
        let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
        for i in 0..chunks.len() {
            for j in i + 1..chunks.len() {
                let sim = match (vectors[i], vectors[j]) {
                    (Some(x), Some(y)) => dot(x, y),
                    _ => sigs[i].similarity(&sigs[j]),
                };
                if sim >= threshold {
                    pairs.push((sim, i, j));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
        let total = pairs.len();
        pairs.truncate(max_pairs);
        let side = |c: &crate::store::ChunkRecord| {
            json!({"chunk_id": c.chunk_id, "path": c.path, "heading": c.heading(),
                   "chunk_index": c.chunk_index, "excerpt": truncate_chars(c.text.trim(), 160)})
        };
        let out: Vec<Value> = pairs
            .iter()
            .map(|(s, i, j)| {
                json!({"similarity": (s * 1000.0).round() / 1000.0,
                       "a": side(&chunks[*i]), "b": side(&chunks[*j])})
            })
            .collect();
        Ok(ToolOutput::text(bounded(json!({
            "compared_chunks": chunks.len(),
            "measure": if snap.dense().is_some() { "cosine" } else { "minhash_jaccard" },
            "threshold": threshold,
            "pairs_found": total,
            "pairs": out,
        }))))
    }
}

/// `find_section`: a section of a file, by its heading.
#[derive(Debug, Clone, Copy, Default)]
pub struct FindSection;

/// Arguments of `find_section`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindSectionArgs {
    /// The file, absolute or relative to the working directory.
    pub path: String,
    /// Text of the heading to find (case-insensitive; the first match wins).
    pub heading: String,
    /// Most characters of the section returned (default 8000, at most 50000).
    pub max_chars: Option<u64>,
}

const FIND_SECTION_PATHS: &[PathArg] = &[PathArg::read("path")];

/// Most bytes of a file `find_section` reads (the knowledge base's default file limit).
const FIND_SECTION_MAX_FILE_BYTES: u64 = 50 * 1024 * 1024;

/// What `FindSection` tells the model it does.
const FIND_SECTION_DESCRIPTION: &str = "Return one section of a document (Markdown, \
    reStructuredText, HTML, text, PDF page, or a top-level item of source code) by its heading, \
    with the document's outline.";

#[async_trait::async_trait]
impl Tool for FindSection {
    fn name(&self) -> &str {
        "find_section"
    }
    fn description(&self) -> &str {
        FIND_SECTION_DESCRIPTION
    }
    fn parameters(&self) -> Value {
        schema_for::<FindSectionArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn path_args(&self) -> &[PathArg] {
        FIND_SECTION_PATHS
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: FindSectionArgs = parse(&ctx)?;
        let path = ctx.path("path")?;
        let max = a.max_chars.unwrap_or(8000).clamp(100, 50_000) as usize;
        // Through the sandbox root's handle: only a regular file beneath the root, never a
        // named pipe that would block.
        let bytes = path.read_bytes(FIND_SECTION_MAX_FILE_BYTES).await?;
        let ext = crate::extract::extension_of(path.shown());
        let ct = crate::extract::ContentType::for_extension(&ext)
            .unwrap_or(crate::extract::ContentType::Text);
        let doc = crate::extract::extract(ct, &bytes).map_err(ToolError::Failed)?;
        let outline: Vec<Value> = doc
            .headings
            .iter()
            .map(|h| json!({"level": h.level, "title": h.title}))
            .collect();
        let needle = a.heading.to_lowercase();
        let Some(pos) = doc
            .headings
            .iter()
            .position(|h| h.title.to_lowercase().contains(&needle))
        else {
            return Err(ToolError::InvalidArguments(format!(
                "no heading matching '{}' in {}; its headings: {}",
                a.heading,
                a.path,
                doc.headings
                    .iter()
                    .map(|h| h.title.as_str())
                    .take(50)
                    .collect::<Vec<_>>()
                    .join(" | ")
            )));
        };
        let h = &doc.headings[pos];
        let end = doc.headings[pos + 1..]
            .iter()
            .find(|n| n.level <= h.level)
            .map_or(doc.text.len(), |n| n.offset);
        let section = doc.text.get(h.offset..end).unwrap_or("");
        let text = truncate_chars(section.trim_end(), max);
        Ok(ToolOutput::text(bounded(json!({
            "path": a.path,
            "heading": h.title,
            "heading_path": crate::extract::heading_path_at(&doc.headings, h.offset),
            "level": h.level,
            "text": text,
            "outline": outline,
        }))))
    }
}

// ---------------------------------------------------------------------------------------------

/// Arguments of `query_<provider>` and `query_remote_chain`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteQueryArgs {
    /// What to search for.
    pub query: String,
    /// Most results (default 5, at most 20).
    pub max_results: Option<u64>,
}

/// `query_<provider>`: one remote source.
pub struct QueryRemote {
    name: String,
    description: String,
    provider: Arc<dyn RemoteProvider>,
}

impl std::fmt::Debug for QueryRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryRemote")
            .field("name", &self.name)
            .finish()
    }
}

#[async_trait::async_trait]
impl Tool for QueryRemote {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> Value {
        schema_for::<RemoteQueryArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Network
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: RemoteQueryArgs = parse(&ctx)?;
        let n = a.max_results.unwrap_or(5).clamp(1, 20) as usize;
        let results = self.provider.search(&a.query, n).await.map_err(tool_err)?;
        Ok(ToolOutput::text(bounded(
            json!({"provider": self.provider.name(), "results": results}),
        )))
    }
}

/// `query_remote_chain`: every provider of the configured chain, in order.
pub struct QueryRemoteChain(Vec<Arc<dyn RemoteProvider>>);

impl std::fmt::Debug for QueryRemoteChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|p| p.name()))
            .finish()
    }
}

/// What `QueryRemoteChain` tells the model it does.
const QUERY_REMOTE_CHAIN_DESCRIPTION: &str = "Search every configured remote source in turn \
    (network); returns each one's results and the errors of those that failed.";

#[async_trait::async_trait]
impl Tool for QueryRemoteChain {
    fn name(&self) -> &str {
        "query_remote_chain"
    }
    fn description(&self) -> &str {
        QUERY_REMOTE_CHAIN_DESCRIPTION
    }
    fn parameters(&self) -> Value {
        schema_for::<RemoteQueryArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Network
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: RemoteQueryArgs = parse(&ctx)?;
        let n = a.max_results.unwrap_or(5).clamp(1, 20) as usize;
        let mut results = Vec::new();
        let mut errors = Vec::new();
        for p in &self.0 {
            match p.search(&a.query, n).await {
                Ok(r) => results.extend(r),
                Err(e) => errors.push(json!({"provider": p.name(), "error": e.to_string()})),
            }
        }
        Ok(ToolOutput::text(bounded(
            json!({"results": results, "errors": errors}),
        )))
    }
}

/// `load_url`: fetch a page as text.
#[derive(Debug, Clone)]
pub struct LoadUrl(pub RemoteConfig);

/// Arguments of `load_url`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadUrlArgs {
    /// The http:// or https:// URL to fetch.
    pub url: String,
    /// Most characters of text returned (default 20000, at most 50000).
    pub max_chars: Option<u64>,
}

/// What `LoadUrl` tells the model it does.
const LOAD_URL_DESCRIPTION: &str = "Fetch a web page (http:// or https://) and return its text. \
    Loopback and private addresses are refused unless configured.";

#[async_trait::async_trait]
impl Tool for LoadUrl {
    fn name(&self) -> &str {
        "load_url"
    }
    fn description(&self) -> &str {
        LOAD_URL_DESCRIPTION
    }
    fn parameters(&self) -> Value {
        schema_for::<LoadUrlArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::Network
    }
    fn needs_permission(&self) -> bool {
        true
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let a: LoadUrlArgs = parse(&ctx)?;
        let max_chars = a.max_chars.unwrap_or(20_000).clamp(100, 50_000) as usize;
        let config = &self.0;
        let timeout = std::time::Duration::from_secs_f64(config.load_url_timeout_seconds.max(1.0));
        let policy = if config.allow_private_addresses {
            crate::http::AddressPolicy::Any
        } else {
            crate::http::AddressPolicy::PublicOnly
        };
        let fetched = crate::http::get(&a.url, policy, timeout, config.load_url_max_bytes)
            .await
            .map_err(ToolError::Failed)?;
        let (status, truncated) = (fetched.status, fetched.truncated);
        let body = fetched.body;
        let declared_html = fetched
            .content_type
            .as_deref()
            .is_some_and(|t| t.to_ascii_lowercase().contains("html"));
        let looks_html = body
            .iter()
            .take(1024)
            .map(|b| b.to_ascii_lowercase())
            .collect::<Vec<u8>>()
            .windows(5)
            .any(|w| w == b"<html" || w == b"<body" || w == b"<!doc");
        let kind = if declared_html || looks_html {
            crate::extract::ContentType::Html
        } else {
            crate::extract::ContentType::Text
        };
        let text = crate::extract::extract(kind, &body)
            .map(|d| d.text)
            .map_err(ToolError::Failed)?;
        Ok(ToolOutput::text(bounded(json!({
            "url": a.url,
            "status": status,
            "truncated": truncated,
            "text": truncate_chars(text.trim(), max_chars),
        }))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_output_fits_and_says_what_it_cut() {
        let big = json!({"candidates": (0..200).map(|i| json!({"i": i, "text": "x".repeat(2000)})).collect::<Vec<_>>()});
        let out = bounded(big);
        assert!(out.len() <= MAX_OUTPUT_BYTES);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert!(v["truncated"].is_string());
        let small = json!({"a": 1});
        assert_eq!(bounded(small), "{\"a\":1}");
    }

    #[test]
    fn snippets_center_on_a_query_term() {
        let terms = crate::store::analyze("flutter");
        let text = format!(
            "{} Flutter happens at speed. {}",
            "a ".repeat(300),
            "b ".repeat(300)
        );
        let s = snippet(&text, &terms, 60);
        assert!(s.contains("Flutter"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'));
    }

    #[test]
    fn the_guard_checks_composed_and_named_modes_and_packages() {
        let policy = ModePolicy::new(&["lexical".to_string(), "hybrid_rrf".to_string()], false);
        let g = ModeGuard::new(policy, BTreeMap::new());
        assert!(g.check("read_file", &json!({"mode": "anything"})).is_ok());
        assert!(g.check("query_context", &json!({"query": "x"})).is_ok());
        assert!(
            g.check("query_context", &json!({"query": "x", "mode": "insight"}))
                .is_ok()
        );
        let e = g
            .check(
                "query_and_synthesize",
                &json!({"query": "x", "mode": {"remote_policy": {"enabled": true}}}),
            )
            .unwrap_err();
        assert!(e.contains("allow_url_access"), "{e}");
        let e = g
            .check(
                "query_context",
                &json!({"query": "x", "mode": {"retrieval_profile": "llm_rerank"}}),
            )
            .unwrap_err();
        assert!(e.contains("not allowed"), "{e}");
        let e = g
            .check("query_context", &json!({"query": "x", "mode": "nope"}))
            .unwrap_err();
        assert!(e.contains("unknown mode"), "{e}");
        let e = g
            .check("execute_context", &json!({"question": "q", "context_package": {"mode": {"retrieval_profile": "dense_only"}}}))
            .unwrap_err();
        assert!(e.contains("not allowed"), "{e}");
    }

    #[test]
    fn mode_injection_attempts_are_refused() {
        let policy = ModePolicy::new(&["lexical".to_string()], false);
        let g = ModeGuard::new(policy, BTreeMap::new());
        // A mode object smuggled in as a string is just an unknown name.
        let e = g
            .check(
                "query_context",
                &json!({"query": "x", "mode": "{\"remote_policy\": {\"enabled\": true}}"}),
            )
            .unwrap_err();
        assert!(e.contains("unknown mode"), "{e}");
        // Unknown fields (a made-up escape hatch) are refused, not ignored.
        let e = g
            .check("query_context", &json!({"query": "x", "mode": {"retrieval_profile": "lexical", "allow_url_access": true}}))
            .unwrap_err();
        assert!(e.contains("mode refused"), "{e}");
        // Remote sources nested in a composed mode, even with an allowed profile.
        let e = g
            .check("query_and_synthesize", &json!({"query": "x", "mode": {"retrieval_profile": "lexical", "remote_policy": {"enabled": true, "remote_providers": ["wikipedia"]}}}))
            .unwrap_err();
        assert!(e.contains("allow_url_access"), "{e}");
        // A built-in name whose profile is not allowed here.
        let e = g
            .check("query_context", &json!({"query": "x", "mode": "grounded"}))
            .unwrap_err();
        assert!(e.contains("hybrid_rrf"), "{e}");
        // A package with a mode of the wrong shape.
        let e = g
            .check(
                "execute_context",
                &json!({"question": "q", "context_package": {"mode": "grounded"}}),
            )
            .unwrap_err();
        assert!(e.contains("invalid"), "{e}");
    }
}
