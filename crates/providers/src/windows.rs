//! Context windows of well-known models: how many tokens (prompt and answer together) a
//! model accepts. The harness measures every prompt against its model's window
//! ([`crate::Provider::context_window`]); configuration overrides this table
//! (`[llm] context_window`, `[llm.context_windows]`).

/// Known windows by model-name prefix, longest prefixes first where they overlap. Names are
/// compared in lower case, ignoring a leading `provider/` (`openai/gpt-4o` on a router).
const WINDOWS: &[(&str, u64)] = &[
    // OpenAI.
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1-mini", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    // Anthropic.
    ("claude", 200_000),
    // Local models of the `local` provider and common open models.
    ("smollm2", 8_192),
    ("gemma-3", 32_768),
    ("gemma3", 32_768),
    ("qwen2.5", 32_768),
];

/// The context window of `model`, when the table knows it.
pub fn known_context_window(model: &str) -> Option<u64> {
    let lower = model.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    WINDOWS
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, window)| *window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_matching_prefix_wins_and_routers_prefixes_are_ignored() {
        assert_eq!(known_context_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(known_context_window("gpt-4"), Some(8_192));
        assert_eq!(
            known_context_window("gpt-4-turbo-2024-04-09"),
            Some(128_000)
        );
        assert_eq!(known_context_window("gpt-4.1-mini"), Some(1_047_576));
        assert_eq!(known_context_window("openai/GPT-4o"), Some(128_000));
        assert_eq!(known_context_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(known_context_window("o1-mini"), Some(128_000));
        assert_eq!(known_context_window("llama3.2"), None);
    }
}
