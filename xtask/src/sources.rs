//! `cargo xtask check-sources`: every crate stays readable file by file.
//!
//! Two rules, over the `src/` folder of every workspace crate (and of xtask):
//!
//! - **Size.** No source file is over [`MAX_LINES`] lines, its inline code and tests alike: a
//!   long test module goes to a file of its own (`#[cfg(test)] mod tests;` beside the code).
//!   Test files — `tests.rs`, anything under a `tests/` folder, and `testing.rs` (the
//!   conformance suites a crate exports for other crates' tests) — are not counted.
//! - **No import circles.** Inside a crate, the top-level modules (`src/a.rs` or `src/a/`) form
//!   a graph: `a → b` when code of `a` outside its tests names `crate::b` (in a `use` line, a
//!   `crate::{b, c}` group or an inline path) or `super::b` from a top-level file. A circle
//!   (`a → b → … → a`) means none of them can be read, tested or moved alone; shared pieces
//!   belong in a module below all of them. Every circle is reported, each as one strongly
//!   connected group of modules.
//! - **Typed errors.** Outside their tests, library crates return no `Result<_, String>`: an
//!   error is a `thiserror` type whose variants say what went wrong and how to recover. The
//!   binary (`crates/cli`) and xtask, which may use `anyhow`, are exempt; no other crate
//!   under `crates/` has `anyhow` among its normal dependencies.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The most lines a non-test source file may have.
pub const MAX_LINES: usize = 600;

/// Module → the top-level modules of the same crate it names.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// One broken rule, printed as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A file over [`MAX_LINES`].
    TooLong { file: String, lines: usize },
    /// Top-level modules of a crate that import each other in a circle (sorted).
    Circle { src: String, modules: Vec<String> },
    /// A library function returning `Result<_, String>` (line numbers 1-based).
    StringError { file: String, line: usize },
    /// A library crate with `anyhow` among its normal dependencies.
    Anyhow { manifest: String },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::TooLong { file, lines } => write!(
                f,
                "{file}: {lines} lines, over the limit of {MAX_LINES}; split it along a seam into \
                 submodules, or move its tests into a file of their own"
            ),
            Finding::Circle { src, modules } => write!(
                f,
                "{src}: the modules {} import each other in a circle; move what they share \
                 into a module below them",
                modules.join(", ")
            ),
            Finding::Anyhow { manifest } => write!(
                f,
                "{manifest}: a library depends on anyhow; give its errors thiserror types (only \
                 the binary and xtask use anyhow)"
            ),
            Finding::StringError { file, line } => write!(
                f,
                "{file}:{line}: a library returns `Result<_, String>`; give the error a \
                 thiserror type whose variants say what went wrong and what to do"
            ),
        }
    }
}

/// Whether `rel` (relative to a `src/` folder) is a test file, not counted by the size rule
/// and not part of the import graph.
pub fn is_test_file(rel: &Path) -> bool {
    rel.components().any(|c| c.as_os_str() == "tests")
        || rel
            .file_name()
            .is_some_and(|n| n == "tests.rs" || n == "testing.rs")
}

/// The part of a file before its trailing test module.
pub fn without_tests(text: &str) -> &str {
    ["#[cfg(test)]\nmod tests", "#[cfg(test)]\r\nmod tests"]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .map_or(text, |at| &text[..at])
}

/// The lines of `text` that count against [`MAX_LINES`]: all of them.
pub fn counted_lines(text: &str) -> usize {
    text.lines().count()
}

/// The `src/` folders whose crates may return `Result<_, String>`: the binary and xtask.
const STRING_ERRORS_ALLOWED: &[&str] = &["crates/cli/src", "xtask/src"];

/// The 1-based lines of `text` (its test module aside) with a `Result<_, String>`.
pub fn string_error_lines(text: &str) -> Vec<usize> {
    let code = without_tests(text);
    let mut lines = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("Result<") {
        let start = from + found;
        from = start + "Result<".len();
        let preceded_by_ident = code[..start]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if preceded_by_ident {
            continue;
        }
        // The last top-level argument of the generic list.
        let mut depth = 0usize;
        let mut last_arg_start = from;
        let mut end = None;
        for (i, c) in code[from..].char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' if depth > 0 => depth -= 1,
                '>' => {
                    end = Some(from + i);
                    break;
                }
                ',' if depth == 0 => last_arg_start = from + i + 1,
                _ => {}
            }
        }
        let Some(end) = end else { continue };
        let line_start = code[..start].rfind('\n').map_or(0, |n| n + 1);
        let is_comment = code[line_start..start].trim_start().starts_with("//");
        if last_arg_start > from && code[last_arg_start..end].trim() == "String" && !is_comment {
            lines.push(code[..start].matches('\n').count() + 1);
        }
    }
    lines
}

/// The module path of a file under `src/` (`a/b.rs` → `[a, b]`, `a/mod.rs` → `[a]`), or
/// `None` for the crate root.
fn module_path(rel: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.trim_end_matches(".rs").to_owned();
    if stem != "mod" {
        parts.push(stem);
    }
    if parts.is_empty() || (parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main")) {
        return None;
    }
    Some(parts)
}

/// The identifier at the start of `text`.
fn ident(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The first identifier of each top-level item of a `{a::x, b::{c, d}, e}` group (`text`
/// starts right after the opening brace).
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut at_item_start = true;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_item_start = true,
            c if at_item_start && !c.is_whitespace() => {
                at_item_start = false;
                let name = ident(&text[i..]);
                if !name.is_empty() {
                    heads.push(name);
                }
            }
            _ => {}
        }
    }
    heads
}

/// Every top-level module named by code of the module at `path` (its tests and comments
/// aside): through `crate::` anywhere, and through `super::` where it leaves the top level.
pub fn named_modules(text: &str, path: &[String]) -> BTreeSet<String> {
    let code: String = without_tests(text)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut found = BTreeSet::new();
    let mut add = |rest: &str| {
        if let Some(group) = rest.strip_prefix('{') {
            found.extend(group_heads(group));
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                found.insert(name);
            }
        }
    };
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let preceded_by_ident = code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':');
        if !preceded_by_ident && rest.starts_with("crate::") {
            add(&rest["crate::".len()..]);
            at += "crate::".len();
            continue;
        }
        if !preceded_by_ident && rest.starts_with("super::") {
            // `super::` repeated n times from module a::b::c names a::b::c[..len-n]; when that
            // is the crate root, the next segment is a top-level module.
            let mut after = rest;
            let mut ups = 0;
            while let Some(next) = after.strip_prefix("super::") {
                ups += 1;
                after = next;
            }
            if ups >= path.len() {
                add(after);
            }
            at += rest.len() - after.len();
            continue;
        }
        at += rest.chars().next().map_or(1, char::len_utf8);
    }
    found
}

/// The names `lib.rs` re-exports from its modules (`pub use budget::{RunBudget, gate};`),
/// each with the module it comes from.
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let code: String = lib
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    for statement in code.split(';') {
        let Some(rest) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        let module = module.trim();
        let items = match items.split_once('{') {
            Some((_, group)) => group.trim_end().trim_end_matches('}'),
            None => items,
        };
        for item in items.split(',') {
            let item = item.split(" as ").last().unwrap_or(item);
            let name = item.rsplit("::").next().unwrap_or(item).trim();
            if !name.is_empty() {
                out.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    out
}

/// Every `.rs` file under `dir`, sorted.
///
/// # Errors
/// A folder that cannot be listed.
pub fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        let entries =
            std::fs::read_dir(&at).with_context(|| format!("cannot list {}", at.display()))?;
        for entry in entries {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The import graph of the top-level modules of one `src/` folder, and the files in it over
/// the size limit or with a `Result<_, String>` (named relative to `root`).
pub fn scan(root: &Path, src: &Path) -> Result<(Graph, Vec<Finding>)> {
    let files = rust_files(src)?;
    let mut graph = Graph::new();
    let mut long = Vec::new();
    // A name the crate root re-exports (`crate::RunState`) counts as the module it comes from.
    let exports = ["lib.rs", "main.rs"]
        .iter()
        .filter_map(|root_file| std::fs::read_to_string(src.join(root_file)).ok())
        .map(|text| root_exports(&text))
        .fold(BTreeMap::new(), |mut all, more| {
            all.extend(more);
            all
        });
    for file in files {
        let rel = file.strip_prefix(src).unwrap_or(&file);
        if is_test_file(rel) {
            continue;
        }
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let lines = counted_lines(&text);
        if lines > MAX_LINES {
            let shown = file.strip_prefix(root).unwrap_or(&file);
            long.push(Finding::TooLong {
                file: shown.display().to_string(),
                lines,
            });
        }
        let shown_src = src.strip_prefix(root).unwrap_or(src);
        if !STRING_ERRORS_ALLOWED
            .iter()
            .any(|allowed| shown_src == Path::new(allowed))
        {
            let shown = file.strip_prefix(root).unwrap_or(&file);
            for line in string_error_lines(&text) {
                long.push(Finding::StringError {
                    file: shown.display().to_string(),
                    line,
                });
            }
        }
        let Some(path) = module_path(rel) else {
            continue;
        };
        let top = path[0].clone();
        let edges = graph.entry(top.clone()).or_default();
        for named in named_modules(&text, &path) {
            let named = exports.get(&named).cloned().unwrap_or(named);
            if named != top {
                edges.insert(named);
            }
        }
    }
    // Names that are not modules of this crate (a `crate::SomeType` re-exported by the
    // root, a macro) are not edges between modules.
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for edges in graph.values_mut() {
        edges.retain(|to| modules.contains(to));
    }
    Ok((graph, long))
}

/// Every group of modules of `graph` that import each other in a circle (the strongly
/// connected components with more than one module), each sorted.
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
    // Two modules are in one circle when each reaches the other.
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(node) = todo.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|node| (node, reach(node))).collect();
    let mut placed = BTreeSet::new();
    let mut groups = Vec::new();
    for node in graph.keys() {
        if placed.contains(node) || !reaches[node].contains(node) {
            continue;
        }
        let group: Vec<String> = reaches[node]
            .iter()
            .filter(|other| reaches.get(other).is_some_and(|r| r.contains(node)))
            .cloned()
            .collect();
        placed.extend(group.iter().cloned());
        if group.len() > 1 {
            groups.push(group);
        }
    }
    groups
}

/// Whether the manifest `text` names `anyhow` in its `[dependencies]` table.
pub fn depends_on_anyhow(text: &str) -> bool {
    let mut in_dependencies = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies
            && (line.starts_with("anyhow ")
                || line.starts_with("anyhow.")
                || line.starts_with("anyhow="))
        {
            return true;
        }
    }
    false
}

/// The `src/` folders checked: every crate under `crates/`, xtask and the library examples.
fn source_folders(root: &Path) -> Result<Vec<PathBuf>> {
    let mut folders = Vec::new();
    let crates = root.join("crates");
    for entry in
        std::fs::read_dir(&crates).with_context(|| format!("cannot list {}", crates.display()))?
    {
        let src = entry?.path().join("src");
        if src.is_dir() {
            folders.push(src);
        }
    }
    for extra in ["xtask/src", "examples/library/src"] {
        let src = root.join(extra);
        if src.is_dir() {
            folders.push(src);
        }
    }
    folders.sort();
    Ok(folders)
}

/// Every finding over the workspace at `root`.
///
/// # Errors
/// A folder or file that cannot be read.
pub fn findings(root: &Path) -> Result<Vec<Finding>> {
    let mut out = Vec::new();
    for src in source_folders(root)? {
        let shown_src = src.strip_prefix(root).unwrap_or(&src).to_path_buf();
        let is_library = shown_src.starts_with("crates")
            && !STRING_ERRORS_ALLOWED
                .iter()
                .any(|allowed| shown_src == Path::new(allowed));
        if let Some(crate_dir) = src.parent().filter(|_| is_library) {
            let manifest = crate_dir.join("Cargo.toml");
            if let Ok(text) = std::fs::read_to_string(&manifest)
                && depends_on_anyhow(&text)
            {
                let shown = manifest.strip_prefix(root).unwrap_or(&manifest);
                out.push(Finding::Anyhow {
                    manifest: shown.display().to_string(),
                });
            }
        }
        let (graph, long) = scan(root, &src)?;
        out.extend(long);
        let shown = src.strip_prefix(root).unwrap_or(&src).display().to_string();
        for modules in circles(&graph) {
            out.push(Finding::Circle {
                src: shown.clone(),
                modules,
            });
        }
    }
    Ok(out)
}

/// Fail when a file is too long, modules import each other in a circle, or a library returns
/// `Result<_, String>` or depends on anyhow.
///
/// # Errors
/// Each finding, one a line.
pub fn check_sources(root: &Path) -> Result<()> {
    let found = findings(root)?;
    if found.is_empty() {
        eprintln!(
            "xtask: [sources] no file over {MAX_LINES} lines, no import circle between modules, \
             no Result<_, String> nor anyhow in a library"
        );
        return Ok(());
    }
    for finding in &found {
        eprintln!("xtask: [sources] {finding}");
    }
    bail!("{} source finding(s)", found.len())
}

#[cfg(test)]
mod tests;
