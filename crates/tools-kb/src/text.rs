//! Text helpers shared by the pipeline, the tools and the remote sources.

/// Cut `s` to at most `n` characters, marking the cut.
pub fn truncate_chars(s: &str, n: usize) -> String {
    match lsm_sandbox::char_cut(s, n) {
        Some(cut) => format!("{}…", &s[..cut]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate_chars("abcdef", 3), "abc…");
        assert_eq!(truncate_chars("abc", 3), "abc");
    }
}
