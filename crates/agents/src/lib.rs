//! Agents: what an agent *is* (its capability card: name, description, tool allowlist, LLM
//! tier, system prompt) and how it orchestrates bounded phases.
//!
//! Every agent is built on an [`AgentCore`], which it is given an [`AgentContext`] for: an
//! [`lsm_phase::ExecutorFactory`], the agents folder and a few limits. The agent's whole
//! interaction with models and tools is [`AgentCore::run_phase`]: one executor per run,
//! created on the first phase, reused by every later one, finished when the run ends. Its
//! files go through the workspace accessors ([`AgentCore::artifacts_dir`],
//! [`AgentCore::save_artifact`], …) and its log through [`AgentCore::log`].
//!
//! The built-in agents ([`BUILTIN`], made with [`create`]) — eight that work on their own, the
//! `conductor` that delegates, and its two workers, `researcher` and `terminal` — are
//! documented phase by phase in `docs/AGENTS.md`.
//!
//! # What this crate must never do
//!
//! - Depend on any `lsm-*` crate but `lsm-phase` (checked by `cargo xtask check-layers`): an
//!   agent cannot name a provider, the sandbox or the harness, so it cannot call a model,
//!   execute a tool or read a token count except through a phase.
//! - Drive an executor anywhere but in [`AgentCore`] (a test scans the sources).
//! - Expose or accept tokens, cost or budget: an agent sees only a phase's `stop_reason`
//!   (a test parses the public API and finds no accounting name in it).
//! - Write files anywhere but under its own workspace folder.

mod agents;
mod catalog;
mod core;
mod defined;
pub mod definition;
mod parse;

use lsm_phase::AgentIdentity;
pub use lsm_phase::{
    DirectToolCall, Finding, LlmTier, PhaseRequest, PhaseResult, RunOutcome, StopReason,
    ToolCallRecord, ToolOutcome, TurnReport, WorkerOutcome, WorkerRequest,
};

pub use crate::agents::assistant::{ASSISTANT, AssistantAgent};
pub use crate::agents::conductor::{CONDUCTOR, ConductorAgent};
pub use crate::agents::curator::{CURATOR, CuratorAgent};
pub use crate::agents::writing::{WRITING, WritingAgent};
pub use crate::catalog::Catalog;
pub use crate::core::{
    AgentContext, AgentCore, AgentError, AgentLogSink, AgentOutput, DEFAULT_MAX_ITERATIONS,
    DEFAULT_MAX_ROUNDS, DEFAULT_MAX_WORKERS, MAX_ARTIFACT_NAME_BYTES, artifact_filename_at,
    sanitize_artifact_name,
};
pub use crate::defined::DefinedAgent;
pub use crate::definition::{AgentDefinition, DefinitionError, DefinitionSource};

/// What a run of an agent is about: a task to do, or a topic to work on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskInput {
    /// An instruction (`lsm agent run <name> --task "..."`).
    Task,
    /// A subject (`lsm agent run <name> --topic "..."`).
    Topic,
}

impl TaskInput {
    /// `"task"` or `"topic"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskInput::Task => "task",
            TaskInput::Topic => "topic",
        }
    }
}

/// An agent's capability card: who it is and what it may do.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AgentSpec {
    /// Name (also its workspace folder).
    pub name: String,
    /// One line for `lsm agent list`.
    pub description: String,
    /// LLM tier.
    pub tier: LlmTier,
    /// Tools it may call (only those registered in a run are offered).
    pub tools: Vec<String>,
    /// Whether a run takes a task or a topic.
    pub input: TaskInput,
    /// The system prompt of its runs.
    pub system_prompt: String,
}

impl AgentSpec {
    /// The identity of one run of this agent about `topic`. `ask_user` is added to the
    /// allowlist when `ask_user_available`.
    pub fn identity(&self, topic: &str, ask_user_available: bool) -> AgentIdentity {
        let mut tool_allowlist = self.tools.clone();
        if ask_user_available && !self.tools.iter().any(|t| t == "ask_user") {
            tool_allowlist.push("ask_user".to_string());
        }
        AgentIdentity {
            name: self.name.clone(),
            tool_allowlist,
            tier: self.tier,
            topic: topic.to_string(),
        }
    }
}

/// The card of a built-in agent that runs code of its own, as constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Card {
    /// Name (also its workspace folder).
    pub name: &'static str,
    /// One line for `lsm agent list`.
    pub description: &'static str,
    /// LLM tier.
    pub tier: LlmTier,
    /// Tools it may call.
    pub tools: &'static [&'static str],
    /// Whether a run takes a task or a topic.
    pub input: TaskInput,
    /// The system prompt of its runs.
    pub system_prompt: &'static str,
}

impl Card {
    /// The card as an [`AgentSpec`].
    pub fn spec(&self) -> AgentSpec {
        AgentSpec {
            name: self.name.to_string(),
            description: self.description.to_string(),
            tier: self.tier,
            tools: self.tools.iter().map(|t| t.to_string()).collect(),
            input: self.input,
            system_prompt: self.system_prompt.to_string(),
        }
    }
}

/// An agent: a capability card and a `run` that orchestrates phases on its [`AgentCore`].
///
/// `run` never panics and never returns an error: how the run ended, what it saved and why it
/// failed (if it did) are in the [`AgentOutput`].
#[async_trait::async_trait]
pub trait Agent: Send {
    /// Name (also its workspace folder).
    fn name(&self) -> &str;
    /// One-line description.
    fn description(&self) -> &str;
    /// The tools it may call (`ask_user` included when registered).
    fn tool_allowlist(&self) -> Vec<String>;
    /// Its LLM tier.
    fn tier(&self) -> LlmTier;
    /// Run it on `task` (a task or a topic, see [`AgentSpec::input`]). Each call is one run
    /// with its own executor.
    async fn run(&mut self, task: &str) -> AgentOutput;
}

/// The built-in agent `name`.
pub fn find(name: &str) -> Option<&'static AgentDefinition> {
    definition::builtin().iter().find(|a| a.name() == name)
}

/// The built-in agent `name`, on `ctx` (user and project definitions: [`Catalog::create`]).
pub fn create(name: &str, ctx: AgentContext) -> Option<Box<dyn Agent>> {
    Catalog::builtin().create(name, ctx)
}

#[cfg(test)]
mod tests;
