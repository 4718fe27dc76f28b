//! Cutting text to a number of characters: the one cut every clipped display, summary and
//! excerpt of the workspace uses (the sandbox, the run's events, the knowledge base, the
//! command line). Here, in the leaf crate, so that each of them reuses it.

/// Where the character after the first `max` characters of `text` starts, or `None` when
/// `text` has no more than `max` characters: the cut of every clipped display and summary.
/// `max` ASCII bytes (the usual case, checked many bytes at a time) are `max` characters;
/// only other text is counted character by character.
pub fn char_cut(text: &str, max: usize) -> Option<usize> {
    if text.len() <= max {
        // No more bytes than `max`: no more characters either.
        return None;
    }
    match text.as_bytes().get(..max) {
        Some(head) if head.is_ascii() => Some(max),
        _ => text.char_indices().nth(max).map(|(i, _)| i),
    }
}

/// `text` cut to at most `max` characters, with `…` where it was cut ([`char_cut`]).
pub fn truncate_chars(text: &str, max: usize) -> String {
    match char_cut(text, max) {
        Some(cut) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The cut is where counting characters puts it, for ASCII heads (taken by their
        /// bytes) and any other text alike.
        #[test]
        fn char_cut_is_where_the_character_after_the_first_max_starts(
            text in "[a-c\\né€😀]{0,12}",
            max in 0usize..14,
        ) {
            let counted = text.char_indices().nth(max).map(|(i, _)| i);
            prop_assert_eq!(char_cut(&text, max), counted);
        }
    }

    #[test]
    fn char_cut_of_an_ascii_head_and_of_a_wide_character_at_the_limit() {
        assert_eq!(char_cut("abc", 3), None);
        assert_eq!(char_cut("abcd", 3), Some(3));
        assert_eq!(char_cut("abcé", 3), Some(3));
        // The third character is wide: its bytes are not all within the first three.
        assert_eq!(char_cut("abéd", 3), Some(4));
        assert_eq!(char_cut("abé", 3), None);
        assert_eq!(char_cut("", 0), None);
        assert_eq!(char_cut("a", 0), Some(0));
        // The clip built on it marks the cut, and leaves a text that fits as it is.
        assert_eq!(truncate_chars("abcdef", 3), "abc…");
        assert_eq!(truncate_chars("abéd", 3), "abé…");
        assert_eq!(truncate_chars("abc", 3), "abc");
    }
}
