//! `find_file`: files under a folder by name (glob) and/or content (substring).

use std::io::Read;
use std::path::Path;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use globset::{GlobBuilder, GlobMatcher};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Abandoned, parse_args, run_blocking};
use crate::confined_path::open_entry;
use crate::{EntryKind, PathArg, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, schema_for};

/// Most matching files reported.
const MAX_RESULTS: usize = 200;
/// Most entries looked at before giving up (keeps a call on a huge tree bounded).
const MAX_VISITED: usize = 50_000;
/// Files larger than this are not searched for content.
const MAX_CONTENT_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Matching lines shown per file.
const LINES_PER_FILE: usize = 3;
/// Longest matching line shown, in characters.
const MAX_LINE_CHARS: usize = 200;

const PATH_ARG: &[PathArg] = &[PathArg::read("path")];

/// `find_file`: search a folder tree.
#[derive(Debug, Clone, Copy, Default)]
pub struct FindFile;

/// Arguments of `find_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindFileArgs {
    /// The folder to search, absolute or relative to the working directory.
    pub path: String,
    /// A glob for file names, e.g. `*.rs`; with a '/', matched against the path relative to
    /// the folder, e.g. `src/**/*.rs`.
    pub name: Option<String>,
    /// Text the file must contain (case-sensitive); matching lines are shown.
    pub content: Option<String>,
}

#[async_trait::async_trait]
impl Tool for FindFile {
    fn name(&self) -> &str {
        "find_file"
    }
    fn description(&self) -> &str {
        "Find files under a folder by name glob and/or contained text, skipping .gitignore'd files; paths are relative to the folder."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<FindFileArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn path_args(&self) -> &[PathArg] {
        PATH_ARG
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: FindFileArgs = parse_args(&ctx)?;
        let root = ctx.path("path")?.clone();
        if root.info()?.kind != EntryKind::Folder {
            return Err(ToolError::InvalidArguments(format!(
                "'{}' is not a folder; find_file searches a folder tree",
                args.path
            )));
        }
        let name = match args.name.as_deref().filter(|n| !n.is_empty()) {
            Some(glob) => Some(NameFilter::new(glob)?),
            None => None,
        };
        let content = args.content.filter(|c| !c.is_empty());
        let query = Query { name, content };
        let shown_root = args.path;
        let found = run_blocking(move |abandoned| {
            let dir = root.open_dir()?;
            Ok(search(&dir, &query, &abandoned))
        })
        .await?;
        let mut text = if found.lines.is_empty() {
            format!("No files matched under {shown_root}")
        } else {
            found.lines.join("\n")
        };
        if let Some(why) = found.stopped {
            text.push_str(&format!("\n[{why}]"));
        }
        Ok(ToolOutput::text(text))
    }
}

struct NameFilter {
    matcher: GlobMatcher,
    /// Whether the glob is matched against the relative path (it has a '/') or the name.
    whole_path: bool,
}

impl NameFilter {
    fn new(glob: &str) -> Result<Self, ToolError> {
        let matcher = GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::InvalidArguments(format!("bad name glob '{glob}': {e}")))?
            .compile_matcher();
        Ok(NameFilter {
            matcher,
            whole_path: glob.contains('/'),
        })
    }

    fn matches(&self, relative: &str, file_name: &str) -> bool {
        if self.whole_path {
            self.matcher.is_match(relative)
        } else {
            self.matcher.is_match(file_name)
        }
    }
}

struct Query {
    name: Option<NameFilter>,
    content: Option<String>,
}

struct Found {
    lines: Vec<String>,
    /// Why the search stopped early, if it did.
    stopped: Option<String>,
}

/// Walk the folder `root` (no symlinks followed, `.gitignore` files respected, `.git`
/// skipped). Every folder is opened through its parent's handle, so the walk cannot leave the
/// root. Runs on a blocking thread.
fn search(root: &Dir, query: &Query, abandoned: &Abandoned) -> Found {
    let mut walk = Walk {
        query,
        abandoned,
        found: Found {
            lines: Vec::new(),
            stopped: None,
        },
        results: 0,
        visited: 0,
        ignores: Vec::new(),
    };
    walk.dir(root, "");
    walk.found
}

struct Walk<'a> {
    query: &'a Query,
    abandoned: &'a Abandoned,
    found: Found,
    results: usize,
    visited: usize,
    /// The `.gitignore` matchers of the folders from the root down to the current one.
    ignores: Vec<Gitignore>,
}

impl Walk<'_> {
    /// Search `dir` (shown as `prefix`, empty or ending in '/'). Returns false to stop.
    fn dir(&mut self, dir: &Dir, prefix: &str) -> bool {
        let pushed = match gitignore(dir, prefix) {
            Some(matcher) => {
                self.ignores.push(matcher);
                true
            }
            None => false,
        };
        let go_on = self.entries(dir, prefix);
        if pushed {
            self.ignores.pop();
        }
        go_on
    }

    fn entries(&mut self, dir: &Dir, prefix: &str) -> bool {
        let Ok(list) = dir.entries() else {
            return true; // unreadable folders are skipped
        };
        let mut entries: Vec<(String, cap_std::fs::FileType)> = list
            .filter_map(Result::ok)
            .filter_map(|e| Some((e.file_name().into_string().ok()?, e.file_type().ok()?)))
            .filter(|(name, _)| name != ".git")
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in entries {
            if self.abandoned.is_set() {
                return false;
            }
            self.visited += 1;
            if self.visited == MAX_VISITED {
                self.found.stopped =
                    Some(format!("stopped after looking at {MAX_VISITED} entries"));
                return false;
            }
            let relative = format!("{prefix}{name}");
            if self.ignored(&relative, kind.is_dir()) {
                continue;
            }
            let name_ok = self
                .query
                .name
                .as_ref()
                .is_none_or(|filter| filter.matches(&relative, &name));
            let hit = if !name_ok {
                None
            } else {
                match &self.query.content {
                    // Only regular files, opened without following a link.
                    Some(needle) if kind.is_file() => content_lines(dir, &name, &relative, needle),
                    Some(_) => None,
                    None if kind.is_dir() => Some(vec![format!("{relative}/")]),
                    None if kind.is_file() || kind.is_symlink() => Some(vec![relative.clone()]),
                    None => None,
                }
            };
            if let Some(lines) = hit {
                if self.results == MAX_RESULTS {
                    self.found.stopped =
                        Some(format!("stopped after {MAX_RESULTS} matching files"));
                    return false;
                }
                self.results += 1;
                self.found.lines.extend(lines);
            }
            if kind.is_dir() {
                // A folder swapped for a link meanwhile is not opened.
                if let Ok(sub) = dir.open_dir_nofollow(&name) {
                    if !self.dir(&sub, &format!("{relative}/")) {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// Whether `.gitignore` rules exclude `relative`: the deepest folder's rule that matches
    /// decides (a `!pattern` re-includes).
    fn ignored(&self, relative: &str, is_dir: bool) -> bool {
        let path = Path::new("/").join(relative);
        for matcher in self.ignores.iter().rev() {
            match matcher.matched(&path, is_dir) {
                Match::None => {}
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
            }
        }
        false
    }
}

/// The `.gitignore` of `dir` (shown as `prefix`), read through its handle, as a matcher of
/// paths written `/<relative>`.
fn gitignore(dir: &Dir, prefix: &str) -> Option<Gitignore> {
    let mut file = open_entry(dir, Path::new(".gitignore")).ok()?;
    let mut text = String::new();
    (&mut file)
        .take(MAX_CONTENT_FILE_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    let mut builder = GitignoreBuilder::new(Path::new("/").join(prefix));
    for line in text.lines() {
        // A malformed line is skipped, as git does.
        let _ = builder.add_line(None, line);
    }
    builder.build().ok()
}

/// The lines of the file `name` in `dir` containing `needle` (as `relative:line: text`), or `None` when it has
/// none or is too large or binary.
fn content_lines(dir: &Dir, name: &str, relative: &str, needle: &str) -> Option<Vec<String>> {
    let file = open_entry(dir, Path::new(name)).ok()?;
    if file.metadata().ok()?.len() > MAX_CONTENT_FILE_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONTENT_FILE_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.iter().take(8192).any(|&b| b == 0) {
        return None; // binary
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = Vec::new();
    let mut total = 0;
    for (n, line) in text.lines().enumerate() {
        if line.contains(needle) {
            total += 1;
            if lines.len() < LINES_PER_FILE {
                let mut shown: String = line.trim().chars().take(MAX_LINE_CHARS).collect();
                if line.trim().chars().count() > MAX_LINE_CHARS {
                    shown.push_str("...");
                }
                lines.push(format!("{relative}:{}: {shown}", n + 1));
            }
        }
    }
    if total > LINES_PER_FILE {
        lines.push(format!(
            "{relative}: ... {} more matching lines",
            total - LINES_PER_FILE
        ));
    }
    (!lines.is_empty()).then_some(lines)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tree() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("src/nested")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "needle").unwrap();
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n// needle here\n").unwrap();
        std::fs::write(root.join("src/nested/lib.rs"), "nothing\n").unwrap();
        std::fs::write(
            root.join("notes.md"),
            "a needle\nb needle\nc needle\nd needle\n",
        )
        .unwrap();
        std::fs::write(root.join(".gitignore"), "ignored.txt\n").unwrap();
        std::fs::write(root.join("ignored.txt"), "needle").unwrap();
        std::fs::write(root.join("bin.dat"), b"needle\0\0").unwrap();
        tmp
    }

    async fn run(args: serde_json::Value, root: &Path) -> String {
        let ctx = ToolContext::for_test(args, [("path", root.to_path_buf())], root.to_path_buf());
        FindFile.execute(ctx).await.unwrap().text
    }

    #[tokio::test]
    async fn by_name() {
        let tmp = tree();
        let out = run(json!({"path": ".", "name": "*.rs"}), tmp.path()).await;
        assert_eq!(out, "src/main.rs\nsrc/nested/lib.rs");
        let out = run(json!({"path": ".", "name": "src/*.rs"}), tmp.path()).await;
        assert_eq!(out, "src/main.rs");
        let out = run(json!({"path": ".", "name": "*.none"}), tmp.path()).await;
        assert_eq!(out, "No files matched under .");
    }

    #[tokio::test]
    async fn by_content() {
        let tmp = tree();
        let out = run(json!({"path": ".", "content": "needle"}), tmp.path()).await;
        assert_eq!(
            out,
            "notes.md:1: a needle\nnotes.md:2: b needle\nnotes.md:3: c needle\nnotes.md: ... 1 more matching lines\nsrc/main.rs:2: // needle here"
        );
        let out = run(
            json!({"path": ".", "name": "*.rs", "content": "needle"}),
            tmp.path(),
        )
        .await;
        assert_eq!(out, "src/main.rs:2: // needle here");
    }

    #[tokio::test]
    async fn everything_without_filters() {
        let tmp = tree();
        let out = run(json!({"path": "."}), tmp.path()).await;
        assert_eq!(
            out,
            ".gitignore\nbin.dat\nnotes.md\nsrc/\nsrc/main.rs\nsrc/nested/\nsrc/nested/lib.rs"
        );
    }

    #[tokio::test]
    async fn links_are_not_followed() {
        let tmp = tree();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "needle secret").unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("out_dir")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            tmp.path().join("out.txt"),
        )
        .unwrap();
        let out = run(json!({"path": ".", "content": "secret"}), tmp.path()).await;
        assert_eq!(out, "No files matched under .");
    }

    #[tokio::test]
    async fn bad_glob() {
        let tmp = tree();
        let ctx = ToolContext::for_test(
            json!({"path": ".", "name": "[a"}),
            [("path", tmp.path().to_path_buf())],
            tmp.path().to_path_buf(),
        );
        let err = FindFile.execute(ctx).await.unwrap_err().to_string();
        assert!(err.contains("bad name glob"), "{err}");
    }
}
