//! The memory tools: `memory_put`, `memory_search`, `memory_remove`.
//!
//! They take no path arguments: they write only to the memory store they were built with
//! (any [`MemoryBackend`]), never to the sandbox's workspace. Each call runs its store operation on
//! the blocking pool. The agent and run come from the sandbox ([`ToolContext::caller`]); a
//! call without a caller is refused.
//!
//! Approval: `memory_put` needs a person's permission by default. When the permission gate
//! asked and the answer was yes ([`ToolContext::permission_granted`]), the memory is stored
//! **approved** and is used from then on. When configuration says not to ask
//! (`sandbox.require_user_permission.memory_put = false`), it is stored as a **candidate**
//! that nobody sees until a person runs `lsm memory approve <id>`.

use std::sync::Arc;

use chrono::Duration;
use lsm_sandbox::{
    Caller, RiskLevel, Tool, ToolContext, ToolError, ToolEvent, ToolEventKind, ToolOutput,
    schema_for,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::{
    MAX_TEXT_BYTES, MemoryBackend, MemoryError, NewMemory, Reach, Scope, SearchQuery, Status,
};

/// Most results one `memory_search` returns.
pub const MAX_SEARCH_RESULTS: u32 = 20;
/// Results a `memory_search` returns when it does not say.
pub const DEFAULT_SEARCH_RESULTS: u32 = 5;
/// Largest `memory_search` output, in bytes; results past it are left out (and counted).
pub const MAX_SEARCH_OUTPUT_BYTES: usize = 16 * 1024;
/// Longest expiry a memory may be given, in days (about 100 years).
pub const MAX_TTL_DAYS: u32 = 36_500;

/// The three memory tools over `store`, for a [`lsm_sandbox::ToolRegistry`].
pub fn tools(store: Arc<dyn MemoryBackend>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(MemoryPut::new(Arc::clone(&store))),
        Arc::new(MemorySearch::new(Arc::clone(&store))),
        Arc::new(MemoryRemove::new(store)),
    ]
}

fn caller(ctx: &ToolContext) -> Result<Caller, ToolError> {
    ctx.caller().cloned().ok_or_else(|| {
        ToolError::Failed(
            "memory tools need to know the calling agent; call them from an agent run".into(),
        )
    })
}

fn parse<T: serde::de::DeserializeOwned>(ctx: &ToolContext) -> Result<T, ToolError> {
    serde_json::from_value(ctx.args.clone()).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

fn tool_error(e: MemoryError) -> ToolError {
    match e {
        MemoryError::EmptyText
        | MemoryError::TextTooLong { .. }
        | MemoryError::BadTag { .. }
        | MemoryError::TooManyTags { .. }
        | MemoryError::NotFound(_) => ToolError::InvalidArguments(e.to_string()),
        other => ToolError::Failed(other.to_string()),
    }
}

/// Run a blocking store operation off the async runtime.
async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> Result<T, MemoryError> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::task::spawn_blocking(op).await {
        Ok(result) => result.map_err(tool_error),
        Err(e) => Err(tool_error(MemoryError::Interrupted(e.to_string()))),
    }
}

fn to_json(value: &serde_json::Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

// ---------------------------------------------------------------------------------------

/// Arguments of `memory_put`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PutArgs {
    /// The fact to remember: one short, self-contained statement (at most 2000 bytes).
    #[schemars(length(min = 1))]
    pub text: String,
    /// Short tags to find it by (letters, digits, '-', '_', '.', ':', '/'; at most 8).
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Who may see it: "agent" (only you; the default), "project" (every agent of this
    /// project) or "global" (every agent of every project).
    #[serde(default)]
    pub scope: Option<Scope>,
    /// Forget it after this many days (default: never).
    #[serde(default)]
    #[schemars(range(min = 1, max = 36500))]
    pub ttl_days: Option<u32>,
}

/// `memory_put`: store a fact for later runs.
pub struct MemoryPut {
    store: Arc<dyn MemoryBackend>,
}

impl MemoryPut {
    /// Over `store`.
    pub fn new(store: Arc<dyn MemoryBackend>) -> Self {
        MemoryPut { store }
    }
}

#[async_trait::async_trait]
impl Tool for MemoryPut {
    fn name(&self) -> &str {
        "memory_put"
    }
    fn description(&self) -> &str {
        "Save one fact to persistent memory so later runs know it (it is shown to you as \
         standing context when relevant). Store stable, reusable facts, not task progress."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<PutArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::WritesWorkspace
    }
    fn needs_permission(&self) -> bool {
        true
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: PutArgs = parse(&ctx)?;
        let caller = caller(&ctx)?;
        if args.text.trim().len() > MAX_TEXT_BYTES {
            return Err(tool_error(MemoryError::TextTooLong {
                len: args.text.trim().len(),
                max: MAX_TEXT_BYTES,
            }));
        }
        if lsm_sandbox::redact_secrets(&args.text) != args.text.as_str() {
            return Err(ToolError::InvalidArguments(
                "the memory text looks like it contains a secret (a key or token); memories \
                 are shown to models in later runs, so never store secrets"
                    .into(),
            ));
        }
        let ttl = args.ttl_days.unwrap_or(0);
        if ttl > MAX_TTL_DAYS {
            return Err(ToolError::InvalidArguments(format!(
                "ttl_days is {ttl}; at most {MAX_TTL_DAYS} days"
            )));
        }
        let status = if ctx.permission_granted() {
            Status::Approved
        } else {
            Status::Candidate
        };
        let store = Arc::clone(&self.store);
        let expires_at = args
            .ttl_days
            .filter(|d| *d > 0)
            .map(|d| store.now() + Duration::days(i64::from(d)));
        let new = NewMemory {
            scope: args.scope.unwrap_or(Scope::Agent),
            owner_agent: caller.agent.clone(),
            text: args.text,
            tags: args.tags.unwrap_or_default(),
            source_run_id: Some(caller.run_id.clone()),
            expires_at,
            status,
        };
        let outcome = blocking(move || store.put(new)).await?;
        let m = &outcome.memory;
        let note = match (m.status, outcome.created) {
            (Status::Approved, true) => "Stored and approved; later runs will see it.".to_string(),
            (Status::Approved, false) => {
                "Already remembered; refreshed it (tags merged, time updated).".to_string()
            }
            (Status::Candidate, _) => format!(
                "Stored as a candidate: a person approves it with `lsm memory approve {}`; \
                 until then it is not used.",
                m.id
            ),
        };
        let text = to_json(&json!({
            "id": m.id,
            "scope": m.scope,
            "status": m.status,
            "created": outcome.created,
            "note": note,
        }));
        let mut out = ToolOutput::text(text).with_event(ToolEvent::new(
            ToolEventKind::MemoryWritten,
            json!({
                "id": m.id,
                "scope": m.scope,
                "status": m.status,
                "created": outcome.created,
                "owner_agent": m.owner_agent,
                "text": m.text,
                "tags": m.tags,
                "expires_at": m.expires_at,
            }),
        ));
        if outcome.newly_approved {
            out = out.with_event(ToolEvent::new(
                ToolEventKind::MemoryApproved,
                json!({"id": m.id, "scope": m.scope, "approved_by": "permission gate"}),
            ));
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------

/// Arguments of `memory_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What to look for, in plain words (matched by word, any order). Empty with tags: every
    /// memory carrying them, newest first.
    pub query: String,
    /// Only memories carrying every one of these tags.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Only this scope: "agent", "project" or "global" (default: all, in that order).
    #[serde(default)]
    pub scope: Option<Scope>,
    /// How many results at most (1 to 20; default 5).
    #[serde(default)]
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<u32>,
}

/// `memory_search`: find approved memories.
pub struct MemorySearch {
    store: Arc<dyn MemoryBackend>,
}

impl MemorySearch {
    /// Over `store`.
    pub fn new(store: Arc<dyn MemoryBackend>) -> Self {
        MemorySearch { store }
    }
}

#[async_trait::async_trait]
impl Tool for MemorySearch {
    fn name(&self) -> &str {
        "memory_search"
    }
    fn description(&self) -> &str {
        "Search persistent memory (facts saved in earlier runs) by words and tags. Returns \
         JSON: the best matches first, with their ids, scopes and tags."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<SearchArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: SearchArgs = parse(&ctx)?;
        let caller = caller(&ctx)?;
        let limit = args.limit.unwrap_or(DEFAULT_SEARCH_RESULTS);
        if !(1..=MAX_SEARCH_RESULTS).contains(&limit) {
            return Err(ToolError::InvalidArguments(format!(
                "limit is {limit}; use 1 to {MAX_SEARCH_RESULTS}"
            )));
        }
        let tags = args.tags.unwrap_or_default();
        if args.query.trim().is_empty() && tags.is_empty() {
            return Err(ToolError::InvalidArguments(
                "give a query, tags, or both".into(),
            ));
        }
        let query = SearchQuery {
            text: args.query,
            tags,
            scopes: args.scope.into_iter().collect(),
            owner: None,
            include_candidates: false,
            limit: limit as usize,
        };
        let store = Arc::clone(&self.store);
        let reach = Reach::Agent(caller.agent);
        let hits = blocking(move || store.search(&reach, &query)).await?;
        let total = hits.len();
        let mut results = Vec::new();
        let mut size = 0;
        for h in hits {
            let row = json!({
                "id": h.memory.id,
                "scope": h.memory.scope,
                "text": h.memory.text,
                "tags": h.memory.tags,
                "score": (h.score * 1000.0).round() / 1000.0,
                "updated_at": h.memory.updated_at,
                "expires_at": h.memory.expires_at,
            });
            size += row.to_string().len();
            if size > MAX_SEARCH_OUTPUT_BYTES && !results.is_empty() {
                break;
            }
            results.push(row);
        }
        let left_out = total - results.len();
        Ok(ToolOutput::text(to_json(&json!({
            "results": results,
            "left_out": left_out,
        }))))
    }
}

// ---------------------------------------------------------------------------------------

/// Arguments of `memory_remove`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveArgs {
    /// The id of the memory to forget (from memory_search).
    #[schemars(length(min = 1, max = 64))]
    pub id: String,
}

/// `memory_remove`: forget a memory.
pub struct MemoryRemove {
    store: Arc<dyn MemoryBackend>,
}

impl MemoryRemove {
    /// Over `store`.
    pub fn new(store: Arc<dyn MemoryBackend>) -> Self {
        MemoryRemove { store }
    }
}

#[async_trait::async_trait]
impl Tool for MemoryRemove {
    fn name(&self) -> &str {
        "memory_remove"
    }
    fn description(&self) -> &str {
        "Remove a memory that is wrong or no longer true, by its id (from memory_search)."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<RemoveArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::WritesWorkspace
    }
    fn needs_permission(&self) -> bool {
        true
    }
    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: RemoveArgs = parse(&ctx)?;
        let caller = caller(&ctx)?;
        let store = Arc::clone(&self.store);
        let reach = Reach::Agent(caller.agent);
        let id = args.id.trim().to_string();
        let m = blocking(move || store.remove(&reach, &id)).await?;
        Ok(ToolOutput::text(to_json(&json!({
            "removed": m.id,
            "scope": m.scope,
            "text": m.text,
        })))
        .with_event(ToolEvent::new(
            ToolEventKind::MemoryRemoved,
            json!({"id": m.id, "scope": m.scope, "owner_agent": m.owner_agent, "text": m.text}),
        )))
    }
}
