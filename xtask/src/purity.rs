//! The source side of the layering: what a crate's code may name, read from its files.
//!
//! - Rule 7's sources: no file of `crates/run/src` names `std::fs`, `std::net`,
//!   `std::process`, `tokio` or `tokio_util`, or reads the clock (`Instant::now`,
//!   `SystemTime::now`, `Utc::now`), outside test code. The dependency graph keeps tokio out
//!   of the crate; this keeps the standard library's I/O out of it too.
//!   (Module circles, in every crate, are `check-sources`' business: `sources.rs`.)
//!
//! Test code is left out: a file named `tests.rs` or under a `tests/` folder, and every item
//! behind `#[cfg(test)]`. Comments are left out too (a doc comment may name anything).

use std::fmt;
use std::path::Path;

use anyhow::{Context, Result};

use crate::sources::{is_test_file, rust_files};

/// The crate whose sources must do no I/O, and where they are.
pub const PURE_SOURCES: &str = "crates/run/src";

/// What a pure crate's code must not name, and why.
const FORBIDDEN: &[(&str, &str)] = &[
    ("std::fs", "file system"),
    ("std::net", "network"),
    ("std::process", "processes"),
    ("tokio", "async runtime"),
    ("tokio_util", "async runtime"),
    ("Instant::now", "clock"),
    ("SystemTime::now", "clock"),
    ("Utc::now", "clock"),
];

/// One finding of the source checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `rule 7` or `module circle`.
    pub rule: &'static str,
    /// The whole explanation, without the label.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.rule, self.message)
    }
}

/// The code of `text`: its comments (doc comments included) removed and the contents of its
/// string and character literals blanked, line breaks kept (so line numbers stay the file's).
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    // Blank `chars[from..to]`, keeping its line breaks.
    let blank = |out: &mut String, from: usize, to: usize| {
        out.extend(
            chars[from..to.min(chars.len())]
                .iter()
                .filter(|c| **c == '\n'),
        );
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            '/' if next == Some('/') => {
                let end = (i..chars.len())
                    .find(|&j| chars[j] == '\n')
                    .unwrap_or(chars.len());
                i = end;
            }
            '/' if next == Some('*') => {
                let end = (i + 2..chars.len())
                    .find(|&j| chars[j - 1] == '*' && chars[j] == '/')
                    .map_or(chars.len(), |j| j + 1);
                blank(&mut out, i, end);
                i = end;
            }
            '"' => {
                // A raw string (`r"…"`, `r#"…"#`) ends at a quote followed by its hashes.
                let hashes = out.chars().rev().take_while(|c| *c == '#').count();
                let raw = out.chars().rev().nth(hashes) == Some('r');
                let mut j = i + 1;
                while j < chars.len() {
                    if !raw && chars[j] == '\\' {
                        j += 2;
                        continue;
                    }
                    if chars[j] == '"' && (j + 1..=j + hashes).all(|k| chars.get(k) == Some(&'#')) {
                        break;
                    }
                    j += 1;
                }
                out.push('"');
                blank(&mut out, i + 1, j);
                out.push('"');
                i = j + 1 + if raw { hashes } else { 0 };
                out.extend(std::iter::repeat_n('#', if raw { hashes } else { 0 }));
            }
            '\'' => {
                // A character literal (`'x'`, `'\n'`, `'\u{..}'`); otherwise a lifetime.
                let end = if next == Some('\\') {
                    (i + 2..chars.len()).find(|&j| chars[j] == '\'')
                } else if chars.get(i + 2) == Some(&'\'') {
                    Some(i + 2)
                } else {
                    None
                };
                match end {
                    Some(end) => {
                        out.push_str("' '");
                        i = end + 1;
                    }
                    None => {
                        out.push(c);
                        i += 1;
                    }
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// `code` (see [`code_only`]) with every item behind `#[cfg(test)]` blanked out: a `mod x;`
/// up to its `;`, anything else up to the end of its braced body. Line breaks are kept, so
/// line numbers stay those of the file.
fn without_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let end = item_end(item).unwrap_or(item.len());
        out.extend(item[..end].chars().filter(|c| *c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Where the item starting at the beginning of `item` ends: after the `;` that comes before
/// any `{`, or after the `}` that closes the first `{`.
fn item_end(item: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in item.char_indices() {
        match c {
            ';' if depth == 0 => return Some(i + 1),
            '{' => depth += 1,
            '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether `path` (such as `std::fs`, `tokio`, `Instant::now`) stands in `line` as a path of
/// its own: not inside a longer name on either side. `std::{fs, io}` names `std::fs` too.
fn names(line: &str, path: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let bounded = |text: &str, needle: &str| {
        text.match_indices(needle).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + needle.len()..].chars().next();
            !before.is_some_and(ident) && !after.is_some_and(ident)
        })
    };
    if bounded(line, path) {
        return true;
    }
    // `use std::{fs, io::Write}`: the group names each of its first segments.
    match path.split_once("::") {
        Some((head, tail)) if !tail.contains("::") => line
            .match_indices(&format!("{head}::{{"))
            .any(|(at, open)| {
                let group = &line[at + open.len()..];
                let group = group.split('}').next().unwrap_or(group);
                group.split(',').any(|item| {
                    let first = item.trim().split("::").next().unwrap_or("");
                    first == tail
                })
            }),
        _ => false,
    }
}

/// What the non-test code of `text` names that a pure crate must not: `(line, path, why)`.
fn forbidden_uses(text: &str) -> Vec<(usize, &'static str, &'static str)> {
    let code = without_test_items(&code_only(text));
    let mut found = Vec::new();
    for (i, line) in code.lines().enumerate() {
        for (path, why) in FORBIDDEN {
            if names(line, path) {
                found.push((i + 1, *path, *why));
            }
        }
    }
    found
}

/// Rule 7 over the files of `src` (shown relative to `root`).
pub fn check_pure(root: &Path, src: &Path) -> Result<Vec<Finding>> {
    let mut findings = Vec::new();
    for file in rust_files(src)? {
        let rel = file.strip_prefix(src).unwrap_or(&file);
        if is_test_file(rel) {
            continue;
        }
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        for (line, path, why) in forbidden_uses(&text) {
            findings.push(Finding {
                rule: "rule 7",
                message: format!(
                    "lsm-run does no I/O, but {}:{line} names `{path}` ({why}); the driver \
                     (lsm-harness) does that, the core takes what it learns as an input",
                    file.strip_prefix(root).unwrap_or(&file).display()
                ),
            });
        }
    }
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_and_clock_uses_are_found_with_their_line() {
        let text = "use std::fs::File;\n\
                    use std::{io, net::TcpStream};\n\
                    fn f() { let _ = tokio::spawn(async {}); }\n\
                    fn g() -> std::process::Command { todo() }\n\
                    fn h() { let _ = std::time::Instant::now(); }\n";
        let found: Vec<(usize, &str)> = forbidden_uses(text)
            .into_iter()
            .map(|(line, path, _)| (line, path))
            .collect();
        assert_eq!(
            found,
            [
                (1, "std::fs"),
                (2, "std::net"),
                (3, "tokio"),
                (4, "std::process"),
                (5, "Instant::now"),
            ]
        );
    }

    #[test]
    fn tests_comments_strings_and_longer_names_are_not_uses() {
        let text = "//! Never `std::fs`; see tokio.\n\
                    /* std::net */ fn fs_free() {}\n\
                    fn name() -> &'static str { \"std::process\" }\n\
                    fn my_tokio_like() {} fn std_fsck() {}\n\
                    #[cfg(test)]\n\
                    mod tests {\n    use std::fs;\n    fn t() { let _ = tokio::time::sleep; }\n}\n\
                    #[cfg(test)]\nmod more;\n\
                    fn after() {}\n";
        assert_eq!(forbidden_uses(text), Vec::new());
        // What follows a test item is checked again.
        let text = "#[cfg(test)]\nmod tests { }\nuse std::fs;\n";
        assert_eq!(forbidden_uses(text)[0].0, 3);
    }

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn an_offending_file_of_the_pure_crate_fails_rule_7_and_its_tests_do_not() {
        let dir = tree(&[
            ("src/lib.rs", "pub mod a;\npub mod b;\n"),
            (
                "src/a.rs",
                "pub fn load() { let _ = std::fs::read(\"x\"); }\n",
            ),
            ("src/b.rs", "pub fn pure() {}\n#[cfg(test)]\nmod tests;\n"),
            ("src/b/tests.rs", "use std::fs;\n"),
            ("src/a/tests/io.rs", "use tokio::fs;\n"),
        ]);
        let findings = check_pure(dir.path(), &dir.path().join("src")).unwrap();
        let lines: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].starts_with("rule 7: lsm-run does no I/O, but src/a.rs:1 names `std::fs`"),
            "{lines:#?}"
        );
    }

    #[test]
    fn the_pure_crate_passes_rule_7() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let findings = check_pure(root, &root.join(PURE_SOURCES)).unwrap();
        assert_eq!(findings, Vec::new());
    }
}
