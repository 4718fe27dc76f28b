//! Copying from the conversation: where a small model opens an argument's string value,
//! the candidates that begin a word of the task or of a tool's result are favoured.
//!
//! The values a file task passes to its tools are nearly always copied: a word of the task
//! ("Write the word hello …"), a line of a file it read. A 135M–500M model given the choice
//! between copying and writing its own prior ("Hello, World!", "Milk", the template's
//! `<tool_response>` tag) often takes the prior by a small margin. At the first token of an
//! argument's string value (nowhere else: not in the middle of a value, not in a free-text
//! answer), each of the most likely allowed tokens whose text begins a word of the copy
//! source gets [`super::LocalSettings::copy_bias`] added to its logit. Nothing is forced: a
//! value the source does not hold still wins when the model prefers it by more than the
//! bias, and the grammar still decides what is allowed.

use crate::{LlmRequest, Role};

/// How many of the most likely allowed tokens are looked at.
const CANDIDATES: usize = 16;

/// The text argument values are copied from: the user's messages and the tools' results,
/// never the system prompt, the protocol's example, or the chat template's tags.
#[derive(Debug, Clone, Default)]
pub struct CopySource {
    text: String,
}

impl CopySource {
    /// The user and tool messages of `request`, without the words that name files.
    pub fn of_request(request: &LlmRequest) -> Self {
        let mut text = String::new();
        for m in &request.messages {
            if matches!(m.role, Role::User | Role::Tool) {
                // Each piece is a word and the white space after it; a file's name is left
                // out, its white space kept.
                for piece in m.content.split_inclusive(char::is_whitespace) {
                    let word = piece.trim_end();
                    text.push_str(if names_a_file(word) {
                        &piece[word.len()..]
                    } else {
                        piece
                    });
                }
                text.push('\n');
            }
        }
        CopySource { text }
    }

    /// Whether `piece` occurs in the source where a word begins (at the start or after a
    /// character that is not a letter or digit), case-sensitively. A piece that opens with
    /// white space begins no word.
    pub fn begins_word(&self, piece: &str) -> bool {
        if piece.is_empty() || piece.starts_with(char::is_whitespace) {
            return false;
        }
        self.text.match_indices(piece).any(|(i, _)| {
            self.text[..i]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_alphanumeric())
        })
    }
}

/// Whether `word` (white space around it) looks like a file's name or path: a `/`, or a
/// `.` between a letter or digit and a letter (`hello.txt`, `notes.md`, but not `v1.2` or
/// a sentence's last word). A task's file names are what its paths are made of, never what
/// a file's content copies: "Append the line call Anna to todo.txt" must not favour `todo`
/// as the line. Paths themselves are offered as an enum when the task names them.
fn names_a_file(word: &str) -> bool {
    let word = word.trim_end_matches(|c: char| !c.is_alphanumeric());
    let b = word.as_bytes();
    word.contains('/')
        || b.windows(3)
            .any(|w| w[0].is_ascii_alphanumeric() && w[1] == b'.' && w[2].is_ascii_alphabetic())
}

/// Whether generated JSON `text` has just opened the string value of an argument: it ends
/// with `"` after `:`, and that member is directly inside the object of an `arguments` or
/// `action_arguments` key (a native call or a strict-JSON decision). Bytes before the first
/// `{` (a call token, a newline) are skipped.
pub fn at_argument_value(text: &[u8]) -> bool {
    let Some((&b'"', before)) = text.split_last() else {
        return false;
    };
    if before.trim_ascii_end().last() != Some(&b':') {
        return false;
    }
    let mut depth = 0usize;
    // Depths of the open objects that hold arguments.
    let mut arguments: Vec<usize> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut string_start = 0;
    let mut last_string: &[u8] = &[];
    let mut after_colon = false;
    for (i, &b) in before.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
                last_string = &before[string_start..i];
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                string_start = i + 1;
                after_colon = false;
            }
            b':' => after_colon = true,
            b'{' => {
                depth += 1;
                if after_colon && matches!(last_string, b"arguments" | b"action_arguments") {
                    arguments.push(depth);
                }
                after_colon = false;
            }
            b'}' => {
                if arguments.last() == Some(&depth) {
                    arguments.pop();
                }
                depth = depth.saturating_sub(1);
                after_colon = false;
            }
            b' ' | b'\n' | b'\r' | b'\t' => {}
            _ => after_colon = false,
        }
    }
    !in_string && arguments.last() == Some(&depth)
}

/// Add `bias` to the logit of each of the [`CANDIDATES`] most likely tokens `allowed` says
/// yes to whose text (`text_of`) begins a word of `source`.
pub fn favour_copies<'t>(
    logits: &mut [f32],
    allowed: &dyn Fn(u32) -> bool,
    text_of: &dyn Fn(u32) -> &'t [u8],
    source: &CopySource,
    bias: f32,
) {
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(CANDIDATES + 1);
    for (i, &l) in logits.iter().enumerate() {
        let Ok(t) = u32::try_from(i) else { break };
        if !l.is_finite() || (top.len() == CANDIDATES && l <= top[CANDIDATES - 1].1) {
            continue;
        }
        if !allowed(t) {
            continue;
        }
        let at = top.partition_point(|&(_, x)| x >= l);
        top.insert(at, (t, l));
        top.truncate(CANDIDATES);
    }
    for (t, _) in top {
        let copies = std::str::from_utf8(text_of(t)).is_ok_and(|piece| source.begins_word(piece));
        if copies && let Some(l) = usize::try_from(t).ok().and_then(|i| logits.get_mut(i)) {
            *l += bias;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Message;

    #[test]
    fn the_source_is_the_users_and_the_tools_words_at_word_starts() {
        let request = LlmRequest {
            messages: vec![
                Message::system("Answer Hello to everyone.").into(),
                Message::user("Write the word hello to hello.txt, then append to todo.txt.").into(),
                Message::tool_result("c1", "# Meeting notes\nThe quick fox, v1.2.\nsee\nnotes.md")
                    .into(),
            ],
            tools: Vec::new(),
            options: crate::CallOptions::default(),
        };
        let source = CopySource::of_request(&request);
        for piece in [
            "hello",
            "hel",
            "# Meeting",
            "#",
            "The",
            "quick",
            "v1.2",
            "append",
            "see",
        ] {
            assert!(source.begins_word(piece), "{piece}");
        }
        // The system prompt is not copied from; case matters; a piece inside a word, or
        // opening with a space, begins none; nor does a file's name.
        for piece in [
            "Hello", "ello", "eeting", " hello", "", "Milk", "todo", "txt",
        ] {
            assert!(!source.begins_word(piece), "{piece:?}");
        }
    }

    #[test]
    fn only_the_opening_of_an_arguments_string_value_counts() {
        let yes = [
            r#"{"action": "write_file", "action_arguments": {"path": "hello.txt", "content": ""#,
            r#"{"action": "append_file", "action_arguments": {"path": ""#,
            "\u{e000}\n{\"name\": \"write_file\", \"arguments\": {\"content\": \"",
            r#"{"name": "a", "arguments": {"x": {"y": 1}, "text":""#,
        ];
        for text in yes {
            assert!(at_argument_value(text.as_bytes()), "{text}");
        }
        let no = [
            // The tool's name, the decision's response, a nested object's member, the
            // middle of a value, a key, after the arguments closed.
            r#"{"action": ""#,
            r#"{"action": "w", "action_arguments": {"path": "a"}, "response": ""#,
            r#"{"name": "a", "arguments": {"x": {"y": ""#,
            r#"{"name": "a", "arguments": {"content": "he"#,
            r#"{"name": "a", "arguments": {""#,
            r#"{"name": "a", "arguments": {"content": "a:\""#,
            "",
        ];
        for text in no {
            assert!(!at_argument_value(text.as_bytes()), "{text}");
        }
    }

    #[test]
    fn a_copy_among_the_likely_tokens_is_favoured_and_nothing_else_moves() {
        let source = CopySource {
            text: "Write the word hello to hello.txt.\n".into(),
        };
        let texts: [&[u8]; 5] = [b"Hello", b"hello", b" hello", b"World", b"hel"];
        let mut logits = vec![5.0, 3.5, 4.0, 1.0, -20.0];
        let all = |_: u32| true;
        let text_of = |t: u32| texts[t as usize];
        favour_copies(&mut logits, &all, &text_of, &source, 2.0);
        assert_eq!(logits, [5.0, 5.5, 4.0, 1.0, -18.0]);
        // A token the grammar forbids is left alone.
        let mut logits = vec![5.0, 3.5, 4.0, 1.0, -20.0];
        let not_hello = |t: u32| t != 1;
        favour_copies(&mut logits, &not_hello, &text_of, &source, 2.0);
        assert_eq!(logits, [5.0, 3.5, 4.0, 1.0, -18.0]);
    }
}
