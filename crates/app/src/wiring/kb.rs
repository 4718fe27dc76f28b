//! The knowledge base in an agent run: the KB tools added to the run's registry when an
//! index exists, their mode guard wired into the harness, and their model calls passed
//! through the run's budget.

use std::sync::Arc;

use crate::error::Result;
use lsm_tools_kb::{KnowledgeBase, ModePolicy, Pipeline};

use crate::config::Config;

/// What the knowledge base adds to an agent run.
pub struct AgentKb {
    /// The built-ins, plus the knowledge-base tools when an index exists.
    pub registry: lsm_sandbox::ToolRegistry,
    /// The mode check run before the KB tools.
    pub guard: Option<Arc<dyn lsm_harness::ToolCallGuard>>,
}

/// The tools of an agent run: the built-ins, plus the knowledge-base tools when an index
/// exists at `[kb] index_dir`, with the guard that checks their modes before they run. The
/// KB tools call `provider` only through the run's `budget` (a `BudgetedProvider`): each of
/// their LLM calls is refused once the run's budget is spent, capped to what is left, and
/// charged in tokens and cost.
///
/// # Errors
/// When the index exists but cannot be opened (another embedder, a missing model).
pub fn agent_tools(
    config: &Config,
    provider: Arc<dyn lsm_providers::Provider>,
    budget: &lsm_harness::RunBudget,
) -> Result<AgentKb> {
    let base = lsm_sandbox::builtin::registry();
    if lsm_tools_kb::read_manifest(&config.kb.index_dir)?.is_none() {
        return Ok(AgentKb {
            registry: base,
            guard: None,
        });
    }
    let kb = Arc::new(KnowledgeBase::open(&config.kb)?);
    let policy = ModePolicy::new(&config.kb.allowed_profiles, config.sandbox.allow_url_access);
    let guard = lsm_tools_kb::ModeGuard::new(policy.clone(), config.kb.modes.clone());
    let gated: Arc<dyn lsm_providers::Provider> =
        Arc::new(lsm_harness::BudgetedProvider::new(provider, budget.clone()));
    let remote = lsm_tools_kb::remote::build_providers(&config.kb.remote)?;
    let pipeline = Arc::new(Pipeline::new(kb, Some(gated), policy).with_remote(remote));
    Ok(AgentKb {
        registry: lsm_tools_kb::tools::registry_with(base, Some(pipeline)),
        guard: Some(Arc::new(KbModeGuard(guard))),
    })
}

/// The harness's view of the knowledge base's mode check.
struct KbModeGuard(lsm_tools_kb::ModeGuard);

impl lsm_harness::ToolCallGuard for KbModeGuard {
    fn check(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
    ) -> Result<(), lsm_harness::GuardRefusal> {
        self.0
            .check(tool, arguments)
            .map_err(|e| lsm_harness::GuardRefusal::new(e.to_string()))
    }
}

/// The mode policy a person's own queries run under: every profile, remote sources as the
/// sandbox allows.
pub fn user_policy(config: &Config) -> ModePolicy {
    ModePolicy::new(&[], config.sandbox.allow_url_access)
}

/// The pipeline of a person's own question (`lsm query`): the index at `[kb] index_dir`, the
/// remote sources `[kb]` configures, and the normal tier's model to write the answer (with
/// `provider` a `--provider` spec over `[llm]`; without any provider the answer lists the
/// closest excerpts), its retries told to `on_retry`.
///
/// # Errors
/// A usage error when the provider cannot be built; the knowledge base's errors (no index,
/// another embedder).
pub fn query_pipeline(
    config: &Config,
    provider: Option<String>,
    on_retry: super::RetryNotice,
) -> Result<Pipeline> {
    let cwd = std::env::current_dir()?;
    let llm = config.llm.resolve(lsm_phase::LlmTier::Normal)?;
    let flags = super::ProviderFlags {
        provider,
        ..Default::default()
    };
    let provider = match flags.provider.is_some() || llm.provider.is_some() {
        true => Some(super::announcing(
            super::build_provider(&llm, &flags, &cwd, &config.source_name())?.provider,
            llm.http.max_retries,
            on_retry,
        )),
        false => None,
    };
    let kb = Arc::new(KnowledgeBase::open(&config.kb)?);
    let remote = lsm_tools_kb::remote::build_providers(&config.kb.remote)?;
    Ok(Pipeline::new(kb, provider, user_policy(config)).with_remote(remote))
}
