//! Text shown to a person: one line, cut to fit.

/// `s` on one line (newlines become spaces), at most `max` characters, with `…` where it
/// was cut.
pub fn clip(s: &str, max: usize) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_one_line_and_marks_the_cut() {
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("héllo wörld", 5), "héllo…");
        assert_eq!(clip("12345", 5), "12345");
    }
}
