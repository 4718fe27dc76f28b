//! The parts every agent run is wired from, shared by `lsm agent run` and the runtime
//! manager (`lsm tui`): the tool registry (built-ins, knowledge-base tools when an index
//! exists, memory tools when enabled, `ask_user` on the run's channel), the sandbox, and a `HarnessFactory` with the run's stop token and
//! standing memory, the project's root for the context providers (`[agents.context]`), and
//! the run's one budget, shared by the harness and the KB tools.

use std::sync::Arc;

use crate::error::Result;
use lsm_harness::{BudgetLimits, HarnessFactory, RunBudget};
use lsm_interaction::InteractionChannel;
use lsm_providers::Provider;
use tokio_util::sync::CancellationToken;

use super::interaction as interaction_wiring;
use super::memory::{self as memory_wiring, StoreMemory};
use crate::config::Config;
use crate::error::usage;

/// A run's factory, and whether `ask_user` is among its tools.
pub(crate) struct RunParts {
    /// Builds the run's harness (add an event sink before use if wanted).
    pub factory: HarnessFactory,
    /// Whether `ask_user` is registered (so it joins every allowlist).
    pub ask_user_available: bool,
    /// The MCP tools registered (`mcp__<server>__<tool>`), to expand `mcp__<server>__*`
    /// allowlist entries.
    pub mcp_tool_names: Vec<String>,
}

impl RunParts {
    /// `allowlist` with its `mcp__<server>__*` entries replaced by the server's tools.
    pub fn expand_allowlist(&self, allowlist: Vec<String>) -> Vec<String> {
        lsm_mcp::naming::expand(allowlist, self.mcp_tool_names.iter().map(String::as_str))
    }
}

/// Wire one run of `config` on `provider`, asking `channel` whenever a person must decide.
/// The factory is for this one run: its harness and the KB tools share the run's budget —
/// `budget` when given (a worker run draws on its parent's: a child of it), else one of the
/// run's own. Called by `crate::run::prepare` only.
///
/// # Errors
/// When the sandbox configuration cannot be used (a usage error).
pub(crate) fn build_run(
    config: &Config,
    provider: Arc<dyn Provider>,
    channel: &Arc<InteractionChannel>,
    stop: CancellationToken,
    budget: Option<RunBudget>,
) -> Result<RunParts> {
    // One budget for the run: the harness's LLM calls and those the knowledge-base tools
    // make pass the same gate and are charged to it.
    let budget =
        budget.unwrap_or_else(|| RunBudget::new(BudgetLimits::from_config(&config.agents.harness)));
    // The built-ins, plus the knowledge-base tools when an index exists.
    let kb = super::kb::agent_tools(config, Arc::clone(&provider), &budget)
        .map_err(|e| usage(format!("the knowledge base cannot be used: {e:#}")))?;
    let mut registry = kb.registry;
    let memory = if config.memory.enabled {
        Some(memory_wiring::configured_backend(
            config,
            &config.agents.agents_folder,
        )?)
    } else {
        None
    };
    if let Some(store) = &memory {
        registry = memory_wiring::with_memory_tools(registry, store);
    }
    registry = crate::deferred_tools::with_deferred_tools(registry, &config.agents.deferred_tools);
    let mcp_tools = super::mcp::tools_for_run(config);
    let mcp_tool_names = mcp_tools.iter().map(|t| t.name().to_string()).collect();
    for tool in mcp_tools {
        registry.register(tool);
    }
    // Every run's sandbox refuses writes to lsm's own configuration and run records.
    let sandbox =
        interaction_wiring::sandbox_with_channel(&config.run_sandbox(), registry, channel)
            .map_err(|e| usage(config.sandbox_error(&e)))?;
    let ask_user_available = sandbox.registry().contains("ask_user");
    let sandbox = Arc::new(sandbox);
    // Hook commands run in the run's OS sandbox, like the programs its tools execute.
    let hooks = config
        .hooks
        .command_hooks(&sandbox)
        .map_err(|e| usage(format!("{e} (in {})", config.source_name())))?;
    let mut factory = HarnessFactory::new(config.agents.harness.clone(), provider, sandbox)
        .with_stop_token(stop)
        .with_stall(config.stall)
        .with_agent_stop_max_blocks(config.hooks.agent_stop_max_blocks)
        .with_budget(budget)
        // The context providers ([agents.context]) read the project's instructions there.
        .with_project_root(config.root.clone());
    for hook in hooks {
        factory = factory.with_hook(hook);
    }
    if let Some(guard) = kb.guard {
        factory = factory.with_call_guard(guard);
    }
    if let Some(store) = memory {
        factory = factory.with_memory(Arc::new(StoreMemory::new(
            store,
            config.memory.limit,
            config.agents.max_tokens_budget,
        )));
    }
    Ok(RunParts {
        factory,
        ask_user_available,
        mcp_tool_names,
    })
}
