//! [`SettingError`]: a setting the run cannot use, found when the configuration is loaded.

/// A value of `[hooks]`, `[agents.compaction]` or `[agents.context]` that cannot be used.
/// Fix the setting the message names (the configuration's loader adds its file and line).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingError {
    /// A hook entry whose `command` names no program.
    #[error("{at}: `command` must name a program")]
    HookWithoutProgram {
        /// `[[hooks.<point>]] entry <n>`.
        at: String,
    },
    /// A hook entry whose timeout is not a positive number of seconds.
    #[error("{at}: `timeout_seconds` must be a positive number of seconds")]
    HookTimeout {
        /// `[[hooks.<point>]] entry <n>`.
        at: String,
    },
    /// `[agents.compaction] target_fraction` outside 0.1–0.95.
    #[error("[agents.compaction] target_fraction = {0} must be between 0.1 and 0.95")]
    TargetFraction(f64),
    /// `[agents.compaction] context_window` under 1024 tokens.
    #[error("[agents.compaction] context_window must be at least 1024 tokens")]
    ContextWindow,
    /// `[agents.compaction] summary_max_tokens` of 0.
    #[error("[agents.compaction] summary_max_tokens must be at least 1")]
    SummaryMaxTokens,
    /// `[agents.context] max_instruction_bytes` of 0.
    #[error(
        "[agents.context] max_instruction_bytes must be at least 1 (switch a provider off with project_instructions = false or nested_instructions = false)"
    )]
    InstructionBytes,
}
