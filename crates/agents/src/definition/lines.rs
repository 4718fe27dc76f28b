//! Byte offsets to line numbers: a definition's messages name the line of the file, and the
//! front matter starts below the opening `+++`.

/// The front matter of a definition file and where it stands.
#[derive(Debug, Clone, Copy)]
pub(super) struct FrontMatter<'a> {
    /// The TOML text between the two delimiter lines.
    pub toml: &'a str,
    /// The file line of the TOML's first line (1-based).
    pub first_line: usize,
    /// The body after the closing delimiter (the system prompt).
    pub body: &'a str,
}

/// The delimiter lines a front matter may use: `+++` (TOML, as Hugo and Zola write it) or
/// `---` (with TOML inside, for editors that only know that fence).
const FENCES: [&str; 2] = ["+++", "---"];

/// Why a file's front matter cannot be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum FenceError {
    /// The first line is not a fence.
    #[error(
        "an agent definition starts with a line `+++`, then its TOML front matter (name, description, tools, …), then a line `+++`, then the system prompt"
    )]
    NoOpening,
    /// The front matter's closing fence is missing.
    #[error(
        "the front matter opened by `{fence}` on line 1 is never closed: add a line `{fence}` after it, before the system prompt"
    )]
    NotClosed {
        /// The opening fence (`+++` or `---`).
        fence: String,
    },
}

/// Split `text` into front matter and body, or say why it cannot be.
pub(super) fn split(text: &str) -> Result<FrontMatter<'_>, FenceError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first_end = text.find('\n').unwrap_or(text.len());
    let fence = text[..first_end].trim_end();
    if !FENCES.contains(&fence) {
        return Err(FenceError::NoOpening);
    }
    let rest_start = (first_end + 1).min(text.len());
    let rest = &text[rest_start..];
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == fence {
            return Ok(FrontMatter {
                toml: &rest[..offset],
                first_line: 2,
                body: &rest[offset + line.len()..],
            });
        }
        offset += line.len();
    }
    Err(FenceError::NotClosed {
        fence: fence.to_string(),
    })
}

/// The file line of byte `offset` of the front matter's TOML.
pub(super) fn line_of(front: &FrontMatter<'_>, offset: usize) -> usize {
    let upto = offset.min(front.toml.len());
    front.first_line
        + front.toml.as_bytes()[..upto]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
}

/// The file line of byte `offset` of a string value whose literal starts at TOML byte
/// `literal_start`: its first line, plus the line breaks in the value before `offset` (plus
/// one when a multi-line literal opens with a line break, which TOML drops).
pub(super) fn line_in_value(
    front: &FrontMatter<'_>,
    literal_start: usize,
    value: &str,
    offset: usize,
) -> usize {
    let literal = &front.toml[literal_start.min(front.toml.len())..];
    let opens_with_break = ["\"\"\"\n", "'''\n", "\"\"\"\r\n", "'''\r\n"]
        .iter()
        .any(|open| literal.starts_with(open));
    let breaks = value.as_bytes()[..offset.min(value.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    line_of(front, literal_start) + breaks + usize::from(opens_with_break)
}
