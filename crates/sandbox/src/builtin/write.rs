//! Workspace-writing tools: `write_file`, `append_file`, `create_folder`, `edit_file`.
//!
//! Their path argument is confined for writing by the sandbox and opened through the
//! root folder's handle ([`crate::ConfinedPath::open_write`]): missing parent folders are
//! created one at a time without following links, protected paths are refused by handle,
//! and only regular files are opened (never a named pipe, which would block).

use std::io::{Read, Seek, SeekFrom, Write};

use schemars::JsonSchema;
use serde::Deserialize;

use super::{parse_args, run_blocking};
use crate::{
    ConfinedPath, EntryKind, PathArg, RiskLevel, Tool, ToolContext, ToolError, ToolOutput,
    WriteMode, preview, schema_for,
};

const PATH_ARG: &[PathArg] = &[PathArg::write("path")];

fn io_err(path: &ConfinedPath) -> impl Fn(std::io::Error) -> ToolError + '_ {
    move |e| ToolError::io(path.shown(), e)
}

fn over_limit(what: &str, bytes: u64, limit: usize) -> ToolError {
    ToolError::InvalidArguments(format!(
        "{what} {bytes} bytes, over the write limit of {limit} bytes"
    ))
}

// ---------------------------------------------------------------------------------------------

/// `write_file`: create or replace a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// The file to write, absolute or relative to the working directory. Missing parent
    /// folders are created.
    pub path: String,
    /// The complete new content of the file.
    pub content: String,
}

#[async_trait::async_trait]
impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Create a file or replace its whole content, creating missing parent folders."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<WriteFileArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::WritesWorkspace
    }
    fn needs_permission(&self) -> bool {
        true
    }
    fn path_args(&self) -> &[PathArg] {
        PATH_ARG
    }
    fn preview(&self, ctx: &ToolContext) -> Option<String> {
        let args: WriteFileArgs = parse_args(ctx).ok()?;
        let path = ctx.path("path").ok()?;
        let old = preview::current_text(path)?;
        Some(preview::file_diff(&args.path, &old, &args.content))
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: WriteFileArgs = parse_args(&ctx)?;
        let path = ctx.path("path")?.clone();
        if args.content.len() > ctx.max_write_bytes {
            return Err(over_limit(
                "the content is",
                args.content.len() as u64,
                ctx.max_write_bytes,
            ));
        }
        let len = args.content.len();
        let content = args.content;
        let written = run_blocking(move |_| {
            let mut file = path.open_write(WriteMode::Create)?;
            // Truncated only now that the handle is known to be an allowed regular file.
            file.set_len(0).map_err(io_err(&path))?;
            file.write_all(content.as_bytes()).map_err(io_err(&path))?;
            Ok(path.shown().to_path_buf())
        })
        .await?;
        Ok(ToolOutput::wrote(
            format!("Wrote {len} bytes to {}", args.path),
            written,
        ))
    }
}

// ---------------------------------------------------------------------------------------------

/// `append_file`: add text to the end of a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct AppendFile;

/// Arguments of `append_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendFileArgs {
    /// The file to append to, absolute or relative to the working directory. It is created
    /// (with missing parent folders) when it does not exist.
    pub path: String,
    /// The text to add at the end of the file (include a trailing newline if you want one).
    pub content: String,
}

#[async_trait::async_trait]
impl Tool for AppendFile {
    fn name(&self) -> &str {
        "append_file"
    }
    fn description(&self) -> &str {
        "Append text to the end of a file, creating it if it does not exist."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<AppendFileArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::WritesWorkspace
    }
    fn needs_permission(&self) -> bool {
        true
    }
    fn path_args(&self) -> &[PathArg] {
        PATH_ARG
    }
    fn preview(&self, ctx: &ToolContext) -> Option<String> {
        let args: AppendFileArgs = parse_args(ctx).ok()?;
        let old = preview::current_text(ctx.path("path").ok()?)?;
        let new = format!("{old}{}", args.content);
        Some(preview::file_diff(&args.path, &old, &new))
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: AppendFileArgs = parse_args(&ctx)?;
        let path = ctx.path("path")?.clone();
        let len = args.content.len() as u64;
        let limit = ctx.max_write_bytes;
        if len > limit as u64 {
            return Err(over_limit("appending would make the file", len, limit));
        }
        let content = args.content;
        let (after, written) = run_blocking(move |_| {
            let mut file = path.open_write(WriteMode::Append)?;
            let before = file.metadata().map_err(io_err(&path))?.len();
            let after = before.saturating_add(len);
            if after > limit as u64 {
                return Err(over_limit("appending would make the file", after, limit));
            }
            file.write_all(content.as_bytes()).map_err(io_err(&path))?;
            file.flush().map_err(io_err(&path))?;
            Ok((after, path.shown().to_path_buf()))
        })
        .await?;
        Ok(ToolOutput::wrote(
            format!("Appended {len} bytes to {} (now {after} bytes)", args.path),
            written,
        ))
    }
}

// ---------------------------------------------------------------------------------------------

/// `create_folder`: make a folder and its missing parents.
#[derive(Debug, Clone, Copy, Default)]
pub struct CreateFolder;

/// Arguments of `create_folder`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFolderArgs {
    /// The folder to create, absolute or relative to the working directory.
    pub path: String,
}

#[async_trait::async_trait]
impl Tool for CreateFolder {
    fn name(&self) -> &str {
        "create_folder"
    }
    fn description(&self) -> &str {
        "Create a folder, including missing parent folders; an existing folder is left as is."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<CreateFolderArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::WritesWorkspace
    }
    fn needs_permission(&self) -> bool {
        true
    }
    fn path_args(&self) -> &[PathArg] {
        PATH_ARG
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: CreateFolderArgs = parse_args(&ctx)?;
        let path = ctx.path("path")?.clone();
        match path.info() {
            Ok(meta) if meta.kind == EntryKind::Folder => {
                return Ok(ToolOutput::text(format!(
                    "Folder {} already exists",
                    args.path
                )));
            }
            Ok(_) => {
                return Err(ToolError::InvalidArguments(format!(
                    "'{}' exists and is not a folder",
                    args.path
                )));
            }
            Err(_) => {}
        }
        let created = run_blocking(move |_| path.create_folder()).await?;
        Ok(ToolOutput::text(if created {
            format!("Created folder {}", args.path)
        } else {
            format!("Folder {} already exists", args.path)
        }))
    }
}

// ---------------------------------------------------------------------------------------------

/// `edit_file`: replace a range of lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// The text file to edit, absolute or relative to the working directory.
    pub path: String,
    /// First line to replace (1-based).
    pub start_line: u64,
    /// Last line to replace (inclusive). Use start_line - 1 to insert before start_line
    /// without replacing anything.
    pub end_line: u64,
    /// The text that replaces those lines (empty deletes them).
    pub new_text: String,
}

#[async_trait::async_trait]
impl Tool for EditFile {
    fn name(&self) -> &str {
        "edit_file"
    }
    fn description(&self) -> &str {
        "Replace lines start_line..end_line (1-based, inclusive) of a text file with new_text."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<EditFileArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::WritesWorkspace
    }
    fn needs_permission(&self) -> bool {
        true
    }
    fn path_args(&self) -> &[PathArg] {
        PATH_ARG
    }
    fn preview(&self, ctx: &ToolContext) -> Option<String> {
        let args: EditFileArgs = parse_args(ctx).ok()?;
        let old = preview::current_text(ctx.path("path").ok()?)?;
        // A bad line range is the tool's error to report; there is nothing to preview.
        let edit = replace_lines(&old, args.start_line, args.end_line, &args.new_text).ok()?;
        Some(preview::file_diff(&args.path, &old, &edit.text))
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: EditFileArgs = parse_args(&ctx)?;
        let path = ctx.path("path")?.clone();
        let limit = ctx.max_write_bytes;
        let (start, end, shown) = (args.start_line, args.end_line, args.path.clone());
        let new_text = args.new_text;
        let (edit, written) = run_blocking(move |_| {
            let mut file = path.open_write(WriteMode::Existing)?;
            let size = file.metadata().map_err(io_err(&path))?.len();
            if size > limit as u64 {
                return Err(over_limit("the file is", size, limit));
            }
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).map_err(io_err(&path))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| ToolError::InvalidArguments(format!("'{shown}' is not UTF-8 text")))?;
            let edit = replace_lines(&text, start, end, &new_text)?;
            if edit.text.len() > limit {
                return Err(over_limit(
                    "the edited file would be",
                    edit.text.len() as u64,
                    limit,
                ));
            }
            file.seek(SeekFrom::Start(0)).map_err(io_err(&path))?;
            file.write_all(edit.text.as_bytes())
                .map_err(io_err(&path))?;
            file.set_len(edit.text.len() as u64)
                .map_err(io_err(&path))?;
            Ok((edit, path.shown().to_path_buf()))
        })
        .await?;
        let what = if args.end_line < args.start_line {
            format!(
                "Inserted {} lines before line {}",
                edit.inserted, args.start_line
            )
        } else {
            format!(
                "Replaced lines {}-{} with {} lines",
                args.start_line, args.end_line, edit.inserted
            )
        };
        Ok(ToolOutput::wrote(
            format!("{what} in {} (now {} lines)", args.path, edit.lines),
            written,
        ))
    }
}

/// The result of [`replace_lines`].
#[derive(Debug, PartialEq, Eq)]
struct Edited {
    text: String,
    /// Lines in `new_text`.
    inserted: usize,
    /// Lines in the result.
    lines: usize,
}

/// Replace lines `start..=end` (1-based) of `text` with `new_text`; `end = start - 1` inserts.
/// Line endings are kept: `new_text` gets a final newline when what it replaces had one.
fn replace_lines(text: &str, start: u64, end: u64, new_text: &str) -> Result<Edited, ToolError> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let count = lines.len() as u64;
    if start == 0 {
        return Err(ToolError::InvalidArguments(
            "start_line must be at least 1 (lines are numbered from 1)".into(),
        ));
    }
    if end.saturating_add(1) < start {
        return Err(ToolError::InvalidArguments(format!(
            "end_line ({end}) is before start_line ({start}); use end_line = start_line - 1 to insert without replacing"
        )));
    }
    if end > count || start > count + 1 {
        return Err(ToolError::InvalidArguments(format!(
            "lines {start}-{end} are outside the file, which has {count} lines"
        )));
    }
    // In range: start - 1 ≤ end ≤ count, so these indices are valid.
    let (first, last) = ((start - 1) as usize, end as usize);
    let before = lines[..first].concat();
    let replaced = lines[first..last].concat();
    let after = lines[last..].concat();

    let mut inserted = new_text.to_string();
    if !inserted.is_empty() && !inserted.ends_with('\n') {
        let ended_line = if replaced.is_empty() {
            !after.is_empty() || before.ends_with('\n')
        } else {
            replaced.ends_with('\n')
        };
        if ended_line {
            inserted.push('\n');
        }
    }
    if !inserted.is_empty() && !before.is_empty() && !before.ends_with('\n') {
        // Inserting after a last line that had no newline.
        inserted.insert(0, '\n');
    }
    let result = format!("{before}{inserted}{after}");
    Ok(Edited {
        inserted: new_text.split_inclusive('\n').count(),
        lines: result.split_inclusive('\n').count(),
        text: result,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::path::Path;

    use super::*;

    /// A context whose root is the temporary folder `root`.
    fn ctx_in(root: &Path, args: serde_json::Value, path: &Path) -> ToolContext {
        ToolContext::for_test(args, [("path", path.to_path_buf())], root.to_path_buf())
    }

    fn ctx(args: serde_json::Value, path: &Path) -> ToolContext {
        ctx_in(path.parent().unwrap(), args, path)
    }

    fn edit(text: &str, start: u64, end: u64, new: &str) -> String {
        replace_lines(text, start, end, new).unwrap().text
    }

    #[test]
    fn replaces_inserts_deletes() {
        let text = "a\nb\nc\n";
        assert_eq!(edit(text, 2, 2, "B"), "a\nB\nc\n");
        assert_eq!(edit(text, 2, 3, "X\nY\nZ\n"), "a\nX\nY\nZ\n");
        assert_eq!(edit(text, 1, 3, ""), "");
        assert_eq!(edit(text, 2, 2, ""), "a\nc\n");
        assert_eq!(edit(text, 1, 0, "top"), "top\na\nb\nc\n");
        assert_eq!(edit(text, 4, 3, "end"), "a\nb\nc\nend\n");
        assert_eq!(edit("a\nb", 2, 2, "B"), "a\nB");
        assert_eq!(edit("a\nb", 3, 2, "c"), "a\nb\nc");
        assert_eq!(edit("", 1, 0, "x"), "x");
    }

    #[test]
    fn range_errors_are_clear() {
        let err = replace_lines("a\nb\n", 3, 5, "x").unwrap_err().to_string();
        assert!(err.contains("outside the file, which has 2 lines"), "{err}");
        let err = replace_lines("a\n", 0, 1, "x").unwrap_err().to_string();
        assert!(err.contains("at least 1"), "{err}");
        let err = replace_lines("a\nb\nc\n", 3, 1, "x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("before start_line"), "{err}");
    }

    #[tokio::test]
    async fn write_append_create_edit() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("deep/new/f.txt");
        let out = WriteFile
            .execute(ctx_in(
                tmp.path(),
                json!({"path": "f.txt", "content": "one\n"}),
                &file,
            ))
            .await
            .unwrap();
        assert_eq!(out.artifacts, std::slice::from_ref(&file));
        let out = AppendFile
            .execute(ctx_in(
                tmp.path(),
                json!({"path": "f.txt", "content": "two\n"}),
                &file,
            ))
            .await
            .unwrap();
        assert_eq!(out.artifacts, std::slice::from_ref(&file));
        assert!(out.text.contains("now 8 bytes"), "{}", out.text);
        let out = EditFile
            .execute(ctx_in(
                tmp.path(),
                json!({"path": "f.txt", "start_line": 1, "end_line": 1, "new_text": "ONE"}),
                &file,
            ))
            .await
            .unwrap();
        assert_eq!(out.artifacts, std::slice::from_ref(&file));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "ONE\ntwo\n");
        let folder = tmp.path().join("x/y");
        let out = CreateFolder
            .execute(ctx_in(tmp.path(), json!({"path": "x/y"}), &folder))
            .await
            .unwrap();
        assert!(out.text.starts_with("Created folder"), "{}", out.text);
        assert!(folder.is_dir());
        let out = CreateFolder
            .execute(ctx_in(tmp.path(), json!({"path": "x/y"}), &folder))
            .await
            .unwrap();
        assert!(out.text.contains("already exists"), "{}", out.text);
    }

    #[tokio::test]
    async fn write_limits() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f.txt");
        let mut c = ctx(json!({"path": "f.txt", "content": "12345"}), &file);
        c.max_write_bytes = 4;
        let err = WriteFile.execute(c).await.unwrap_err().to_string();
        assert!(err.contains("over the write limit of 4 bytes"), "{err}");
        std::fs::write(&file, "123").unwrap();
        let mut c = ctx(json!({"path": "f.txt", "content": "45"}), &file);
        c.max_write_bytes = 4;
        let err = AppendFile.execute(c).await.unwrap_err().to_string();
        assert!(err.contains("make the file 5 bytes"), "{err}");
        let mut c = ctx(json!({"path": "f.txt", "content": "4"}), &file);
        c.max_write_bytes = 4;
        AppendFile.execute(c).await.unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "1234");
    }
}
