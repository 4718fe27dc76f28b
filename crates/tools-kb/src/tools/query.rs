//! The pipeline tools: `query_context`, `execute_context`, `query_and_synthesize`, and
//! `query_llm` (one direct call of the configured LLM).

use std::sync::Arc;

use lsm_providers::{CallOptions, LlmRequest, Message};
use lsm_sandbox::{ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::bounded::{bounded, package_json, response_json, tool_err};
use crate::blocking::off_runtime;
use crate::mode::ModeSpec;
use crate::pipeline::{ContextPackage, Pipeline, QueryRequest};
use crate::store::Filters;

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
pub(super) const QUERY_CONTEXT_DESCRIPTION: &str = "Search the knowledge base without writing an answer: \
    returns a ContextPackage (sources with labels, text, relevance, and a retrieval trace) to \
    inspect or pass to execute_context.";

kb_tool! { QueryContext {
    name: "query_context",
    description: QUERY_CONTEXT_DESCRIPTION,
    args: QueryContextArgs,
    risk: ReadOnly,
} }

impl QueryContext {
    async fn run(&self, a: QueryContextArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
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
pub(super) const EXECUTE_CONTEXT_DESCRIPTION: &str = "Write a cited answer to a question from a \
    ContextPackage returned by query_context; returns a QueryResponse (answer, citations, \
    response_id, conversation_id).";

kb_tool! { ExecuteContext {
    name: "execute_context",
    description: EXECUTE_CONTEXT_DESCRIPTION,
    args: ExecuteContextArgs,
    risk: ReadOnly,
} }

impl ExecuteContext {
    async fn run(&self, a: ExecuteContextArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
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
        let pipeline = Arc::clone(&self.0);
        let mut pkg = off_runtime(move || pipeline.refresh_package(pkg))
            .await
            .map_err(tool_err)?;
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
pub(super) const QUERY_AND_SYNTHESIZE_DESCRIPTION: &str = "Ask the knowledge base a question: retrieves \
    sources and writes a cited answer. Returns a QueryResponse (answer, citations, sources, \
    response_id and conversation_id for follow-ups).";

kb_tool! { QueryAndSynthesize {
    name: "query_and_synthesize",
    description: QUERY_AND_SYNTHESIZE_DESCRIPTION,
    args: QueryAndSynthesizeArgs,
    risk: ReadOnly,
} }

impl QueryAndSynthesize {
    async fn run(
        &self,
        a: QueryAndSynthesizeArgs,
        _ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
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
pub(super) const QUERY_LLM_DESCRIPTION: &str = "Send a prompt straight to the configured LLM (no knowledge \
    base). Returns its text and a response_id; pass that as previous_response_id to continue the \
    conversation.";

kb_tool! { QueryLlm {
    name: "query_llm",
    description: QUERY_LLM_DESCRIPTION,
    args: QueryLlmArgs,
    risk: ReadOnly,
} }

impl QueryLlm {
    async fn run(&self, a: QueryLlmArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(provider) = self.0.provider() else {
            return Err(ToolError::Failed("no LLM provider is configured".into()));
        };
        let mut messages = Vec::new();
        if let Some(s) = a.system_prompt.filter(|s| !s.is_empty()) {
            messages.push(Message::system(s).into());
        }
        messages.push(Message::user(a.prompt).into());
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
