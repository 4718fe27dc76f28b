//! [`RunStore`]: where run journals live, behind one seam.
//!
//! The harness writes a run's journal through a [`JournalWriter`] that its store hands out
//! when the run is created or reopened, and that holds the run for this process until it is
//! released (the lock file of a run folder, the lease of a database row). Two stores exist:
//! [`FileStore`] here (the default: `transcript.jsonl` and `run.lock` in the run folder) and
//! PostgreSQL (crate `lsm-store-pg`, adapted by the composition root), for runs that must
//! outlive one machine. The store keeps lines exactly as the file journal holds them, so
//! [`crate::RunState::fold`] and [`crate::ResumePoint`] work the same over either.

use std::fs::{File, OpenOptions};
use std::io::{IoSlice, Write};
use std::path::PathBuf;

use lsm_run::event::RunEvent;

use crate::error::HarnessError;
use crate::journal::{Journal, read_journal, truncate_torn_tail};
use crate::lock::RunLock;

/// Which run: its id, its agent and its folder (where its summary and, for the file store,
/// its journal are written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunKey {
    /// The run's id.
    pub run_id: String,
    /// The agent it is a run of.
    pub agent: String,
    /// `<agents_folder>/<agent>/logs/<run_id>`.
    pub run_dir: PathBuf,
}

/// Where run journals live.
pub trait RunStore: Send + Sync + std::fmt::Debug {
    /// Start the journal of the new run `run`, held for this process.
    ///
    /// # Errors
    /// [`HarnessError::Locked`] or [`HarnessError::Leased`] when another process holds the
    /// run; the store cannot be written.
    fn create(&self, run: &RunKey) -> Result<Box<dyn JournalWriter>, HarnessError>;

    /// Take the existing run `run` for this process to continue, and read its journal (a
    /// torn last line, left by a crash while it was written, is cut off and reported in
    /// [`Journal::warning`]).
    ///
    /// # Errors
    /// As [`RunStore::create`]; the journal cannot be read.
    fn reopen(&self, run: &RunKey) -> Result<(Box<dyn JournalWriter>, Journal), HarnessError>;

    /// Read `run`'s journal without taking the run; `None` when the store has no line of it.
    ///
    /// # Errors
    /// The journal cannot be read.
    fn read(&self, run: &RunKey) -> Result<Option<Journal>, HarnessError>;
}

/// One line of a step's commit, for [`JournalWriter::append_lines`].
#[derive(Debug, Clone, Copy)]
pub struct JournalLine<'a> {
    /// Its journal line number.
    pub seq: u64,
    /// The event it records.
    pub event: &'a RunEvent,
    /// The JSON object and its closing newline.
    pub line: &'a [u8],
}

/// One run's journal, held for this process (dropping it releases the hold as well).
pub trait JournalWriter: Send + std::fmt::Debug {
    /// Append `line` (one JSON object and its closing newline) as journal line `seq`, which
    /// records `event`; durable before it returns when `sync` is set.
    ///
    /// # Errors
    /// [`HarnessError::Append`] when it cannot be written, the hold on the run lost
    /// included.
    fn append(
        &mut self,
        seq: u64,
        event: &RunEvent,
        line: &[u8],
        sync: bool,
    ) -> Result<(), HarnessError>;

    /// Append the lines one step committed, in order (each one JSON object and its closing
    /// newline); all durable before it returns when `sync` is set. A store that can write
    /// them at once should: the file store makes them one `write`. By default, one
    /// [`JournalWriter::append`] per line, then [`JournalWriter::sync`].
    ///
    /// # Errors
    /// As [`JournalWriter::append`]; lines before the one that failed may have been
    /// written.
    fn append_lines(&mut self, lines: &[JournalLine<'_>], sync: bool) -> Result<(), HarnessError> {
        for l in lines {
            self.append(l.seq, l.event, l.line, false)?;
        }
        if sync { self.sync() } else { Ok(()) }
    }

    /// Make every line appended so far durable.
    ///
    /// # Errors
    /// When that fails.
    fn sync(&mut self) -> Result<(), HarnessError>;

    /// The run has ended with `summary` (the JSON of `run_summary.json`, redacted): a store
    /// that keeps summaries keeps it.
    ///
    /// # Errors
    /// When it cannot be kept.
    fn finished(&mut self, summary: &serde_json::Value) -> Result<(), HarnessError>;

    /// Give the run up (another process may take it).
    fn release(self: Box<Self>);

    /// Where the journal is, for messages (a path, a database run).
    fn location(&self) -> String;
}

/// The default store: each run's journal is `transcript.jsonl` in its run folder, held by
/// the folder's `run.lock` ([`RunLock`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct FileStore;

impl FileStore {
    fn open(run: &RunKey, lock: RunLock) -> Result<Box<dyn JournalWriter>, HarnessError> {
        let path = run.run_dir.join("transcript.jsonl");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| HarnessError::OpenTranscript {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        Ok(Box::new(FileJournal {
            file,
            path,
            lock: Some(lock),
        }))
    }
}

impl RunStore for FileStore {
    fn create(&self, run: &RunKey) -> Result<Box<dyn JournalWriter>, HarnessError> {
        std::fs::create_dir_all(&run.run_dir).map_err(|e| HarnessError::CreateFolder {
            path: run.run_dir.display().to_string(),
            reason: e.to_string(),
        })?;
        let lock = RunLock::acquire(&run.run_dir)?;
        FileStore::open(run, lock)
    }

    fn reopen(&self, run: &RunKey) -> Result<(Box<dyn JournalWriter>, Journal), HarnessError> {
        // The lock first: the journal must not change while it is read and continued.
        let lock = RunLock::acquire(&run.run_dir)?;
        let path = run.run_dir.join("transcript.jsonl");
        let journal = read_journal(&path)?;
        if journal.warning.is_some() {
            // Appending after a torn line would leave a broken line in the middle.
            truncate_torn_tail(&path)?;
        }
        Ok((FileStore::open(run, lock)?, journal))
    }

    fn read(&self, run: &RunKey) -> Result<Option<Journal>, HarnessError> {
        let path = run.run_dir.join("transcript.jsonl");
        if !path.is_file() {
            return Ok(None);
        }
        let journal = read_journal(&path)?;
        Ok((!journal.events.is_empty()).then_some(journal))
    }
}

/// A run's `transcript.jsonl`, appended to, and its lock.
#[derive(Debug)]
struct FileJournal {
    file: File,
    path: PathBuf,
    lock: Option<RunLock>,
}

impl FileJournal {
    /// One `write` (`writev`) of `lines` (whole lines, where they are), then `fdatasync` when
    /// `sync` is set.
    fn write(&mut self, lines: &mut [IoSlice<'_>], sync: bool) -> Result<(), HarnessError> {
        write_all_vectored(&mut self.file, lines)
            .and_then(|()| if sync { self.file.sync_data() } else { Ok(()) })
            .map_err(|e| HarnessError::Append {
                path: self.path.display().to_string(),
                reason: e.to_string(),
            })
    }
}

/// Write all of `slices` to `file`, in order, with as few `writev` calls as the kernel allows
/// (`Write::write_all_vectored` is not stable yet): a short write goes on from where it
/// stopped, an interrupted one is retried.
fn write_all_vectored(
    file: &mut impl Write,
    mut slices: &mut [IoSlice<'_>],
) -> std::io::Result<()> {
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        match file.write_vectored(slices) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    "the file took no more bytes",
                ));
            }
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl JournalWriter for FileJournal {
    fn append(
        &mut self,
        _seq: u64,
        _event: &RunEvent,
        line: &[u8],
        sync: bool,
    ) -> Result<(), HarnessError> {
        // One `write` of the line and its newline, so a crash loses at most the line in
        // flight.
        self.write(&mut [IoSlice::new(line)], sync)
    }

    fn append_lines(&mut self, lines: &[JournalLine<'_>], sync: bool) -> Result<(), HarnessError> {
        // A step's lines in one `writev` of the lines where they are (joining them first
        // copied every line, a tool's whole result, into fresh memory each step): a crash
        // loses at most the step in flight, whose effect had not started (the loop performs
        // it after this returns); a line torn at the end is cut off when the run is resumed.
        let mut slices: Vec<IoSlice<'_>> = lines.iter().map(|l| IoSlice::new(l.line)).collect();
        self.write(&mut slices, sync)
    }

    fn sync(&mut self) -> Result<(), HarnessError> {
        self.file.sync_data().map_err(|e| HarnessError::Append {
            path: self.path.display().to_string(),
            reason: e.to_string(),
        })
    }

    fn finished(&mut self, _summary: &serde_json::Value) -> Result<(), HarnessError> {
        // `run_summary.json` beside the journal is the file store's record of the end.
        Ok(())
    }

    fn release(mut self: Box<Self>) {
        if let Some(lock) = self.lock.take() {
            lock.release();
        }
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `most` bytes a call and is interrupted every third call.
    struct Trickle {
        got: Vec<u8>,
        most: usize,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls % 3 == 0 {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(self.most);
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_batch_is_written_whole_through_short_and_interrupted_writes() {
        let lines: [&[u8]; 4] = [b"{\"seq\":1}\n", b"", b"{\"seq\":2,\"x\":\"abc\"}\n", b"\n"];
        for most in [1, 4, 7, 100] {
            let mut w = Trickle {
                got: Vec::new(),
                most,
                calls: 0,
            };
            let mut slices: Vec<IoSlice<'_>> = lines.iter().map(|l| IoSlice::new(l)).collect();
            write_all_vectored(&mut w, &mut slices).unwrap();
            assert_eq!(w.got, lines.concat(), "at most {most} bytes a write");
        }
        // A writer that takes nothing is an error, not a loop.
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Ok(0)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut slices = [IoSlice::new(b"x")];
        let err = write_all_vectored(&mut Full, &mut slices).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WriteZero);
    }
}
