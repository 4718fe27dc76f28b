//! Text shown to a person: one line, cut to fit, and nothing a terminal would obey.
//!
//! What is shown comes from models and tools, so from anyone who can put words in a file the
//! agent reads. A terminal acts on some characters instead of showing them: ESC begins the
//! sequences that clear the screen, move the cursor, retitle the window or (OSC 52) write
//! the clipboard; a carriage return goes back over the line; the bidirectional overrides
//! show text in another order than it is. Those are replaced before anything is printed.

use std::borrow::Cow;

/// Shown instead of a character the terminal would act on.
const STAND_IN: char = '\u{FFFD}';

/// Whether a terminal would act on `c` instead of just showing it: a control character
/// (C0, DEL, C1) or a bidirectional embedding, override or isolate.
fn acts_on_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Whether every byte of `s` is printable ASCII (U+0020 to U+007E), or one of the `kept`
/// bytes (at most two): such text holds nothing a terminal acts on and nothing a one-line
/// display changes. The usual case, told 32 bytes at a time (a test without a branch the
/// compiler turns into vector compares) before any character is decoded: progress lines
/// run this for every call a model makes.
fn printable_ascii(s: &str, kept: &[u8]) -> bool {
    // A space stands for no kept byte: it is printable anyway.
    let (k0, k1) = match *kept {
        [] => (b' ', b' '),
        [k] => (k, k),
        [k0, k1] => (k0, k1),
        _ => {
            return s
                .bytes()
                .all(|b| matches!(b, 0x20..=0x7e) || kept.contains(&b));
        }
    };
    let shown = |b: u8| (b.wrapping_sub(0x20) < 0x5f) | (b == k0) | (b == k1);
    let mut chunks = s.as_bytes().chunks_exact(32);
    for chunk in &mut chunks {
        if !chunk.iter().fold(true, |all, &b| all & shown(b)) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| shown(b))
}

/// `s` on one line (line breaks and tabs become spaces, anything else a terminal would act
/// on becomes `�`), at most `max` characters, with `…` where it was cut.
pub fn clip(s: &str, max: usize) -> String {
    let mut out = String::new();
    clip_into(&mut out, s, max);
    out
}

/// [`clip`] appended to `out`: a progress line is written in place, part by part.
pub fn clip_into(out: &mut String, s: &str, max: usize) {
    // Only the part shown is looked at and copied: a model's answer may be long.
    let cut = lsm_sandbox::char_cut(s, max);
    let head = &s[..cut.unwrap_or(s.len())];
    out.reserve(head.len() + '…'.len_utf8());
    if printable_ascii(head, &[]) {
        out.push_str(head);
    } else if head.is_ascii() {
        // A file's text with its line breaks, the usual case after plain text: each byte is
        // a character, so no character is decoded.
        for b in head.bytes() {
            out.push(on_one_line(char::from(b)));
        }
    } else {
        out.extend(head.chars().map(on_one_line));
    }
    if cut.is_some() {
        out.push('…');
    }
}

/// `line` as [`clip`] shows it, whole: for a line assembled from parts, some of which (a
/// tool's name, a server's reason) were not clipped. Returned as it is when nothing changes.
pub fn one_line(mut line: String) -> String {
    one_line_from(&mut line, 0);
    line
}

/// [`one_line`] for the part of `line` from byte `start` on: a line appended to a buffer is
/// cleaned where it stands. A `start` that is not a character's start (or past the end)
/// cleans the whole of `line`: never less than asked.
pub fn one_line_from(line: &mut String, start: usize) {
    let start = if line.is_char_boundary(start) {
        start
    } else {
        0
    };
    let tail = &line[start..];
    // Only from the first byte that is not printable ASCII on can a character change (a
    // progress line is ASCII but for the `…` a clip ends with): the characters are decoded
    // from there, not from the start.
    let Some(from) = tail.bytes().position(|b| !matches!(b, 0x20..=0x7e)) else {
        return;
    };
    if tail[from..].chars().all(|c| on_one_line(c) == c) {
        return;
    }
    let cleaned: String = tail.chars().map(on_one_line).collect();
    line.truncate(start);
    line.push_str(&cleaned);
}

/// Text from outside (a model's file name, a server's note, a path under the project's
/// folder) as a one-line display shows it: secrets masked, then [`one_line`].
pub fn masked_line(text: &str) -> String {
    one_line(lsm_app::secrets::clean(text).into_owned())
}

/// `c` on a line of its own: line breaks and tabs as a space, anything else a terminal would
/// act on as `�`.
fn on_one_line(c: char) -> char {
    match c {
        '\n' | '\r' | '\t' => ' ',
        c if acts_on_terminal(c) => STAND_IN,
        c => c,
    }
}

/// `s` for stdout: as [`terminal_text`] shows it when stdout is a terminal; as it is into a
/// file or a pipe (an answer saved with `>` keeps every character the model wrote).
pub fn for_stdout(s: &str) -> Cow<'_, str> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        terminal_text(s)
    } else {
        Cow::Borrowed(s)
    }
}

/// `s` as streamed to a terminal: its lines and tabs kept, carriage returns dropped (a `\r\n`
/// is a line break; a lone `\r` would go back over the line), anything else a terminal would
/// act on replaced by `�`. Borrowed when there is nothing to replace, the usual case.
pub fn terminal_text(s: &str) -> Cow<'_, str> {
    let kept = |c: char| matches!(c, '\n' | '\t') || !acts_on_terminal(c);
    if printable_ascii(s, b"\n\t") || s.chars().all(kept) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .filter(|&c| c != '\r')
            .map(|c| if kept(c) { c } else { STAND_IN })
            .collect(),
    )
}

/// JSON text for stdout, pretty-printed or not: every character a terminal would act on
/// but its line breaks written as its `\uXXXX` escape. JSON escapes control characters
/// below U+0020 itself, but leaves DEL, the C1 controls and the bidirectional overrides in a
/// string as they are, and those reach a terminal from a model's answer. Lossless: a JSON
/// parser reads the same value. Borrowed when there is nothing to escape, the usual case.
pub fn json_out(json: &str) -> Cow<'_, str> {
    escaped_json(json, true)
}

/// One line of JSON for stdout (a stream's line, a journal's line): as [`json_out`], its
/// line breaks escaped too, so that a line stored by someone else (a row of a shared
/// database) can neither drive the terminal nor forge the next line.
pub fn json_line(json: &str) -> Cow<'_, str> {
    escaped_json(json, false)
}

fn escaped_json(json: &str, keep_line_breaks: bool) -> Cow<'_, str> {
    use std::fmt::Write as _;
    let escape = |c: char| acts_on_terminal(c) && !(keep_line_breaks && c == '\n');
    let line_breaks: &[u8] = if keep_line_breaks { b"\n" } else { &[] };
    if printable_ascii(json, line_breaks) || !json.chars().any(escape) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if escape(c) {
            // Every such character is in the Basic Multilingual Plane: one escape each.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `value` as one line of JSON, clipped as [`clip`] does, appended to `out`; serialized no
/// further than the clip shows (a `write_file` call's arguments hold the whole file).
pub fn clip_json_into(out: &mut String, value: &serde_json::Value, max: usize) {
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
    clip_into(out, text, max);
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

    /// Every string of up to three characters from printable ASCII, its edges, and each kind
    /// of character a display changes; and a long printable one around each of those.
    fn samples() -> Vec<String> {
        let alphabet = [
            'a', ' ', '~', '\n', '\t', '\r', '\u{1f}', '\u{7f}', '\u{85}', '\u{202e}', 'é',
            '\u{1b}',
        ];
        let mut out = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..3 {
            last = last
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            out.extend(last.iter().cloned());
        }
        let long = "Some notes of a small project. ".repeat(4);
        out.extend(alphabet.iter().map(|c| format!("{long}{c}{long}")));
        out.push(long);
        out
    }

    #[test]
    fn the_printable_ascii_shortcut_shows_what_the_character_rule_shows() {
        let escaped = |s: &str, keep: bool| -> String {
            s.chars()
                .map(|c| {
                    if acts_on_terminal(c) && !(keep && c == '\n') {
                        format!("\\u{:04x}", u32::from(c))
                    } else {
                        c.to_string()
                    }
                })
                .collect()
        };
        for s in samples() {
            let line: String = s.chars().map(on_one_line).collect();
            // 124 and 125: the cut just before and just after the character that follows the
            // first `long` (ASCII up to it, counted from it on).
            for max in [0, 1, 2, 5, 124, 125, 200] {
                let head: String = line.chars().take(max).collect();
                let cut = s.chars().count() > max;
                let expected = if cut { format!("{head}…") } else { head };
                assert_eq!(clip(&s, max), expected, "clip({s:?}, {max})");
            }
            assert_eq!(one_line(s.clone()), line, "one_line({s:?})");
            let streamed: String = s
                .chars()
                .filter(|&c| c != '\r')
                .map(|c| {
                    if matches!(c, '\n' | '\t') || !acts_on_terminal(c) {
                        c
                    } else {
                        STAND_IN
                    }
                })
                .collect();
            assert_eq!(terminal_text(&s), streamed, "terminal_text({s:?})");
            assert_eq!(json_out(&s), escaped(&s, true), "json_out({s:?})");
            assert_eq!(json_line(&s), escaped(&s, false), "json_line({s:?})");
        }
    }

    #[test]
    fn json_for_stdout_escapes_what_a_terminal_acts_on_and_means_the_same() {
        let value = serde_json::json!({
            "text": "abc\u{202e}def \u{1b}[2J \u{9b}31m \u{7f} \u{2066}x\nnext",
            "plain": "café ünïcode",
        });
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let shown = json_out(&pretty);
        assert!(
            !shown.chars().any(|c| acts_on_terminal(c) && c != '\n'),
            "{shown:?}"
        );
        assert!(
            shown.contains("\\u202e") && shown.contains("\\u009b"),
            "{shown}"
        );
        assert!(shown.contains('\n'), "pretty-printing keeps its lines");
        let read: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(read, value, "the same value");

        // A stored line that is not JSON: no control character, no second line.
        let line = json_line("{\"a\":1}\u{1b}]0;x\u{7}\nforged");
        assert!(!line.chars().any(acts_on_terminal), "{line:?}");
        assert!(!line.contains('\n'), "{line:?}");

        // Nothing to escape: nothing copied.
        let clean = serde_json::to_string(&serde_json::json!({"a": "b"})).unwrap();
        assert!(matches!(json_out(&clean), Cow::Borrowed(_)));
        assert!(matches!(json_line(&clean), Cow::Borrowed(_)));
    }

    #[test]
    fn a_masked_line_hides_a_key_and_everything_a_terminal_acts_on() {
        let shown = masked_line("failed: sk-abcdefghijklmnop1234\u{1b}[2J\nnext");
        assert!(!shown.contains("sk-abcdefghijklmnop1234"), "{shown}");
        assert!(shown.contains("[REDACTED]"), "{shown}");
        assert!(shown.ends_with("\u{fffd}[2J next"), "{shown:?}");
    }

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
    fn nothing_a_terminal_acts_on_is_shown() {
        // Clear the screen, retitle the window, write the clipboard (OSC 52), the C1 form of
        // ESC [, a carriage return over the line, a right-to-left override.
        let hostile = "a\x1b[2Jb\x1b]0;owned\x07c\x1b]52;c;ZXZpbA==\x07d\u{9b}31me\rf\u{202E}g\x7f";
        assert_eq!(
            clip(hostile, 200),
            "a�[2Jb�]0;owned�c�]52;c;ZXZpbA==�d�31me f�g�"
        );
        assert_eq!(
            terminal_text("one\r\ntwo\tthree\n\x1b[1A\u{2067}four"),
            "one\ntwo\tthree\n�[1A�four"
        );
        assert_eq!(clip("tab\there", 20), "tab here");
        assert_eq!(one_line(hostile.to_string()), clip(hostile, 200));
        assert_eq!(one_line("as it is".to_string()), "as it is");
        // Plain text, accents and emoji included, is passed through as it is.
        for plain in ["", "héllo wörld", "line\nnext\tcol", "日本語 🚀"] {
            assert!(
                matches!(terminal_text(plain), Cow::Borrowed(_)),
                "{plain:?}"
            );
        }
        for s in [hostile, "one\r\ntwo", "\u{202A}x\u{2069}"] {
            assert!(!clip(s, 200).chars().any(acts_on_terminal), "{s:?}");
            assert!(
                !terminal_text(s)
                    .chars()
                    .any(|c| c != '\n' && c != '\t' && acts_on_terminal(c)),
                "{s:?}"
            );
        }
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
                let mut clipped = String::from("before ");
                clip_json_into(&mut clipped, value, max);
                assert_eq!(
                    clipped,
                    format!("before {}", clip(&value.to_string(), max)),
                    "{value} at {max}"
                );
            }
        }
    }

    #[test]
    fn a_line_cleaned_from_a_bad_offset_is_cleaned_whole() {
        let mut line = "é\x1b[2J\nnext".to_string();
        one_line_from(&mut line, 1); // inside `é`
        assert_eq!(line, "é\u{fffd}[2J next");
        let mut line = "a\nb".to_string();
        one_line_from(&mut line, 99);
        assert_eq!(line, "a b");
    }

    /// [`clip`] as it was first written: every character of the part shown mapped by
    /// [`on_one_line`], then `…` where it was cut. The shortcuts must show the same.
    fn clip_by_characters(s: &str, max: usize) -> String {
        let cut = lsm_sandbox::char_cut(s, max);
        let mut out: String = s[..cut.unwrap_or(s.len())]
            .chars()
            .map(on_one_line)
            .collect();
        if cut.is_some() {
            out.push('…');
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        #[test]
        fn a_clip_appended_in_place_is_the_clip_by_characters(
            before in "[a-z ]{0,3}",
            text in proptest::prop_oneof![
                "[ -~\t\n\r\x00-\x1f\x7f]{0,200}",
                "[ -~\n\x1b\u{9b}\u{202e}é日🚀]{0,200}",
            ],
            max in 0usize..220,
        ) {
            let mut out = before.clone();
            clip_into(&mut out, &text, max);
            proptest::prop_assert_eq!(out, format!("{before}{}", clip_by_characters(&text, max)));
            let mut line = format!("{before}{text}");
            one_line_from(&mut line, before.len());
            proptest::prop_assert_eq!(line, format!("{before}{}", clip_by_characters(&text, usize::MAX)));
        }
    }
}
