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
//! An agent is data: a [`definition`] (a Markdown file whose TOML front matter lists its card
//! and its phases) run by the one interpreter, [`DefinedAgent`]. The built-in agents
//! ([`definition::builtin`], made with [`create`]) are such definitions, embedded, but for the
//! few that need code of their own (the `conductor` that delegates, `curator`, `writing`,
//! `assistant`). A [`Catalog`] puts the user's and the project's definitions over them. Each
//! is documented phase by phase in `docs/AGENTS.md`.
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
//!
//! # Guide: an agent of your own
//!
//! Most agents need no code: write a definition (`docs/AGENTS.md`) and run it with
//! [`DefinedAgent`]. Where a definition cannot say it, an agent is a capability card
//! ([`AgentSpec`]) and an [`Agent::run`] that orchestrates phases on its [`AgentCore`]. What runs the phases sits behind the
//! [`lsm_phase::ExecutorFactory`] of its [`AgentContext`]: the harness in a real program
//! (`lsm_harness::HarnessFactory`, see `docs/LIBRARY.md`), a hand-written executor below. The
//! core creates one executor on a run's first phase and reuses it for every later one.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! use lsm_agents::{
//!     Agent, AgentContext, AgentCore, AgentOutput, AgentSpec, PhaseRequest, PhaseResult,
//!     StopReason, TaskInput,
//! };
//! use lsm_phase::{AgentIdentity, ExecutorFactory, LlmTier, PhaseExecutor, RunOutcome};
//!
//! /// Stands in for the harness: every phase is done at once, answering "done: <message>".
//! struct Answering;
//!
//! #[async_trait::async_trait]
//! impl PhaseExecutor for Answering {
//!     async fn run_bounded(&mut self, request: PhaseRequest) -> PhaseResult {
//!         PhaseResult {
//!             final_text: format!("done: {}", request.user_message),
//!             tool_calls: Vec::new(),
//!             stop_reason: StopReason::Done,
//!         }
//!     }
//!     async fn finish(&mut self, _outcome: RunOutcome) {}
//! }
//!
//! /// Counts the executors it creates.
//! #[derive(Default)]
//! struct Factory(AtomicUsize);
//!
//! impl ExecutorFactory for Factory {
//!     fn create(&self, _agent: &AgentIdentity, _prompt: &str) -> Box<dyn PhaseExecutor> {
//!         self.0.fetch_add(1, Ordering::SeqCst);
//!         Box::new(Answering)
//!     }
//! }
//!
//! const PROMPT: &str = "You write short notes.";
//!
//! /// Two phases: an outline, then a draft from it.
//! struct Writer {
//!     core: AgentCore,
//! }
//!
//! #[async_trait::async_trait]
//! impl Agent for Writer {
//!     fn name(&self) -> &str {
//!         self.core.name()
//!     }
//!     fn description(&self) -> &str {
//!         self.core.description()
//!     }
//!     fn tool_allowlist(&self) -> Vec<String> {
//!         self.core.tool_allowlist()
//!     }
//!     fn tier(&self) -> LlmTier {
//!         self.core.tier()
//!     }
//!     async fn run(&mut self, topic: &str) -> AgentOutput {
//!         self.core.begin_run(topic);
//!         let outline = PhaseRequest::new(format!("outline {topic}"));
//!         let outline = self.core.run_phase(PROMPT, outline).await;
//!         if outline.stop_reason != StopReason::Done {
//!             // Budget gone, stop requested, blocked, error: end the run with what there is.
//!             return self.core.end_run(Ok(outline.final_text)).await;
//!         }
//!         let draft = PhaseRequest::new(format!("draft from '{}'", outline.final_text));
//!         let draft = self.core.run_phase(PROMPT, draft).await;
//!         self.core.end_run(Ok(draft.final_text)).await
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let agents_folder = tempfile::tempdir()?; // the agent's log goes under writer/logs/
//! let factory = Arc::new(Factory::default());
//! let spec = AgentSpec {
//!     name: "writer".into(),
//!     description: "Writes short notes.".into(),
//!     tier: LlmTier::Normal,
//!     tools: Vec::new(),
//!     input: TaskInput::Topic,
//!     system_prompt: PROMPT.into(),
//! };
//! let ctx = AgentContext::new(factory.clone(), agents_folder.path());
//! let mut agent = Writer { core: AgentCore::new(spec, ctx) };
//!
//! let output = agent.run("soil").await;
//! assert_eq!(output.text, "done: draft from 'done: outline soil'");
//! assert_eq!(output.stop_reason, Some(StopReason::Done));
//! assert_eq!(factory.0.load(Ordering::SeqCst), 1); // one executor for both phases
//! agent.run("water").await;
//! assert_eq!(factory.0.load(Ordering::SeqCst), 2); // a fresh one for the next run
//! # Ok(())
//! # }
//! ```

mod agents;
mod artifacts;
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
pub use crate::artifacts::{MAX_ARTIFACT_NAME_BYTES, artifact_filename_at, sanitize_artifact_name};
pub use crate::catalog::Catalog;
pub use crate::core::{
    AgentContext, AgentCore, AgentError, AgentLogSink, AgentOutput, DEFAULT_MAX_ITERATIONS,
    DEFAULT_MAX_ROUNDS, DEFAULT_MAX_WORKERS,
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
