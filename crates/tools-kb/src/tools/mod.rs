//! The knowledge-base tools (`lsm_sandbox::Tool`), registered only when a knowledge base is
//! configured: `query_context`, `execute_context`, `query_and_synthesize` (seed 002 §13.1),
//! `query_llm`, `extract_snippets`, `source_map`, `similarity_search`, `find_section`.
//!
//! Every output is JSON and bounded ([`MAX_OUTPUT_BYTES`]): long texts are cut first, then
//! items dropped, and the output says so. None of these tools reaches the network: the ones
//! that call the configured LLM provider are not URL access, so their risk level is
//! `read_only`.

/// The `Tool` impl of a knowledge-base tool whose name, description, argument type and risk
/// are fixed: the arguments are parsed, then handed to the type's own `run`.
macro_rules! kb_tool {
    ($tool:ty {
        name: $name:literal,
        description: $description:expr,
        args: $args:ty,
        risk: $risk:ident,
        $(needs_permission: $permission:literal,)?
        $(path_args: $paths:expr,)?
    }) => {
        #[async_trait::async_trait]
        impl lsm_sandbox::Tool for $tool {
            fn name(&self) -> &str {
                $name
            }
            fn description(&self) -> &str {
                $description
            }
            fn parameters(&self) -> serde_json::Value {
                lsm_sandbox::schema_for::<$args>()
            }
            fn risk(&self) -> lsm_sandbox::RiskLevel {
                lsm_sandbox::RiskLevel::$risk
            }
            $(fn needs_permission(&self) -> bool {
                $permission
            })?
            $(fn path_args(&self) -> &[lsm_sandbox::PathArg] {
                $paths
            })?
            async fn execute(
                &self,
                ctx: lsm_sandbox::ToolContext,
            ) -> Result<lsm_sandbox::ToolOutput, lsm_sandbox::ToolError> {
                let args: $args = $crate::tools::bounded::parse(&ctx)?;
                self.run(args, ctx).await
            }
        }
    };
}

mod bounded;
mod guard;
mod inspect;
mod query;
mod remote;

use std::sync::Arc;

use lsm_sandbox::{RiskLevel, ToolRegistry};

pub use bounded::{MAX_OUTPUT_BYTES, bounded};
pub use guard::{ModeGuard, ModeRefusal};
pub use inspect::{
    ExtractSnippets, ExtractSnippetsArgs, FindSection, FindSectionArgs, SimilaritySearch,
    SimilaritySearchArgs, SourceMap, SourceMapArgs,
};
pub use query::{
    ExecuteContext, ExecuteContextArgs, QueryAndSynthesize, QueryAndSynthesizeArgs, QueryContext,
    QueryContextArgs, QueryLlm, QueryLlmArgs,
};
pub use remote::{LoadUrl, LoadUrlArgs, QueryRemote, QueryRemoteChain, RemoteQueryArgs};

use crate::pipeline::Pipeline;
use crate::remote::{RemoteConfig, RemoteProvider};
use inspect::{
    EXTRACT_SNIPPETS_DESCRIPTION, FIND_SECTION_DESCRIPTION, SIMILARITY_SEARCH_DESCRIPTION,
    SOURCE_MAP_DESCRIPTION,
};
use query::{
    EXECUTE_CONTEXT_DESCRIPTION, QUERY_AND_SYNTHESIZE_DESCRIPTION, QUERY_CONTEXT_DESCRIPTION,
    QUERY_LLM_DESCRIPTION,
};
use remote::{LOAD_URL_DESCRIPTION, QUERY_REMOTE_CHAIN_DESCRIPTION, query_remote_description};

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
