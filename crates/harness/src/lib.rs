//! The agent harness: bounded LLM + tool phases over a provider and a sandbox — the driver
//! and the I/O around the pure core of `lsm-run`.
//!
//! [`AgentHarness`] implements [`lsm_phase::PhaseExecutor`]. One harness lives for one agent
//! run and owns everything an agent must not touch: the conversation contexts (one history,
//! conversation id and last response id per `context_label`), the token budget, the stop
//! signal, the provider, the sandbox, and the run's records. [`HarnessFactory`] implements
//! [`lsm_phase::ExecutorFactory`] so the agent layer can ask for a harness without naming it;
//! what a run is given besides its configuration, provider and sandbox is one struct,
//! [`RunSeams`], that the factory hands whole to each harness it builds.
//!
//! The decisions are `lsm-run`'s ([`core::Core::step`]: state and input in, events and the
//! next effect out; the modules `core`, `state`, `event`, `stop`, `stall`, `contract`,
//! `compaction`, `work_items` and `control` are its own, re-exported here under the paths
//! they have always had). This crate carries the effects out: the provider call raced
//! against the stop token, the sandbox, standing memory, the hooks' commands, the files a
//! contract names, worker runs; and it keeps the records — the journal in a [`RunStore`]
//! (event by event, before the effect it describes), `run_summary.json`, the run lock.
//!
//! One iteration: check budget → check stop → assemble messages (system prompt, standing
//! memory, the label's history under the context strategy) → one provider call with
//! `max_output_tokens` capped to what is left of the budget → record → `block` ends the phase
//! as blocked, no tool call ends it as done → every requested call is checked against the
//! allowlist, the phase's `tool_names` and the [`ToolCallGuard`]s, run through the sandbox,
//! recorded, and fed back.
//!
//! Records, under `<agents_folder>/<agent>/logs/<run_id>/`: `transcript.jsonl`, appended and
//! flushed event by event, and `run_summary.json`, written when the run finishes (also when it
//! fails). Side effects a tool reports ([`lsm_sandbox::ToolEvent`]: memories written, approved,
//! removed) become transcript events of their own and are counted in the summary; the
//! standing-memory block is recorded whenever it changes.
//!
//! # What this crate must never do
//!
//! - Put an accounting figure in a [`lsm_phase::PhaseResult`]: tokens and cost stay here.
//! - Make an LLM call once the budget is exhausted, in this phase or any later one — its own
//!   or one made inside a tool: the run's [`RunBudget`] gates both, and the composition root
//!   hands tools that call a model a [`BudgetedProvider`] over that budget.
//! - Let a tool failure, a provider failure or a record failure escape as a panic: each ends
//!   as an error result fed to the model or as an `error` stop, and is recorded.
//! - Execute a tool except through [`lsm_sandbox::Sandbox::execute`]. (The control tools —
//!   `block`, `work_complete`, the work-item tools — are not tools of the world: the pure core
//!   answers them from the run's state, see [`control`].)
//! - Decide for the core: what to record and what to do next are `lsm-run`'s; the driver
//!   only supplies what it learned (including the time and fresh ids) and carries out the
//!   effect it is given.
//!
//! # Guide: a run on the harness
//!
//! A harness is made of a [`HarnessConfig`], a provider ([`lsm_providers::Provider`]) and a
//! sandbox ([`lsm_sandbox::Sandbox`]). A [`HarnessFactory`] shares them among the harnesses it
//! builds, one per run; agents reach it only as an [`lsm_phase::ExecutorFactory`], and a
//! program that needs no agent can call [`AgentHarness::run`] itself (the `embed_openai`
//! example, `docs/LIBRARY.md`). Here the model is scripted: it reads a file, then answers.
//!
//! ```
//! use std::sync::Arc;
//!
//! use lsm_harness::{HarnessConfig, HarnessFactory};
//! use lsm_phase::{AgentIdentity, PhaseExecutor, PhaseRequest, RunOutcome, StopReason};
//! use lsm_providers::{ScriptedProvider, ScriptedResponse};
//! use lsm_sandbox::{Sandbox, SandboxConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let workspace = dir.path().join("workspace");
//! std::fs::create_dir(&workspace)?;
//! std::fs::write(workspace.join("notes.md"), "Soil holds carbon.")?;
//!
//! let model = Arc::new(ScriptedProvider::new(vec![
//!     ScriptedResponse::tool("read_file", serde_json::json!({"path": "notes.md"})),
//!     ScriptedResponse::text("The notes say soil holds carbon."),
//! ]));
//! // The built-in tools, reading and writing inside the workspace only.
//! let tools = lsm_sandbox::builtin::registry();
//! let sandbox = Sandbox::new(SandboxConfig::confined_to(&workspace), tools, None)?;
//! let config = HarnessConfig {
//!     agents_folder: dir.path().join("Agents"), // records: Agents/<agent>/logs/<run id>/
//!     max_tokens_budget: 10_000,                // the run's ceiling, unseen by the agent
//!     ..HarnessConfig::default()
//! };
//! let factory = HarnessFactory::new(config, model.clone(), Arc::new(sandbox));
//!
//! // One run of the agent `reader`, which may call `read_file` and nothing else.
//! let reader = AgentIdentity {
//!     name: "reader".into(),
//!     tool_allowlist: vec!["read_file".into()],
//!     tier: Default::default(),
//!     topic: "notes".into(),
//! };
//! let mut harness = factory.build(&reader, "You answer from the files.");
//! let phase = harness.run_bounded(PhaseRequest::new("What do the notes say?")).await;
//! harness.finish(RunOutcome::Completed).await;
//!
//! assert_eq!(phase.stop_reason, StopReason::Done);
//! assert_eq!(phase.final_text, "The notes say soil holds carbon.");
//! assert_eq!(phase.tool_calls[0].outcome.text(), "Soil holds carbon.");
//! assert_eq!(model.calls(), 2);
//! assert!(harness.run_dir().join("run_summary.json").is_file());
//! assert!(harness.run_dir().join("transcript.jsonl").is_file());
//! # Ok(())
//! # }
//! ```

mod budget;
pub mod context;
mod error;
mod factory;
mod handles;
mod harness;
pub mod hooks;
mod journal;
pub mod lock;
mod memory;
mod records;
pub mod resume;
mod seams;
pub mod store;
pub mod workers;

// The pure core's modules, under the paths they have always had here.
pub use lsm_run::{compaction, contract, control, core, event, stall, state, stop, work_items};

pub use budget::BudgetedProvider;
pub use context::{
    ContextConfig, ContextError, EnvironmentFacts, InstructionFile, RunContext, environment_block,
    project_instructions,
};
pub use error::HarnessError;
pub use factory::HarnessFactory;
pub use handles::{EventSink, RecordHandle, RunHandle};
pub use harness::{AgentHarness, RunReport, new_run_id};
pub use hooks::{
    CommandHook, CommandHookConfig, Hook, HookAnswer, HookEvent, HookFailure, HookPoint, HookRun,
    HooksConfig,
};
pub use journal::{Journal, parse_journal, read_journal};
pub use lock::{LockState, RunLock, lock_state};
pub use lsm_run::{
    ApprovalsDenials, BudgetExhausted, BudgetLimits, BudgetSnapshot, CallPermit, ContextState,
    ContextStrategy, ContextTracking, ContractReport, Coverage, CoverageItem,
    DEFAULT_COMPLETION_RETRIES, EventEnvelope, Grant, GuardRefusal, HarnessConfig, JournalFsync,
    LabelTracking, MemoryCounts, Predicate, RepairAction, RunBudget, RunEvent, RunLaunch, RunState,
    RunSummary, RunUsage, SCHEMA_VERSION, SettingError, StallConfig, StopMode, TaskContract,
    TokenUsage, ToolApprovalCounts, ToolCallGuard, WorkItem, WorkStatus, exhausted, gate,
};
pub use lsm_run::{
    BLOCK_TOOL, COMPLETE_TOOL, WORK_COMPLETE_TOOL, control_tool_names, is_control_tool,
};
pub use memory::{MemoryProvider, NoMemory};
pub use records::extract_constraints;
pub use resume::{ResumePoint, StartedRun};
pub use seams::RunSeams;
pub use store::{FileStore, JournalLine, JournalWriter, RunKey, RunStore};
pub use workers::{WorkerJob, WorkerReporter, WorkerSpawner};
