//! Agents: what an agent *is* (name, description, tool allowlist, LLM tier) and how it
//! orchestrates bounded phases through `AgentCore::run_phase`.
//!
//! # What this crate must never do
//!
//! - Depend on any `lsm-*` crate but `lsm-phase` (checked by `cargo xtask check-layers`): an
//!   agent cannot name a provider, the sandbox or the harness, so it cannot call a model,
//!   execute a tool or read a token count except through a phase.
//! - Expose tokens, cost or budget: an agent sees only a phase's `stop_reason`.

pub use lsm_phase::{AgentIdentity, LlmTier, PhaseResult, StopReason};
