//! Persistent memory in the composition root: which store keeps it, the memory tools for a
//! run's registry, and the adapter from the store to the harness's `MemoryProvider`.

use std::path::Path;
use std::sync::Arc;

use lsm_harness::MemoryProvider;
use lsm_memory::{MemoryBackend, MemoryConfig, StandingOptions};
use lsm_sandbox::ToolRegistry;

/// The memory store of the agents folder `agents_folder`: `shared` when given (memory kept
/// in a database server, see [`crate::wiring::memory_pg`]), else the SQLite files `memory` describes.
/// Every use of memory (runs, `lsm memory`) gets its store here.
pub fn backend(
    memory: &MemoryConfig,
    agents_folder: &Path,
    shared: Option<Arc<dyn MemoryBackend>>,
) -> Arc<dyn MemoryBackend> {
    shared.unwrap_or_else(|| Arc::new(memory.store(agents_folder)))
}

/// The memory store `config` names for `agents_folder`.
///
/// # Errors
/// None yet: the SQLite store is only named here, opened on use.
pub fn configured_backend(
    config: &crate::config::Config,
    agents_folder: &Path,
) -> crate::error::Result<Arc<dyn MemoryBackend>> {
    // With `[store] url`: PostgreSQL, on the process's one pool (shared with the run store).
    let pg = match config.store.settings() {
        Some(settings) => {
            let db = crate::store::shared_db(settings)?;
            Some(crate::wiring::memory_pg::pg_memory(
                db,
                &crate::wiring::memory_pg::project_key(agents_folder),
            ))
        }
        None => None,
    };
    Ok(backend(&config.memory, agents_folder, pg))
}

/// `registry` plus the memory tools over `store`.
pub fn with_memory_tools(
    mut registry: ToolRegistry,
    store: &Arc<dyn MemoryBackend>,
) -> ToolRegistry {
    for tool in lsm_memory::tools(Arc::clone(store)) {
        registry = registry.with(tool);
    }
    registry
}

/// The harness's standing context, from the memory store.
#[derive(Debug, Clone)]
pub struct StoreMemory {
    store: Arc<dyn MemoryBackend>,
    options: StandingOptions,
}

impl StoreMemory {
    /// At most `limit` memories within the budget for a run of `max_tokens_budget`.
    pub fn new(store: Arc<dyn MemoryBackend>, limit: usize, max_tokens_budget: u64) -> Self {
        StoreMemory {
            store,
            options: StandingOptions::for_run(limit, max_tokens_budget),
        }
    }
}

#[async_trait::async_trait]
impl MemoryProvider for StoreMemory {
    async fn standing_context(&self, agent: &str, topic: &str) -> Option<String> {
        let store = Arc::clone(&self.store);
        let (agent, topic, options) = (agent.to_string(), topic.to_string(), self.options);
        let result =
            tokio::task::spawn_blocking(move || store.standing_context(&agent, &topic, options))
                .await;
        match result {
            Ok(Ok(block)) => block,
            // Memory is background: a run goes on without it rather than failing.
            Ok(Err(e)) => {
                tracing::warn!("standing context from memory is unavailable: {e}");
                None
            }
            Err(e) => {
                tracing::warn!("standing context from memory was interrupted: {e}");
                None
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use lsm_harness::{HarnessConfig, HarnessFactory};
    use lsm_memory::MemoryConfig;
    use lsm_phase::AgentIdentity;
    use lsm_providers::{Provider, Role, ScriptedProvider, ScriptedResponse};
    use lsm_sandbox::{Sandbox, SandboxConfig};

    #[tokio::test]
    async fn the_provider_injects_what_the_store_finds_and_survives_a_bad_agent_name() {
        let dir = tempfile::tempdir().unwrap();
        let config = MemoryConfig {
            global_db: Some(dir.path().join("g.db")),
            ..MemoryConfig::default()
        };
        provider_injects_what_the_store_finds(backend(&config, &dir.path().join("Agents"), None))
            .await;
    }

    /// The adapter over `store`: what the store finds is the block; a bad agent name is no
    /// block, not a failed run.
    pub(crate) async fn provider_injects_what_the_store_finds(store: Arc<dyn MemoryBackend>) {
        store
            .put(lsm_memory::NewMemory {
                scope: lsm_memory::Scope::Project,
                owner_agent: "general".into(),
                text: "The deploy key lives in the vault".into(),
                tags: vec![],
                source_run_id: None,
                expires_at: None,
                status: lsm_memory::Status::Approved,
            })
            .unwrap();
        let provider = StoreMemory::new(Arc::clone(&store), 8, 200_000);
        let block = provider
            .standing_context("general", "where is the deploy key?")
            .await
            .unwrap();
        assert!(block.contains("deploy key lives in the vault"), "{block}");
        assert_eq!(provider.standing_context("../x", "deploy key").await, None);
    }

    /// The composition of `lsm agent run` with memory on, in process: the real tools, the
    /// real store, the real adapter, a harness per run, and the provider's recorded requests.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fact_stored_with_the_tools_is_standing_context_in_the_provider_requests() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("Agents");
        let config = MemoryConfig {
            enabled: true,
            global_db: Some(dir.path().join("g.db")),
            ..MemoryConfig::default()
        };
        let store = backend(&config, &agents, None);
        a_fact_stored_with_the_tools_is_standing_context(store, &agents).await;
        assert!(agents.join("assistant/memory/memory.db").is_file());
    }

    /// Two runs over `store` with the real tools and adapter: a fact the first stores is the
    /// standing block of the second's first request.
    pub(crate) async fn a_fact_stored_with_the_tools_is_standing_context(
        store: Arc<dyn MemoryBackend>,
        agents: &Path,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = MemoryConfig::default();
        let registry = with_memory_tools(ToolRegistry::new(), &store);
        let sandbox = Arc::new(
            Sandbox::new(
                SandboxConfig::confined_to(dir.path()),
                registry,
                Some(Arc::new(lsm_test_support::Asker::approve_all())),
            )
            .unwrap(),
        );
        let identity = AgentIdentity {
            name: "assistant".into(),
            tool_allowlist: vec!["memory_put".into(), "memory_search".into()],
            tier: Default::default(),
            topic: String::new(),
        };
        let harness_config = HarnessConfig {
            agents_folder: agents.to_path_buf(),
            ..HarnessConfig::default()
        };
        let run = |provider: Arc<ScriptedProvider>| {
            HarnessFactory::new(
                harness_config.clone(),
                provider as Arc<dyn Provider>,
                Arc::clone(&sandbox),
            )
            .with_memory(Arc::new(StoreMemory::new(
                Arc::clone(&store),
                config.limit,
                200_000,
            )))
            .build(&identity, "You are a helpful assistant.")
        };
        let standing = |req: &lsm_providers::LlmRequest| {
            req.messages
                .iter()
                .filter(|m| m.role == Role::System)
                .find(|m| m.content.starts_with(lsm_memory::STANDING_HEADER))
                .map(|m| m.content.clone())
        };

        // Run 1: nothing is known at the first call; the model stores a fact (approved by
        // the permission gate); the very next call already carries it.
        let p1 = Arc::new(ScriptedProvider::new(vec![
            ScriptedResponse::tool(
                "memory_put",
                serde_json::json!({"text": "The user's name is Ada Lovelace", "tags": ["user"]}),
            ),
            ScriptedResponse::text("Noted."),
        ]));
        let report = run(Arc::clone(&p1))
            .run("Remember that my name is Ada")
            .await;
        assert_eq!(report.result.stop_reason, lsm_phase::StopReason::Done);
        assert_eq!(
            (
                report.summary.memory.written,
                report.summary.memory.approved
            ),
            (1, 1)
        );
        let requests = p1.requests();
        assert_eq!(standing(&requests[0]), None);
        assert!(standing(&requests[1]).unwrap().contains("Ada Lovelace"));

        // Run 2, a new harness: the fact is a system block of its first request, right
        // after the system prompt.
        let p2 = Arc::new(ScriptedProvider::new(vec![ScriptedResponse::text("Ada.")]));
        run(Arc::clone(&p2)).run("What is my name?").await;
        let request = &p2.requests()[0];
        assert_eq!(request.messages[1].role, Role::System);
        let block = standing(request).unwrap();
        assert_eq!(request.messages[1].content, block);
        assert!(
            block.contains("- [agent] The user's name is Ada Lovelace (tags: user)"),
            "{block}"
        );
    }
}
