//! Read-only file tools: `read_file`, `read_folder`, `file_metadata`, `hash_file`.

use std::io::{BufRead, BufReader, Read};
use std::time::{SystemTime, UNIX_EPOCH};

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use schemars::JsonSchema;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{Abandoned, parse_args, run_blocking};
use crate::{
    ConfinedPath, EntryInfo, EntryKind, PathArg, RiskLevel, Tool, ToolContext, ToolError,
    ToolOutput, schema_for,
};

/// Most bytes `read_file` returns in one call (the sandbox caps the text further).
const MAX_READ_BYTES: u64 = 8 * 1024 * 1024;
/// Files up to this size are read on the calling task, not on the blocking pool: from the
/// page cache that takes microseconds, less than the hand-off to a pool thread and back
/// (two thread wake-ups per call; docs/PERFORMANCE.md). The open cannot wait on a writer
/// (named pipes and devices are refused), so only a slow disk could make it long.
const INLINE_READ_BYTES: u64 = 64 * 1024;
/// Most entries `read_folder` lists.
const MAX_ENTRIES: usize = 1000;

const PATH_ARG: &[PathArg] = &[PathArg::read("path")];

// ---------------------------------------------------------------------------------------------

/// `read_file`: a file's text, whole or a line range.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// The file to read, absolute or relative to the working directory.
    pub path: String,
    /// First line to return (1-based). Omit to start at the beginning.
    pub start_line: Option<u64>,
    /// Last line to return (inclusive). Omit to read to the end.
    pub end_line: Option<u64>,
}

#[async_trait::async_trait]
impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Read a text file, whole or only the lines start_line..end_line (1-based, inclusive)."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<ReadFileArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn path_args(&self) -> &[PathArg] {
        PATH_ARG
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ReadFileArgs = parse_args(&ctx)?;
        let path = ctx.path("path")?.clone();
        // The sandbox looked at it an instant ago; the open below checks the handle again.
        let info = match path.info_when_checked() {
            Some(info) => info.clone(),
            None => path.info()?,
        };
        if info.kind == EntryKind::Folder {
            return Err(ToolError::InvalidArguments(format!(
                "'{}' is a folder; use read_folder to list it",
                args.path
            )));
        }
        if args.start_line.is_none() && args.end_line.is_none() {
            if info.len <= INLINE_READ_BYTES {
                return read_whole(&path, &info).map(ToolOutput::text);
            }
            return run_blocking(move |_| read_whole(&path, &info))
                .await
                .map(ToolOutput::text);
        }
        let start = args.start_line.unwrap_or(1);
        let end = args.end_line.unwrap_or(u64::MAX);
        if start == 0 {
            return Err(ToolError::InvalidArguments(
                "start_line must be at least 1 (lines are numbered from 1)".into(),
            ));
        }
        if end < start {
            return Err(ToolError::InvalidArguments(format!(
                "end_line ({end}) is before start_line ({start})"
            )));
        }
        run_blocking(move |_| read_lines(&path, start, end))
            .await
            .map(ToolOutput::text)
    }
}

/// Blocking: run it with [`run_blocking`], or inline for a small file.
fn read_whole(path: &ConfinedPath, info: &EntryInfo) -> Result<String, ToolError> {
    let (bytes, size) = path.read_capped_after(info, MAX_READ_BYTES)?;
    let mut text = text_of(bytes);
    if size > MAX_READ_BYTES {
        text.push_str(&format!(
            "\n[file is {size} bytes; showing the first {MAX_READ_BYTES}; use start_line/end_line to read further]"
        ));
    }
    Ok(text)
}

/// Blocking: run it with [`run_blocking`].
fn read_lines(path: &ConfinedPath, start: u64, end: u64) -> Result<String, ToolError> {
    let file = path.open_read()?;
    let mut reader = BufReader::new(file);
    let mut out = Vec::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| ToolError::io(path.shown(), e))?;
        if n == 0 {
            break;
        }
        number += 1;
        if number >= start {
            out.extend_from_slice(&line);
            if out.len() as u64 > MAX_READ_BYTES {
                out.extend_from_slice(
                    format!("\n[stopped after line {number}: over {MAX_READ_BYTES} bytes]")
                        .as_bytes(),
                );
                break;
            }
        }
        if number >= end {
            break;
        }
    }
    if number < start {
        return Err(ToolError::InvalidArguments(format!(
            "start_line {start} is past the end of the file, which has {number} lines"
        )));
    }
    Ok(text_of(out))
}

/// `bytes` as text, each invalid UTF-8 sequence replaced by `�`. Valid text (the usual
/// case) is checked by `from_utf8`, which takes ASCII a word at a time, and kept in place;
/// `from_utf8_lossy` looks at each byte and copies (≈ 7 instructions a byte, the largest
/// cost of reading a 20 KB file).
fn text_of(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes)
        .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned())
}

// ---------------------------------------------------------------------------------------------

/// `read_folder`: a folder's entries, folders marked with a trailing `/`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFolder;

/// Arguments of `read_folder`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFolderArgs {
    /// The folder to list, absolute or relative to the working directory.
    pub path: String,
    /// List the contents of sub-folders too (default false). Symbolic links are not followed.
    pub recursive: Option<bool>,
}

#[async_trait::async_trait]
impl Tool for ReadFolder {
    fn name(&self) -> &str {
        "read_folder"
    }
    fn description(&self) -> &str {
        "List the entries of a folder (folders end with '/'), optionally recursively."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<ReadFolderArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn path_args(&self) -> &[PathArg] {
        PATH_ARG
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ReadFolderArgs = parse_args(&ctx)?;
        let path = ctx.path("path")?.clone();
        if path.info()?.kind != EntryKind::Folder {
            return Err(ToolError::InvalidArguments(format!(
                "'{}' is not a folder; use read_file or file_metadata",
                args.path
            )));
        }
        let recursive = args.recursive.unwrap_or(false);
        let (entries, more) = run_blocking(move |abandoned| {
            let dir = path.open_dir()?;
            let mut listing = Listing::default();
            list(&dir, "", recursive, &mut listing, &abandoned)
                .map_err(|e| ToolError::io(path.shown(), e))?;
            Ok((listing.entries, listing.more))
        })
        .await?;
        let mut text = if entries.is_empty() {
            format!("'{}' is empty", args.path)
        } else {
            entries.join("\n")
        };
        if more {
            text.push_str(&format!("\n[stopped after {MAX_ENTRIES} entries]"));
        }
        Ok(ToolOutput::text(text))
    }
}

#[derive(Default)]
struct Listing {
    entries: Vec<String>,
    more: bool,
}

/// List `dir` (shown as `prefix`), sorted by name, folders marked with `/`; with
/// `recursive`, each sub-folder's entries follow it. Sub-folders are opened through their
/// parent's handle without following links, so the walk cannot leave the root.
fn list(
    dir: &Dir,
    prefix: &str,
    recursive: bool,
    out: &mut Listing,
    abandoned: &Abandoned,
) -> std::io::Result<()> {
    let mut entries: Vec<(String, bool)> = Vec::new();
    for entry in dir.entries()? {
        let Ok(entry) = entry else { continue }; // unreadable entries are skipped
        // file_type does not follow symlinks: a link to a folder is listed as a plain entry.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        entries.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
    }
    entries.sort();
    for (name, is_dir) in entries {
        if abandoned.is_set() || out.more {
            return Ok(());
        }
        if out.entries.len() == MAX_ENTRIES {
            out.more = true;
            return Ok(());
        }
        let shown = format!("{prefix}{name}");
        if is_dir {
            out.entries.push(format!("{shown}/"));
            if recursive {
                // A folder swapped for a link meanwhile is not opened; skip what cannot be.
                if let Ok(sub) = dir.open_dir_nofollow(&name) {
                    list(&sub, &format!("{shown}/"), true, out, abandoned)?;
                }
            }
        } else {
            out.entries.push(shown);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------

/// `file_metadata`: size, kind, modification time, read-only flag.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileMetadata;

/// Arguments of `file_metadata`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileMetadataArgs {
    /// The file or folder, absolute or relative to the working directory.
    pub path: String,
}

#[async_trait::async_trait]
impl Tool for FileMetadata {
    fn name(&self) -> &str {
        "file_metadata"
    }
    fn description(&self) -> &str {
        "Show a file's or folder's kind, size, last modification time (UTC) and read-only flag."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<FileMetadataArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn path_args(&self) -> &[PathArg] {
        PATH_ARG
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: FileMetadataArgs = parse_args(&ctx)?;
        let path = ctx.path("path")?;
        tracing::debug!(path = %args.path, resolved = %path.shown().display(), "file metadata");
        let meta = path.symlink_info()?;
        let kind = match meta.kind {
            EntryKind::Folder => "folder",
            EntryKind::File => "file",
            EntryKind::Symlink => "symlink",
            _ => "other",
        };
        let modified = meta
            .modified
            .map(rfc3339)
            .unwrap_or_else(|| "unknown".to_string());
        Ok(ToolOutput::text(format!(
            "path: {}\nkind: {kind}\nsize: {} bytes\nmodified: {modified}\nreadonly: {}",
            path.shown().display(),
            meta.len,
            meta.readonly
        )))
    }
}

/// `time` as RFC 3339 in UTC, to the second (`2024-02-29T13:05:09Z`).
fn rfc3339(time: SystemTime) -> String {
    let secs: i64 = match time.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    };
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

// ---------------------------------------------------------------------------------------------

/// `hash_file`: the SHA-256 of a file, read in chunks.
#[derive(Debug, Clone, Copy, Default)]
pub struct HashFile;

/// Arguments of `hash_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HashFileArgs {
    /// The file to hash, absolute or relative to the working directory.
    pub path: String,
}

#[async_trait::async_trait]
impl Tool for HashFile {
    fn name(&self) -> &str {
        "hash_file"
    }
    fn description(&self) -> &str {
        "Compute the SHA-256 digest of a file (lowercase hex)."
    }
    fn parameters(&self) -> serde_json::Value {
        schema_for::<HashFileArgs>()
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    fn path_args(&self) -> &[PathArg] {
        PATH_ARG
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: HashFileArgs = parse_args(&ctx)?;
        let path = ctx.path("path")?.clone();
        if path.info()?.kind == EntryKind::Folder {
            return Err(ToolError::InvalidArguments(format!(
                "'{}' is a folder; only files can be hashed",
                args.path
            )));
        }
        let (hasher, total) = run_blocking(move |abandoned| {
            let mut file = path.open_read()?;
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; 64 * 1024];
            let mut total = 0u64;
            while !abandoned.is_set() {
                let n = file
                    .read(&mut buf)
                    .map_err(|e| ToolError::io(path.shown(), e))?;
                if n == 0 {
                    break;
                }
                total += n as u64;
                hasher.update(&buf[..n]);
            }
            Ok((hasher, total))
        })
        .await?;
        let hex: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(ToolOutput::text(format!(
            "sha256 {hex}  {} ({total} bytes)",
            args.path
        )))
    }
}

#[cfg(test)]
mod tests;
