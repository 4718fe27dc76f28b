//! Reading a journal back: [`read_journal`] of a transcript file, [`parse_journal`] of a
//! journal's text (whichever store kept it), and cutting a torn last line off before a resumed
//! run appends ([`truncate_torn_tail`]). A torn last line (a crash while it was written) is
//! left out and reported as a warning, never an error; a broken line before the last is an
//! error naming it.

use std::fs::OpenOptions;
use std::path::Path;

use lsm_run::event::{EventEnvelope, SCHEMA_VERSION};

use crate::error::HarnessError;

/// A journal read back: its lines, and what was wrong with its end, if anything.
#[derive(Debug, Clone, PartialEq)]
pub struct Journal {
    /// Every complete line, in order.
    pub events: Vec<EventEnvelope>,
    /// Why the last line was ignored (a line torn by a crash while it was written).
    pub warning: Option<String>,
}

/// Read a transcript back as a journal. A last line that is incomplete or does not parse
/// (a crash while it was written) is left out and reported in [`Journal::warning`]; it is
/// never an error.
///
/// # Errors
/// When the file cannot be read, or a line before the last is not a run event of this
/// schema (the message names the line).
pub fn read_journal(path: &Path) -> Result<Journal, HarnessError> {
    let bytes = std::fs::read(path).map_err(|e| HarnessError::ReadJournal {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    parse_journal(
        &String::from_utf8_lossy(&bytes),
        &path.display().to_string(),
    )
}

/// [`read_journal`] of a journal's text, read from `source` (named in messages).
///
/// # Errors
/// A line before the last that is not a run event of this schema.
pub fn parse_journal(text: &str, source: &str) -> Result<Journal, HarnessError> {
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    let mut events = Vec::with_capacity(lines.len());
    let mut warning = None;
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<EventEnvelope>(line) {
            Ok(e) => events.push(e),
            Err(e) if i + 1 == lines.len() => {
                warning = Some(format!(
                    "the last line ({}) of {source} is incomplete and was ignored: {e}",
                    i + 1,
                ));
            }
            Err(e) => {
                return Err(HarnessError::ReadJournal {
                    path: source.to_string(),
                    reason: format!(
                        "line {} is not a run event of schema version {SCHEMA_VERSION}: {e}",
                        i + 1
                    ),
                });
            }
        }
    }
    if let Some(w) = &warning {
        tracing::warn!("{w}");
    }
    Ok(Journal { events, warning })
}

/// Cut a torn last line off the journal at `path` (one that does not end with a newline, or
/// the last one when it does not parse), so that appending continues on a line boundary.
///
/// # Errors
/// When the file cannot be read or truncated.
pub(crate) fn truncate_torn_tail(path: &Path) -> Result<(), HarnessError> {
    let io = |e: std::io::Error| HarnessError::ReadJournal {
        path: path.display().to_string(),
        reason: format!("cannot cut off its torn last line: {e}"),
    };
    let bytes = std::fs::read(path).map_err(io)?;
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let keep = if bytes.ends_with(b"\n")
        && serde_json::from_slice::<EventEnvelope>(
            &body[body.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1)..],
        )
        .is_ok()
    {
        bytes.len()
    } else {
        body.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1)
    };
    let file = OpenOptions::new().write(true).open(path).map_err(io)?;
    file.set_len(keep as u64)
        .and_then(|()| file.sync_data())
        .map_err(io)
}
