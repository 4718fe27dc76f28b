//! What a run's records sum up: `run_summary.json` ([`RunSummary`]) and the blocks the state
//! keeps as the run goes (approvals and denials, memory counts). Plain data; the driver writes
//! the file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Counts of approvals and denials for one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolApprovalCounts {
    /// Calls let through after a permission decision.
    pub approvals: u64,
    /// Calls refused by a permission or policy decision.
    pub denials: u64,
}

/// One permission or policy decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalEvent {
    /// Tool.
    pub tool_name: String,
    /// Let through?
    pub allowed: bool,
    /// Why.
    pub reason: String,
    /// When (RFC 3339, UTC).
    pub timestamp: String,
}

/// The `approvals_denials` block of the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalsDenials {
    /// Total approvals.
    pub approvals: u64,
    /// Total denials.
    pub denials: u64,
    /// Per tool.
    pub by_tool: BTreeMap<String, ToolApprovalCounts>,
    /// Every decision, in order.
    pub events: Vec<ApprovalEvent>,
}

/// The `token_usage` block of the summary: totals over every phase and context of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Input + output tokens, as reported by the provider.
    pub tokens_used: u64,
    /// The run's ceiling.
    pub max_tokens_budget: u64,
    /// LLM calls made.
    pub iterations: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_tokens: u64,
    /// What the run's calls cost in US dollars, when the provider has prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The run's cost ceiling, when one is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,
    /// Of `tokens_used`, what the run's worker runs spent (they draw on its budget).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub workers_tokens_used: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The `memory` block of the summary: what the run's tools did to persistent memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryCounts {
    /// Memories stored (as candidates or approved).
    pub written: u64,
    /// Memories that became approved (a stored memory a person approved counts here too).
    pub approved: u64,
    /// Memories removed.
    pub removed: u64,
}

/// One label's chain state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelTracking {
    /// LLM calls made in this context.
    pub iterations: u32,
    /// The context's current conversation id.
    pub conversation_id: Option<String>,
    /// The last response id the provider returned in this context.
    pub response_id: Option<String>,
    /// How often the context was compacted to fit the model's window.
    #[serde(default)]
    pub compactions: u32,
}

/// The `context_tracking` block of the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextTracking {
    /// Labels in the order first used (`__default__` for the primary context).
    pub context_labels_seen: Vec<String>,
    /// Per label.
    pub per_label: BTreeMap<String, LabelTracking>,
}

/// `run_summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The transcript format of the run ([`crate::event::SCHEMA_VERSION`]; 0 in summaries
    /// written before it was recorded).
    #[serde(default)]
    pub schema_version: u32,
    /// This run's id (also its log folder's name).
    pub run_id: String,
    /// The agent.
    pub agent_name: String,
    /// The task or topic.
    pub topic: String,
    /// `completed`, `stopped` or `failed`.
    pub status: String,
    /// The last phase's stop reason (`done`, `max_iterations`, `budget_exhausted`, …).
    pub run_outcome: String,
    /// Why the run failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The run's final text: the last phase's (the CLI prints the agent's answer here).
    #[serde(default)]
    pub final_text: String,
    /// Start (RFC 3339, UTC).
    pub started_at: String,
    /// End (RFC 3339, UTC).
    pub finished_at: String,
    /// Wall time.
    pub duration_seconds: f64,
    /// Provider name.
    pub provider: String,
    /// Model.
    pub model: String,
    /// Calls per tool (executed or refused).
    pub tools_used: BTreeMap<String, u64>,
    /// Tool names in call order.
    pub tool_sequence: Vec<String>,
    /// Permission and policy decisions.
    pub approvals_denials: ApprovalsDenials,
    /// Files written by tools, then the artifacts the agent layer saved itself.
    pub artifacts_created: Vec<String>,
    /// Token totals.
    pub token_usage: TokenUsage,
    /// Rules stated in the task (up to 8 clauses starting with avoid/must/should/…).
    pub constraints: Vec<String>,
    /// Per-context chain state.
    pub context_tracking: ContextTracking,
    /// Persistent-memory changes made by the run's tools (absent in summaries written before
    /// memory existed: read as zeros).
    #[serde(default)]
    pub memory: MemoryCounts,
    /// The stop mode the run used.
    #[serde(default)]
    pub stop_mode: crate::config::StopMode,
    /// The work-item ledger at the end of the run (absent when the run kept none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub work_items: Vec<crate::work_items::WorkItem>,
    /// What the run delivered: the artifacts of its done deliverable work items, in ledger
    /// order (absent when there are none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deliverables: Vec<crate::work_items::Deliverable>,
    /// The task contract's coverage at the end of the run (absent without a contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<ContractReport>,
    /// What the completion checks still found unmet when an `interactive` stop was accepted
    /// after its retries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmet_checks: Vec<String>,
    /// What the run reported (the model's `complete` report, or its last answer); no
    /// accounting in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<lsm_phase::TurnReport>,
    /// The call of a tool handled outside `lsm` the run waits for (status `deferred`): give
    /// its result with `lsm runs resume RUN --tool-result ID=FILE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferred_call: Option<DeferredCall>,
    /// The run whose conversation this one continues (`--continue`); its token totals are
    /// its own, the earlier turns' are theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<String>,
}

/// A deferred call the run waits for, as the run summary gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeferredCall {
    /// The call's id (the `ID` of `--tool-result ID=FILE`).
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments, as the model gave them.
    pub arguments: serde_json::Value,
}

/// A task contract's coverage ledger, as the run summary gives it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContractReport {
    /// The contract's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Every condition held at the end of the run.
    pub satisfied: bool,
    /// The unmet conditions, one line each.
    pub unmet: Vec<String>,
    /// Every condition, whether it held, and what shows it.
    pub coverage: Vec<crate::contract::CoverageItem>,
}
