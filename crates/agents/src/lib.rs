//! Agents: what an agent *is* (name, description, tool allowlist, LLM tier, system prompt)
//! and how it orchestrates bounded phases.
//!
//! Today this crate holds the built-in agents' capability cards ([`AgentSpec`]); the
//! `AgentCore::run_phase` orchestration layer builds on them.
//!
//! # What this crate must never do
//!
//! - Depend on any `lsm-*` crate but `lsm-phase` (checked by `cargo xtask check-layers`): an
//!   agent cannot name a provider, the sandbox or the harness, so it cannot call a model,
//!   execute a tool or read a token count except through a phase.
//! - Expose tokens, cost or budget: an agent sees only a phase's `stop_reason`.

pub use lsm_phase::{AgentIdentity, LlmTier, PhaseResult, StopReason};

/// An agent's capability card: who it is and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    /// Name (also its workspace folder).
    pub name: &'static str,
    /// One line for `lsm agent list`.
    pub description: &'static str,
    /// LLM tier.
    pub tier: LlmTier,
    /// Tools it may call (only those registered in a run are offered).
    pub tools: &'static [&'static str],
    /// The system prompt of its runs.
    pub system_prompt: &'static str,
}

impl AgentSpec {
    /// The identity of one run of this agent about `topic`. `ask_user` is added to the
    /// allowlist when `ask_user_available`.
    pub fn identity(&self, topic: &str, ask_user_available: bool) -> AgentIdentity {
        let mut tool_allowlist: Vec<String> = self.tools.iter().map(|t| t.to_string()).collect();
        if ask_user_available {
            tool_allowlist.push("ask_user".to_string());
        }
        AgentIdentity {
            name: self.name.to_string(),
            tool_allowlist,
            tier: self.tier,
            topic: topic.to_string(),
        }
    }
}

/// The general-purpose file agent: one long phase over the workspace's files.
pub const GENERAL: AgentSpec = AgentSpec {
    name: "general",
    description: "General-purpose agent: reads, searches and edits files in the workspace to complete a task.",
    tier: LlmTier::Normal,
    tools: &[
        "read_file",
        "read_folder",
        "find_file",
        "find_section",
        "file_metadata",
        "hash_file",
        "write_file",
        "append_file",
        "create_folder",
        "edit_file",
        "query_and_synthesize",
        "extract_snippets",
        "source_map",
        // Offered only when `[agents.memory] enabled` registers them.
        "memory_put",
        "memory_search",
    ],
    system_prompt: "You are a careful general-purpose assistant working inside a sandboxed \
workspace. Use the tools to inspect and change files as the task requires; paths are relative \
to the workspace. Prefer reading before writing. When the task is complete, answer with a short \
summary of what you did and no tool call. If you cannot proceed at all, call `block` with the \
reason.",
};

/// Every built-in agent.
pub const BUILTIN: &[AgentSpec] = &[GENERAL];

/// Look a built-in agent up by name.
pub fn find(name: &str) -> Option<&'static AgentSpec> {
    BUILTIN.iter().find(|a| a.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn general_has_the_reference_allowlist_and_ask_user_when_registered() {
        let id = GENERAL.identity("t", true);
        assert_eq!(id.name, "general");
        assert!(id.tool_allowlist.contains(&"edit_file".to_string()));
        assert_eq!(
            id.tool_allowlist.last().map(String::as_str),
            Some("ask_user")
        );
        assert!(
            !GENERAL
                .identity("t", false)
                .tool_allowlist
                .contains(&"ask_user".to_string())
        );
        assert_eq!(find("general"), Some(&GENERAL));
        assert_eq!(find("nope"), None);
    }
}
