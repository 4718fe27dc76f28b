//! Run records: the JSONL transcript (appended as things happen) and `run_summary.json`.
//!
//! - The lines one step of the core commits go to the store as one batch
//!   (`Recorder::append_all`; one `write` in the file store) before the step's effect is
//!   carried out; an event sink that watches each line (the test crash points) gets them
//!   one at a time. They share one timestamp.
//! - When to `fsync` is `[agents] journal_fsync` ([`JournalFsync`]): `batched` (the
//!   default) before every call of a tool whose risk is not `read_only` and at phase and
//!   run end; `always`; `never`.
//! - Every line and the summary pass `lsm_sandbox::redact_json_secrets` first; the envelope
//!   handed to the event sink is the redacted one.
//! - A line is written field by field, byte for byte what `serde_json` writes for the
//!   derived serialization of the envelope.
//! - Reading a journal back is [`crate::journal`]'s.
//! - `run_summary.json` is written atomically: a temporary file, `fsync`ed, renamed, the
//!   folder `fsync`ed.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use lsm_run::JournalFsync;
use lsm_run::event::{EventEnvelope, RunEvent, SCHEMA_VERSION};
use lsm_run::summary::RunSummary;

use crate::error::HarnessError;
use crate::store::{FileStore, JournalLine, JournalWriter, RunKey, RunStore};

/// RFC 3339 UTC with milliseconds.
pub(crate) fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Now, as a journal timestamp ([`timestamp`]): the last one made on this thread when the
/// clock has not reached the next millisecond. A model call's steps, their journal lines and
/// the time a tool finished mostly fall in one millisecond; formatting the same text for
/// each cost about 700 instructions, three to five times per call.
pub(crate) fn now_stamp() -> String {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(i64, String)>> =
            const { std::cell::RefCell::new(None) };
    }
    let now = Utc::now();
    let millis = now.timestamp_millis();
    LAST.with_borrow_mut(|last| match last {
        Some((at, text)) if *at == millis => text.clone(),
        _ => {
            let text = timestamp(now);
            *last = Some((millis, text.clone()));
            text
        }
    })
}

/// The bytes a journal line is first given room for (most lines are 300 to 1,300 bytes).
const LINE_CAPACITY: usize = 2048;

/// `record` as one JSON object into `line`: the envelope's fields, then the event's (its
/// `event` tag first) — the bytes `serde_json::to_writer(record)` writes, without serde's
/// flattening, which buffers each of the event's fields through a map serializer (a large
/// share of an event's serialization, paid for every line). Written by sonic-rs, whose
/// string escaping looks at 32 bytes at a time where serde_json's looks at one (the same
/// bytes: `records::tests::a_line_is_the_envelopes_derived_serialization`).
fn write_envelope(record: &EventEnvelope, line: &mut Vec<u8>) -> sonic_rs::Result<()> {
    line.extend_from_slice(b"{\"seq\":");
    sonic_rs::to_writer(&mut *line, &record.seq)?;
    line.extend_from_slice(b",\"ts\":");
    sonic_rs::to_writer(&mut *line, &record.ts)?;
    line.extend_from_slice(b",\"run_id\":");
    sonic_rs::to_writer(&mut *line, &record.run_id)?;
    line.extend_from_slice(b",\"schema_version\":");
    sonic_rs::to_writer(&mut *line, &record.schema_version)?;
    let event_at = line.len();
    sonic_rs::to_writer(&mut *line, &record.event)?;
    // The event is an object that opens with its tag: its `{` becomes the comma after the
    // envelope's fields.
    let end = line.len();
    match line.get_mut(event_at) {
        Some(open) if *open == b'{' && end > event_at + 2 => {
            *open = b',';
            Ok(())
        }
        _ => Err(serde::ser::Error::custom(
            "an event did not serialize as a JSON object with fields",
        )),
    }
}

/// Where a run's records go, and the open journal.
#[derive(Debug)]
pub(crate) struct Recorder {
    run_dir: PathBuf,
    agent: String,
    enabled: bool,
    seq: u64,
    run_id: String,
    fsync: JournalFsync,
    /// Tools whose calls can have side effects: their `tool_call_started` is made durable
    /// before they run (under the `batched` policy).
    side_effects: HashSet<String>,
    /// Where the journal lives.
    store: Arc<dyn RunStore>,
    /// The run's journal, held for this process (opened with the first line, or brought by
    /// the [`crate::ResumePoint`] of a resumed run).
    writer: Option<Box<dyn JournalWriter>>,
}

impl Recorder {
    pub fn new(run_dir: PathBuf, run_id: String, agent: String, enabled: bool) -> Self {
        Recorder {
            run_dir,
            agent,
            enabled,
            seq: 0,
            run_id,
            fsync: JournalFsync::default(),
            side_effects: HashSet::new(),
            store: Arc::new(FileStore),
            writer: None,
        }
    }

    /// Continue an existing journal whose last line is `seq`, held by `writer`.
    pub fn continuing(mut self, seq: u64, writer: Box<dyn JournalWriter>) -> Self {
        self.seq = seq;
        self.writer = Some(writer);
        self
    }

    /// Keep the journal in `store` (before anything is written).
    pub fn set_store(&mut self, store: Arc<dyn RunStore>) {
        self.store = store;
    }

    /// Give the run another id (before anything is written): its folder follows.
    pub fn set_run_id(&mut self, run_id: String) {
        if let Some(logs) = self.run_dir.parent() {
            self.run_dir = logs.join(&run_id);
        }
        self.run_id = run_id;
    }

    /// The run's id, agent and folder.
    pub fn key(&self) -> RunKey {
        RunKey {
            run_id: self.run_id.clone(),
            agent: self.agent.clone(),
            run_dir: self.run_dir.clone(),
        }
    }

    /// The `seq` the next line gets (for the crash points, and this module's tests).
    #[cfg(any(test, feature = "crash-points"))]
    pub fn next_seq(&self) -> u64 {
        self.seq + 1
    }

    /// Give the run up (the run has finished).
    pub fn release_lock(&mut self) {
        if let Some(writer) = self.writer.take() {
            writer.release();
        }
    }

    /// Flush with `fsync` as `policy` says; `side_effects` names the tools whose calls count
    /// as side effects.
    pub fn with_fsync(mut self, policy: JournalFsync, side_effects: HashSet<String>) -> Self {
        self.fsync = policy;
        self.side_effects = side_effects;
        self
    }

    /// Whether `event` must be on the disk before the loop goes on.
    fn must_sync(&self, event: &RunEvent) -> bool {
        match self.fsync {
            JournalFsync::Always => true,
            JournalFsync::Never => false,
            JournalFsync::Batched => match event {
                RunEvent::ToolCallStarted { tool, .. } => self.side_effects.contains(tool),
                RunEvent::PhaseEnded { .. }
                | RunEvent::RunFinished { .. }
                | RunEvent::WorkerStarted { .. }
                | RunEvent::WorkersFinished { .. } => true,
                _ => false,
            },
        }
    }

    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    pub fn summary_path(&self) -> PathBuf {
        self.run_dir.join("run_summary.json")
    }

    pub fn transcript_path(&self) -> PathBuf {
        self.run_dir.join("transcript.jsonl")
    }

    fn open(&mut self) -> Result<&mut Box<dyn JournalWriter>, HarnessError> {
        if self.writer.is_none() {
            // A new run: its journal is created, held by this process (a resumed run brings
            // its writer).
            self.writer = Some(self.store.create(&self.key())?);
        }
        self.writer
            .as_mut()
            .ok_or_else(|| HarnessError::OpenTranscript {
                path: self.run_dir.join("transcript.jsonl").display().to_string(),
                reason: "not open".into(),
            })
    }

    /// The envelope `event` would get now, without recording it (stream pieces: seq 0).
    pub fn envelope(&mut self, event: RunEvent, seq: u64) -> EventEnvelope {
        let ts = now_stamp();
        Self::envelope_at(&self.run_id, event, seq, ts)
    }

    fn envelope_at(run_id: &str, event: RunEvent, seq: u64, ts: String) -> EventEnvelope {
        EventEnvelope {
            seq,
            ts,
            run_id: run_id.to_string(),
            schema_version: SCHEMA_VERSION,
            event,
        }
    }

    /// Append one event as a JSON line: `{"seq", "ts", "run_id", "schema_version", "event",
    /// ...fields}`, one `write` (a step's several lines: [`Recorder::append_all`], one
    /// `write` for them all), so a crash loses at most the line or step in flight. The
    /// sequence number is used only when the line is written.
    #[cfg(test)]
    pub fn append(&mut self, event: RunEvent) -> Result<EventEnvelope, HarnessError> {
        self.append_shown(event, false)
    }

    /// [`Recorder::append`], where `shown` says whether the returned envelope will be shown
    /// (handed to an event sink). An envelope that is neither written nor shown is not
    /// serialized or redacted at all: redaction is most of an iteration's cost without
    /// records.
    pub fn append_shown(
        &mut self,
        event: RunEvent,
        shown: bool,
    ) -> Result<EventEnvelope, HarnessError> {
        self.append_all(vec![event], shown)?
            .pop()
            .ok_or_else(|| HarnessError::Serialize {
                what: "a transcript event",
                reason: "no line was made for it".into(),
            })
    }

    /// Append the events one step committed, in order, as one batch
    /// ([`JournalWriter::append_lines`]: one `write` in the file store), durable before it
    /// returns when any of them must be. An envelope that is neither written nor shown is
    /// not serialized or redacted.
    pub fn append_all(
        &mut self,
        events: Vec<RunEvent>,
        shown: bool,
    ) -> Result<Vec<EventEnvelope>, HarnessError> {
        let mut sync = false;
        let mut records = Vec::with_capacity(events.len());
        let mut lines = Vec::with_capacity(events.len());
        let mut seq = self.seq;
        let ts = now_stamp();
        for event in events {
            sync |= self.must_sync(&event);
            seq += 1;
            let (record, line) = self.prepare(event, seq, ts.clone(), shown)?;
            records.push(record);
            lines.push(line);
        }
        if self.enabled && !records.is_empty() {
            let batch: Vec<JournalLine<'_>> = records
                .iter()
                .zip(&lines)
                .filter_map(|(record, line)| {
                    line.as_deref().map(|line| JournalLine {
                        seq: record.seq,
                        event: &record.event,
                        line,
                    })
                })
                .collect();
            self.open()?.append_lines(&batch, sync)?;
        }
        self.seq = seq;
        Ok(records)
    }

    /// `event`'s envelope as line `seq`, and its JSON line (redacted, with its newline) when
    /// records are on. An envelope that is neither written nor shown is not serialized.
    fn prepare(
        &self,
        event: RunEvent,
        seq: u64,
        ts: String,
        shown: bool,
    ) -> Result<(EventEnvelope, Option<Vec<u8>>), HarnessError> {
        let mut record = Self::envelope_at(&self.run_id, event, seq, ts);
        let serialize = |e: serde_json::Error| HarnessError::Serialize {
            what: "a transcript event",
            reason: e.to_string(),
        };
        // Every string of the line is redacted ([`lsm_sandbox::redact_json_secrets`]: the
        // secret values the program registered and the usual key shapes); what event sinks
        // print and stream is the redacted line too.
        if !self.enabled && !shown {
            return Ok((record, None));
        }
        // The line straight from the record; only when it might hold a secret does it go
        // the slow way (a JSON tree, every string redacted, the record rebuilt from it).
        // Room for a usual line at once (`to_vec` starts at 128 bytes and doubles: four
        // reallocations and copies for a line of a tool's result).
        let mut line = Vec::with_capacity(LINE_CAPACITY);
        write_envelope(&record, &mut line).map_err(|e| HarnessError::Serialize {
            what: "a transcript event",
            reason: e.to_string(),
        })?;
        if lsm_sandbox::json_may_hold_secrets(&line) {
            let mut value = serde_json::to_value(&record).map_err(serialize)?;
            if lsm_sandbox::redact_json_secrets(&mut value) {
                record = serde_json::from_value(value.clone()).map_err(serialize)?;
                line = serde_json::to_vec(&value).map_err(serialize)?;
            }
        }
        if !self.enabled {
            return Ok((record, None));
        }
        line.push(b'\n');
        Ok((record, Some(line)))
    }

    /// Write the summary atomically (temp file + rename), so a reader never sees half of it.
    pub fn write_summary(&mut self, summary: &RunSummary) -> Result<(), HarnessError> {
        if !self.enabled {
            return Ok(());
        }
        std::fs::create_dir_all(&self.run_dir).map_err(|e| HarnessError::CreateFolder {
            path: self.run_dir.display().to_string(),
            reason: e.to_string(),
        })?;
        if let Some(w) = self.writer.as_mut() {
            // Durability point: the journal is complete before the summary claims the end.
            let _ = w.sync();
        }
        // Redacted like the transcript: the summary repeats the run's error, the topic, ….
        let serialize = |e: serde_json::Error| HarnessError::Serialize {
            what: "the run summary",
            reason: e.to_string(),
        };
        let mut value = serde_json::to_value(summary).map_err(serialize)?;
        lsm_sandbox::redact_json_secrets(&mut value);
        let text = serde_json::to_vec_pretty(&value).map_err(serialize)?;
        let path = self.summary_path();
        // Atomic and durable: a temporary file of its own, on disk before the rename, and the
        // folder synced after it, so a crash or power loss leaves the old summary or the new.
        let write = || -> std::io::Result<()> {
            let mut tmp = tempfile::Builder::new()
                .prefix("run_summary.json.")
                .suffix(".tmp")
                .tempfile_in(&self.run_dir)?;
            tmp.write_all(&text)?;
            tmp.as_file().sync_all()?;
            tmp.persist(&path).map_err(|e| e.error)?;
            if cfg!(unix) {
                File::open(&self.run_dir)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|e| HarnessError::Summary {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        match self.writer.as_mut() {
            Some(w) => w.finished(&value),
            None => Ok(()),
        }
    }
}

/// Up to 8 clauses of `task` that state a rule: those starting with avoid, must, should,
/// do not, don't, without or no.
pub fn extract_constraints(task: &str) -> Vec<String> {
    const STARTS: [&str; 7] = [
        "avoid", "must", "should", "do not", "don't", "without", "no",
    ];
    task.split(['.', ';', '\n', '!', '?', ','])
        .map(str::trim)
        .filter(|clause| {
            let lower = clause.to_lowercase();
            STARTS.iter().any(|s| {
                lower.starts_with(s)
                    && lower[s.len()..]
                        .chars()
                        .next()
                        .is_none_or(|c| !c.is_alphanumeric())
            })
        })
        .take(8)
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests;
