//! The pure core of an agent run: the decisions of the loop, and the protocol its front ends
//! speak.
//!
//! [`Core::step`](core::Core::step) takes the run's [`RunState`] and one thing the driver
//! learned ([`core::Input`]: a phase asked for, a model's answer, a tool's outcome, a hook's
//! answer, …) and returns the [`RunEvent`]s to record and the next [`core::Effect`] (call the
//! model, run a tool, run the hooks, check files, finish the phase). Every event is applied to
//! the state as it is made ([`RunState::apply`], the fold), so a run's state is the fold of
//! its journal and a run killed at any instant resumes from the journal alone. Around the
//! step: the stop decision ([`stop`]), stall detection ([`stall`]), task contracts
//! ([`contract`]), compaction's ladder ([`compaction`]), work items ([`work_items`]), the
//! control tools the core answers itself ([`control`]), the named contexts ([`contexts`]),
//! the context providers' texts ([`context`]) and the budget gate ([`budget`]: the ledger one
//! run and its workers share, and the pure [`gate`]).
//!
//! [`RunEvent`] in its [`EventEnvelope`] is the protocol type: the journal line, the event
//! sink's input, the `stream-json` output and the JSON schema committed as
//! `docs/run-event.schema.json`. A front end depends on this crate to read a run, without the
//! I/O. The message types a provider speaks ([`message`]: `Message`, `LlmRequest`, `Usage`,
//! …) are here too, so that the core can build requests; `lsm-providers` re-exports them.
//!
//! The driver that carries the effects out — the provider call, the sandbox, the journal's
//! store, the hooks' commands, the worker runs, the clock — is `lsm-harness`.
//!
//! # What this crate must never do
//!
//! - Perform I/O: no tokio (nor anything that pulls it in), no `std::fs`, no `std::net`, no
//!   `std::process`. `cargo xtask check-layers` holds its dependencies to `lsm-phase` and
//!   crates without tokio (rule 7) and its sources to no such use outside tests.
//! - Read the clock or draw random numbers: the time of a decision ([`core::Env::now`]) and
//!   a new context's conversation id ([`core::Input::Start`]) come in as inputs, so a step is
//!   a function of its inputs and a resumed run decides what the first one did.
//! - Change the wire form of [`RunEvent`]: journals written by earlier releases of this
//!   schema version must still fold, byte for byte the same lines must be written.
//! - Let a malformed model answer, tool result or journal line panic: each is a value the
//!   core decides on (an error result fed back, an `error` stop, an event it skips).

pub mod budget;
pub mod compaction;
pub mod config;
pub mod context;
pub mod contexts;
pub mod contract;
pub mod control;
pub mod core;
pub mod error;
pub mod event;
pub mod guard;
pub mod hooks;
pub mod message;
pub mod report;
pub mod stall;
pub mod state;
pub mod stop;
pub mod summary;
pub mod usage;
pub mod wave;
pub mod work_items;

pub use budget::{
    BudgetExhausted, BudgetLimits, BudgetSnapshot, CallPermit, Grant, RunBudget, exhausted, gate,
};
pub use config::{
    ContextStrategy, DEFAULT_COMPLETION_RETRIES, HarnessConfig, JournalFsync, StopMode,
};
pub use context::{
    ContextConfig, EnvironmentFacts, InstructionFile, RunContext, environment_block,
};
pub use contexts::ContextState;
pub use contract::{Coverage, CoverageItem, Predicate, TaskContract};
pub use control::{
    BLOCK_TOOL, COMPLETE_TOOL, WORK_COMPLETE_TOOL, control_tool_names, is_control_tool,
};
pub use core::Core;
pub use error::SettingError;
pub use event::{EventEnvelope, RepairAction, RunEvent, RunLaunch, SCHEMA_VERSION};
pub use guard::{GuardRefusal, ToolCallGuard};
pub use hooks::{Hook, HookAnswer, HookEvent, HookPoint, HookRun};
pub use stall::StallConfig;
pub use state::RunState;
pub use summary::{
    ApprovalsDenials, ContextTracking, ContractReport, LabelTracking, MemoryCounts, RunSummary,
    TokenUsage, ToolApprovalCounts,
};
pub use usage::RunUsage;
pub use wave::Wave;
pub use work_items::{WorkItem, WorkStatus};
