//! Runs recorded before transcripts were typed run events (schema version 1: lines without
//! `schema_version`; `phase_start`, `tool_call`, `phase_end`, `run_end`). `lsm runs list`
//! still shows them, from what they recorded; they cannot be resumed, because a version 1
//! transcript lacks what a resume folds (`run_started`, `tool_call_started` before each
//! tool, the full phase results).

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde_json::Value;

/// The schema version of the transcript at `path`, from its first line: 1 when that line
/// has no `schema_version`; `None` when the file cannot be read or its first line is not JSON.
pub fn schema_version(path: &Path) -> Option<u64> {
    let file = std::fs::File::open(path).ok()?;
    let mut first = String::new();
    BufReader::new(file).read_line(&mut first).ok()?;
    let line: Value = serde_json::from_str(first.trim()).ok()?;
    Some(
        line.get("schema_version")
            .and_then(Value::as_u64)
            .unwrap_or(1),
    )
}

/// What a version 1 run recorded: from `run_summary.json` when it was written, else from its
/// transcript (`run_end`'s status, the first line's time) and its folder.
#[derive(Debug, Clone, PartialEq)]
pub struct LegacyRun {
    /// The run id (the folder's name).
    pub run_id: String,
    /// The agent (the summary's, else the folder's).
    pub agent: String,
    /// `completed`, `stopped` or `failed`, when the run recorded its end.
    pub finished: Option<String>,
    /// Start (RFC 3339).
    pub started_at: String,
    /// The task or topic, when the summary recorded it.
    pub topic: String,
}

/// Read the version 1 run in `run_dir` (`<agents>/<agent>/logs/<run_id>`).
pub fn read(run_dir: &Path) -> Option<LegacyRun> {
    let run_id = run_dir.file_name()?.to_str()?.to_string();
    let folder_agent = run_dir
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let text = std::fs::read_to_string(run_dir.join("transcript.jsonl")).ok()?;
    // A torn or foreign line is skipped: this is a listing, not a replay.
    let lines: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let summary: Option<Value> = std::fs::read(run_dir.join("run_summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let finished = summary
        .as_ref()
        .and_then(|s| field(s, "status"))
        .or_else(|| {
            lines
                .iter()
                .rev()
                .find(|l| l["event"] == "run_end")
                .and_then(|l| field(l, "status"))
        });
    let started_at = summary
        .as_ref()
        .and_then(|s| field(s, "started_at"))
        .or_else(|| lines.first().and_then(|l| field(l, "ts")))
        .unwrap_or_default();
    Some(LegacyRun {
        run_id,
        agent: summary
            .as_ref()
            .and_then(|s| field(s, "agent_name"))
            .unwrap_or(folder_agent),
        finished,
        started_at,
        topic: summary
            .as_ref()
            .and_then(|s| field(s, "topic"))
            .unwrap_or_default(),
    })
}

/// Why `lsm runs resume` refuses the version 1 run `run_id`.
pub fn not_resumable(run_id: &str) -> String {
    format!(
        "run {run_id} was recorded by an earlier lsm (transcript schema version 1) and cannot be \
         resumed: its transcript has no run_started line and does not record tool calls before \
         they run, so what was already done cannot be told apart from what was not; start the \
         task again with `lsm agent run`"
    )
}
