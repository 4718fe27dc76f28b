//! `cargo xtask check-docs`: the docs stay maps. Each of the documents a newcomer reads first
//! has a size limit (issue "a house you can read in an afternoon"): README.md 12 KiB,
//! docs/ARCHITECTURE.md 40 KiB, docs/PERFORMANCE.md 30 KiB. A document past its limit fails
//! the check with its size and what to do: move detail into the module docs, history into
//! git, figures into PERFORMANCE.md's tables.

use std::path::Path;

use anyhow::{Result, bail};

/// The documents with a size limit, and the limit in bytes.
pub const LIMITS: &[(&str, u64)] = &[
    ("README.md", 12 * 1024),
    ("docs/ARCHITECTURE.md", 40 * 1024),
    ("docs/PERFORMANCE.md", 30 * 1024),
];

/// The documents of `root` over their limit: `(path, size, limit)`.
///
/// # Errors
/// A document that cannot be read.
pub fn oversized(root: &Path, limits: &[(&str, u64)]) -> Result<Vec<(String, u64, u64)>> {
    let mut over = Vec::new();
    for (doc, limit) in limits {
        let size = std::fs::metadata(root.join(doc))
            .map_err(|e| anyhow::anyhow!("cannot read {doc}: {e}"))?
            .len();
        if size > *limit {
            over.push(((*doc).to_string(), size, *limit));
        }
    }
    Ok(over)
}

/// Fail when a document is over its limit.
///
/// # Errors
/// Each document over its limit, named with its size.
pub fn check_docs(root: &Path) -> Result<()> {
    let over = oversized(root, LIMITS)?;
    if over.is_empty() {
        let sizes: Vec<String> = LIMITS
            .iter()
            .map(|(doc, limit)| format!("{doc} ≤ {} KiB", limit / 1024))
            .collect();
        eprintln!("xtask: [check-docs] ok: {}", sizes.join(", "));
        return Ok(());
    }
    let lines: Vec<String> = over
        .iter()
        .map(|(doc, size, limit)| format!("{doc} is {size} bytes, over its {limit}"))
        .collect();
    bail!(
        "[check-docs] {}: the docs are maps — move a module's detail into its doc comment, \
         history into git (the commit messages), figures into docs/PERFORMANCE.md's tables",
        lines.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_over_its_limit_fails_the_check_and_one_within_passes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("small.md"), "x".repeat(10)).unwrap();
        std::fs::write(dir.path().join("big.md"), "x".repeat(11)).unwrap();
        let limits = [("small.md", 10), ("big.md", 10)];
        let over = oversized(dir.path(), &limits).unwrap();
        assert_eq!(over, [("big.md".to_string(), 11, 10)]);
        assert!(oversized(dir.path(), &[("missing.md", 1)]).is_err());
    }

    #[test]
    fn the_repository_documents_are_within_their_limits() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let over = oversized(&root, LIMITS).unwrap();
        assert!(over.is_empty(), "over their limits: {over:?}");
    }
}
