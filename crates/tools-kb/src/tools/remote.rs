//! The remote-source tools (risk `network`): `query_<provider>`, `query_remote_chain`,
//! `load_url`.

use std::sync::Arc;

use lsm_sandbox::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput, schema_for};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::bounded::{bounded, parse, tool_err};
use crate::remote::{RemoteConfig, RemoteProvider};
use crate::text::truncate_chars;

pub(super) fn query_remote_description(provider: &str) -> String {
    format!("Search the remote source '{provider}' (network): titles, URLs and excerpts.")
}

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
    pub(super) name: String,
    pub(super) description: String,
    pub(super) provider: Arc<dyn RemoteProvider>,
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
pub struct QueryRemoteChain(pub(super) Vec<Arc<dyn RemoteProvider>>);

impl std::fmt::Debug for QueryRemoteChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|p| p.name()))
            .finish()
    }
}

/// What `QueryRemoteChain` tells the model it does.
pub(super) const QUERY_REMOTE_CHAIN_DESCRIPTION: &str = "Search every configured remote source in turn \
    (network); returns each one's results and the errors of those that failed.";

kb_tool! { QueryRemoteChain {
    name: "query_remote_chain",
    description: QUERY_REMOTE_CHAIN_DESCRIPTION,
    args: RemoteQueryArgs,
    risk: Network,
} }

impl QueryRemoteChain {
    async fn run(&self, a: RemoteQueryArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
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
pub(super) const LOAD_URL_DESCRIPTION: &str = "Fetch a web page (http:// or https://) and return its text. \
    Loopback and private addresses are refused unless configured.";

kb_tool! { LoadUrl {
    name: "load_url",
    description: LOAD_URL_DESCRIPTION,
    args: LoadUrlArgs,
    risk: Network,
    needs_permission: true,
} }

impl LoadUrl {
    async fn run(&self, a: LoadUrlArgs, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
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
            .map_err(|e| ToolError::Failed(e.to_string()))?;
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
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        Ok(ToolOutput::text(bounded(json!({
            "url": a.url,
            "status": status,
            "truncated": truncated,
            "text": truncate_chars(text.trim(), max_chars),
        }))))
    }
}
