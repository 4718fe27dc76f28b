//! Text shown to a person: one line, cut to fit.

/// `s` on one line (newlines become spaces), at most `max` characters, with `…` where it
/// was cut.
pub fn clip(s: &str, max: usize) -> String {
    // Only the part shown is looked at and copied: a model's answer may be long.
    // No more bytes than `max`: no more characters either, nothing to count.
    let cut = if s.len() > max {
        s.char_indices().nth(max).map(|(i, _)| i)
    } else {
        None
    };
    let mut out = s[..cut.unwrap_or(s.len())].replace('\n', " ");
    if cut.is_some() {
        out.push('…');
    }
    out
}

/// `value` as one line of JSON, clipped as [`clip`] does; serialized no further than the
/// clip shows (a `write_file` call's arguments hold the whole file).
pub fn clip_json(value: &serde_json::Value, max: usize) -> String {
    // `max` characters take at most `4 * max` bytes; one more character tells that it was
    // cut.
    let mut head = Bounded {
        bytes: Vec::new(),
        room: 4 * max + 4,
    };
    // Stops with an error once the room is used up: the head is all that is wanted.
    let _ = serde_json::to_writer(&mut head, value);
    let text = match std::str::from_utf8(&head.bytes) {
        Ok(text) => text,
        // Cut inside a character: keep the whole ones before it.
        Err(e) => std::str::from_utf8(&head.bytes[..e.valid_up_to()]).unwrap_or_default(),
    };
    clip(text, max)
}

/// A writer that keeps the first `room` bytes and refuses the rest.
struct Bounded {
    bytes: Vec<u8>,
    room: usize,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let left = self.room - self.bytes.len();
        if left == 0 {
            return Err(std::io::Error::other("enough of the value for its clip"));
        }
        let taken = buf.len().min(left);
        self.bytes.extend_from_slice(&buf[..taken]);
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_one_line_and_marks_the_cut() {
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("héllo wörld", 5), "héllo…");
        assert_eq!(clip("12345", 5), "12345");
        assert_eq!(clip("123456", 5), "12345…");
        assert_eq!(clip("", 5), "");
        assert_eq!(clip("abc", 0), "…");
    }

    #[test]
    fn clip_json_shows_what_clipping_the_whole_serialization_shows() {
        let long = "é".repeat(500);
        let values = [
            serde_json::json!({"path": "a.md"}),
            serde_json::json!({"path": "a.md", "content": long}),
            serde_json::json!({"content": "line one\nline \"two\"", "n": [1, 2.5, null]}),
            serde_json::json!("ü".repeat(161)),
            serde_json::json!("x".repeat(160)),
            serde_json::json!(null),
        ];
        for value in &values {
            for max in [0, 1, 5, 40, 158, 160, 161, 2000] {
                assert_eq!(
                    clip_json(value, max),
                    clip(&value.to_string(), max),
                    "{value} at {max}"
                );
            }
        }
    }
}
