//! A run's settings (`[agents]` in `lsm.toml`): [`HarnessConfig`] and the modes it names.
//! Plain data: the driver (lsm-harness) reads the I/O settings (`agents_folder`,
//! `write_records`, `journal_fsync`), the core the rest.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How a context's history is trimmed before each call.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ContextStrategy {
    /// Send only the last 6 messages.
    Fresh,
    /// Send the whole history; when a prompt would not fit the model's context window,
    /// compact that context down the ladder of [`crate::compaction`] (`[agents.compaction]`).
    #[default]
    Compact,
    /// Send the whole history, never compacted (for models whose window the runs never
    /// fill; a prompt that does not fit is the provider's error).
    Full,
}

/// When the journal (the transcript) is flushed to the disk with `fsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum JournalFsync {
    /// After every line.
    Always,
    /// Before every tool call that can have side effects (a tool whose risk is other than
    /// `read_only`), and at the end of each phase and of the run. A crash may lose lines
    /// after the last such point, never one that describes a side effect already started.
    #[default]
    Batched,
    /// Never (the operating system writes when it likes): a crash can lose recent lines.
    Never,
}

/// How strictly a phase that completes the task must prove it is complete before it may
/// stop (`[agents] stop_mode`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StopMode {
    /// Liveness first: the completion checks (task contract, open work items) send the model
    /// back to work at most `completion_retries` times; then the stop is accepted and the
    /// summary lists what was unmet.
    #[default]
    Interactive,
    /// For automation: the phase is `done` only when the model declared it with the
    /// `work_complete` control tool and the task contract and the work items are satisfied;
    /// when they still are not after `completion_retries` retries, it ends `contract_unmet`.
    StrictAutomation,
}

impl StopMode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            StopMode::Interactive => "interactive",
            StopMode::StrictAutomation => "strict_automation",
        }
    }
}

/// Default number of times the completion checks may send the model back in one phase.
pub const DEFAULT_COMPLETION_RETRIES: u32 = 2;

/// Default number of read-only calls of one answer that run at the same time.
pub const DEFAULT_MAX_PARALLEL_TOOLS: usize = 4;

/// Everything the harness needs to know besides its provider and sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HarnessConfig {
    /// Root of the agents' workspaces; records go under `<agents_folder>/<agent>/logs/`.
    pub agents_folder: PathBuf,
    /// Token ceiling for one run, across all phases and contexts (input + output tokens).
    pub max_tokens_budget: u64,
    /// Default iteration limit of `run()`.
    pub max_iterations: u32,
    /// Upper bound on one call's generated tokens (further capped to what is left of the budget).
    pub max_output_tokens: Option<u64>,
    /// History trimming.
    pub context_window_strategy: ContextStrategy,
    /// Write the transcript and summary files. Off only in benchmarks.
    pub write_records: bool,
    /// Offer the reserved `block` control tool so the model can say it cannot proceed.
    pub offer_block_tool: bool,
    /// Offer the reserved `complete` control tool so the model can end its work with a
    /// report (findings with evidence, learnings, escalations).
    pub offer_complete_tool: bool,
    /// Cost ceiling of one run in US dollars, across all phases and contexts. Needs the
    /// provider's prices (`[llm] pricing`); without them no cost is known and only the token
    /// budget applies.
    pub max_cost_usd: Option<f64>,
    /// Reserve the provider's prompt-token estimate before each call: no call is made when the
    /// estimated prompt does not fit in what is left (of tokens, or of dollars), and the output
    /// cap is what is left after it. Off: no call once the budget is used up, output capped to
    /// what is left, so a run overshoots by at most one call's prompt.
    pub reserve_prompt_estimate: bool,
    /// When the journal is flushed to the disk (see [`JournalFsync`]).
    pub journal_fsync: JournalFsync,
    /// How strictly a phase that completes the task must prove it (see [`StopMode`]).
    pub stop_mode: StopMode,
    /// How often the completion checks (`work_complete`, the task contract, open work items)
    /// may send the model back in one phase before the stop mode decides.
    pub completion_retries: u32,
    /// Context compaction (`[agents.compaction]`), under the `compact` strategy.
    pub compaction: crate::compaction::CompactionConfig,
    /// Offer the work-item tools (`work_item_add`, `work_item_update`, `work_item_list`,
    /// `work_item_set_artifact`, `work_item_flag_revision`) to every agent. An agent whose
    /// allowlist names one of them is offered that one anyway.
    pub work_items: bool,
    /// The context providers (`[agents.context]`): project instructions, the environment
    /// block, nested instructions just in time.
    pub context: crate::context::ContextConfig,
    /// How many read-only calls of one answer run at the same time (a writing or executing
    /// call runs alone, after the calls before it). 1: every call runs alone.
    pub max_parallel_tools: usize,
    /// Wall-clock limit of a run in seconds, its earlier processes' time included (a resumed
    /// run counts what it spent before). Reached, the run pauses, resumable. `None`: no limit.
    pub max_wall_seconds: Option<u64>,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        HarnessConfig {
            agents_folder: PathBuf::from("Agents"),
            max_tokens_budget: 200_000,
            max_iterations: 25,
            max_output_tokens: Some(4096),
            context_window_strategy: ContextStrategy::Compact,
            write_records: true,
            offer_block_tool: true,
            offer_complete_tool: true,
            max_cost_usd: None,
            reserve_prompt_estimate: false,
            journal_fsync: JournalFsync::Batched,
            stop_mode: StopMode::Interactive,
            completion_retries: DEFAULT_COMPLETION_RETRIES,
            work_items: false,
            compaction: crate::compaction::CompactionConfig::default(),
            context: crate::context::ContextConfig::default(),
            max_parallel_tools: DEFAULT_MAX_PARALLEL_TOOLS,
            max_wall_seconds: None,
        }
    }
}
