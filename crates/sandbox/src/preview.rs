//! Previews for permission requests: what a write would change, as a unified diff.

use std::io::Read;

use similar::TextDiff;

use crate::ConfinedPath;

/// Largest file read for a preview; a bigger one is described, not diffed.
pub const MAX_PREVIEW_FILE_BYTES: u64 = 1024 * 1024;
/// Most lines of diff shown; the rest are counted.
pub const MAX_PREVIEW_LINES: usize = 200;

/// The unified diff (3 lines of context) from `old` to `new` of the file shown as `name`, at
/// most [`MAX_PREVIEW_LINES`] lines, or a note when nothing changes.
pub fn file_diff(name: &str, old: &str, new: &str) -> String {
    if old == new {
        return format!("{name}: no change");
    }
    let diff = TextDiff::from_lines(old, new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= MAX_PREVIEW_LINES {
        return text;
    }
    let mut cut = lines[..MAX_PREVIEW_LINES].join("\n");
    cut.push_str(&format!(
        "\n… {} more lines of diff",
        lines.len() - MAX_PREVIEW_LINES
    ));
    cut
}

/// The current text of `path` for a preview: empty when it does not exist yet, `None` when
/// it cannot be shown (not UTF-8, too large, unreadable). Reads through the root's handle.
pub fn current_text(path: &ConfinedPath) -> Option<String> {
    let Ok(mut file) = path.open_read() else {
        // A new file (or one the write would create): everything is added.
        return path.info().is_err().then(String::new);
    };
    let size = file.metadata().ok()?.len();
    if size > MAX_PREVIEW_FILE_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_has_headers_context_and_a_cap() {
        let d = file_diff("notes.md", "a\nb\nc\n", "a\nB\nc\nd\n");
        assert!(d.starts_with("--- a/notes.md\n+++ b/notes.md\n@@"), "{d}");
        assert!(d.contains("-b\n+B\n") && d.contains("+d"), "{d}");
        assert_eq!(file_diff("x", "same", "same"), "x: no change");
        let big: String = (0..500).map(|i| format!("{i}\n")).collect();
        let d = file_diff("big", "", &big);
        assert!(d.ends_with("more lines of diff"), "{d}");
        assert!(d.lines().count() <= MAX_PREVIEW_LINES + 1);
    }
}
