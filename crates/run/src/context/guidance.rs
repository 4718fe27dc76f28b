//! Just-in-time guidance, the pure part: which nested `AGENTS.md` files apply to a path a tool
//! call touched ([`candidates`]: the folders between the project root, excluded — its file is
//! the project instructions — and the path, by name only), and what the model sees after the
//! result ([`note`]). The driver reads the candidates through the sandbox's read confinement;
//! the core refuses a file the run was given before.

use std::path::{Component, Path, PathBuf};

use super::NESTED_FILE;

/// `path` with `.` and `..` resolved by name (no file system access).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The nested instruction files that apply to `raw` (a tool's path argument, relative to
/// `working_dir` or absolute): `<folder>/AGENTS.md` for every folder strictly under `root` on
/// the way to the path (the path itself included, as it may be a folder), outermost first.
/// Empty when the path is not under `root`.
pub fn candidates(root: &Path, working_dir: &Path, raw: &str) -> Vec<PathBuf> {
    let given = Path::new(raw);
    let full = normalize(&if given.is_absolute() {
        given.to_path_buf()
    } else {
        working_dir.join(given)
    });
    let root = normalize(root);
    let Ok(rest) = full.strip_prefix(&root) else {
        return Vec::new();
    };
    let mut folder = root;
    let mut out = Vec::new();
    for c in rest.components() {
        folder.push(c);
        out.push(folder.join(NESTED_FILE));
    }
    // The path itself named the instruction file: it is not a folder holding one.
    if rest.file_name().is_some_and(|n| n == NESTED_FILE) {
        out.pop();
    }
    out
}

/// What the model sees after a tool's result for the nested instruction file at `path`.
pub fn note(path: &str, text: &str) -> String {
    let folder = Path::new(path)
        .parent()
        .map_or_else(|| path.to_string(), |p| p.display().to_string());
    format!(
        "\n\n[Instructions for work under {folder}, from {path}; they apply in addition to the \
         project instructions]\n{}",
        text.trim_end()
    )
}
