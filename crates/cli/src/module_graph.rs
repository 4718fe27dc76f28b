//! A check that the program's top-level modules import each other without a circle.
//!
//! A circle (`a` uses `b`, `b` uses `c`, `c` uses `a`) means none of them can be read, tested
//! or moved alone; shared helpers belong in a module below all of them (`exit`, `text`). The
//! graph is read from the sources: every `crate::<module>` path outside a file's tests,
//! in `use` lines and inline paths alike.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module → the top-level modules it names through `crate::`.
pub(crate) type Graph = BTreeMap<String, BTreeSet<String>>;

/// The top-level module a source file belongs to (`config/layers.rs` → `config`), or `None`
/// for the crate root and for test files.
fn owner(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    let first = parts.next()?;
    let is_test = rel
        .components()
        .any(|c| c.as_os_str() == "tests" || c.as_os_str() == "tests.rs");
    if is_test || first == "main.rs" {
        return None;
    }
    Some(first.trim_end_matches(".rs").to_owned())
}

/// The part of a file before its test module (tests sit at the end of a file here).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at])
}

/// Every top-level module named as `crate::name` or inside `crate::{a, b::c}`.
pub(crate) fn named_modules(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let code: String = text
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with("//")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let preceded_by_ident = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
        rest = &rest[at + "crate::".len()..];
        if preceded_by_ident {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.insert(name);
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The import graph of the top-level modules under `src`.
pub(crate) fn graph(src: &Path) -> std::io::Result<Graph> {
    let mut files = Vec::new();
    rust_files(src, &mut files)?;
    let mut graph = Graph::new();
    for file in files {
        let Some(module) = owner(src, &file) else {
            continue;
        };
        let text = std::fs::read_to_string(&file)?;
        let edges = graph.entry(module.clone()).or_default();
        for named in named_modules(without_tests(&text)) {
            if named != module {
                edges.insert(named);
            }
        }
    }
    Ok(graph)
}

/// One circle in `graph`, as the path `a → b → … → a`, if there is any.
pub(crate) fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path.iter().position(|n| n == node).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_owned(), Mark::Open);
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, marks, path) {
                return Some(cycle);
            }
        }
        path.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        let mut path = Vec::new();
        if let Some(cycle) = visit(node, graph, &mut marks, &mut path) {
            return Some(cycle);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_level_modules_import_each_other_without_a_circle() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let graph = graph(&src).unwrap();
        assert!(graph.len() > 10, "the sources were not found: {graph:?}");
        assert!(graph["agent_run"].contains("config"), "{graph:?}");
        if let Some(cycle) = find_cycle(&graph) {
            panic!(
                "import circle among crates/cli modules: {}",
                cycle.join(" → ")
            );
        }
    }

    #[test]
    fn a_circle_is_found_and_named() {
        let edges = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")];
        let mut graph = Graph::new();
        for (from, to) in edges {
            graph.entry(from.into()).or_default().insert(to.into());
        }
        assert_eq!(find_cycle(&graph).unwrap(), ["a", "b", "c", "a"]);
        graph.get_mut("c").unwrap().remove("a");
        assert_eq!(find_cycle(&graph), None);
    }

    #[test]
    fn imports_are_read_from_use_lines_groups_and_inline_paths() {
        let text = "use crate::config::Config;\nuse crate::{exit, wiring::x};\n\
                    // crate::commented\nfn f() { crate::secrets::clean(\"\"); \
                    my_crate::not_ours(); }";
        let names: Vec<String> = named_modules(text).into_iter().collect();
        assert_eq!(names, ["config", "exit", "secrets", "wiring"]);
    }
}
