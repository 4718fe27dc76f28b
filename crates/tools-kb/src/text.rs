//! Text helpers shared by the pipeline, the tools and the remote sources.

/// Cut a text to at most `n` characters, marking the cut: the sandbox's, shared with every
/// other clip of a text.
pub use lsm_sandbox::truncate_chars;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate_chars("abcdef", 3), "abc…");
        assert_eq!(truncate_chars("abc", 3), "abc");
    }
}
