//! The run store of a configuration: the run folders' files (the default; [`run_folder`]
//! finds one), or PostgreSQL when `[store] url` is set — `lsm-store-pg`'s [`PgRuns`] adapted
//! to the harness's [`RunStore`] — and the lease watcher that renews a run's lease and
//! carries a remote cancel to it. [`list`] reads the runs of either store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Result;
use lsm_harness::{
    HarnessError, Journal, JournalLine, JournalWriter, RunEvent, RunKey, RunStore, parse_journal,
};
/// The PostgreSQL store's types a front end meets: the runs ([`pg_runs`]), a cancel's outcome,
/// the statuses of a finished run.
pub use lsm_store_pg::{CancelOutcome, FINISHED_STATUSES, PgRuns};
use lsm_store_pg::{Db, Heartbeat, TakeOutcome};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::usage;
use crate::notice::{Notice, Notify};

pub mod legacy;
pub mod list;

/// This process's name as a lease owner: host, pid and a random part (a pid can come back).
pub fn owner_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    let rand = &lsm_harness::new_run_id()[16..];
    format!("{host}:{}:{rand}", std::process::id())
}

/// The folder of the run `run_id` under `root` (`<root>/<agent>/logs/<run_id>`, holding its
/// transcript), when there is one. An id that is not a folder's name (`..`, a path) finds
/// nothing.
pub fn run_folder(root: &Path, run_id: &str) -> Option<PathBuf> {
    let valid = !run_id.is_empty()
        && run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        return None;
    }
    std::fs::read_dir(root).ok().and_then(|agents| {
        agents
            .flatten()
            .map(|a| a.path().join("logs").join(run_id))
            .find(|d| d.join("transcript.jsonl").is_file())
    })
}

/// The PostgreSQL runs of `config`, when `[store] url` is set (connecting, and migrating
/// the schema).
///
/// # Errors
/// A usage error when the server cannot be reached or the settings are wrong.
pub fn pg_runs(config: &Config) -> Result<Option<PgRuns>> {
    let Some(settings) = config.store.settings() else {
        return Ok(None);
    };
    let db = shared_db(settings)?;
    Ok(Some(PgRuns::new(db, owner_id(), config.store.lease())))
}

/// The process's one connection pool to the database `settings` name (made, and the schema
/// migrated, on first use): the run store, every run's memory and the commands share it.
///
/// # Errors
/// A usage error when the server cannot be reached or the settings are wrong.
pub fn shared_db(settings: lsm_store_pg::PgSettings) -> Result<Arc<Db>> {
    static POOLS: std::sync::Mutex<Vec<Arc<Db>>> = std::sync::Mutex::new(Vec::new());
    let mut pools = POOLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(db) = pools.iter().find(|db| *db.settings() == settings) {
        return Ok(Arc::clone(db));
    }
    let db = Db::connect(settings).map_err(|e| usage(format!("[store] url: {e}")))?;
    pools.push(Arc::clone(&db));
    Ok(db)
}

/// [`PgRuns`] as a harness [`RunStore`].
#[derive(Debug, Clone)]
pub struct PgRunStore(pub PgRuns);

impl PgRunStore {
    fn take(&self, key: &RunKey) -> Result<(), HarnessError> {
        match self.0.take(&key.run_id, &key.agent) {
            Ok(TakeOutcome::Taken) => Ok(()),
            Ok(TakeOutcome::Held { owner, until }) => Err(HarnessError::Leased {
                run_id: key.run_id.clone(),
                holder: format!("{owner} (lease until {until})"),
            }),
            Ok(TakeOutcome::Finished { status }) => Err(HarnessError::Resume {
                run_dir: key.run_id.clone(),
                reason: format!("it has already finished ({status}); start a new run instead"),
            }),
            Err(e) => Err(HarnessError::Lock {
                path: location(&key.run_id),
                reason: e.to_string(),
            }),
        }
    }

    fn journal(&self, run_id: &str) -> Result<Journal, HarnessError> {
        let lines = self.0.read(run_id).map_err(|e| HarnessError::ReadJournal {
            path: location(run_id),
            reason: e.to_string(),
        })?;
        parse_journal(&lines.join("\n"), &location(run_id))
    }
}

fn location(run_id: &str) -> String {
    format!("the PostgreSQL journal of run {run_id}")
}

impl RunStore for PgRunStore {
    fn create(&self, key: &RunKey) -> Result<Box<dyn JournalWriter>, HarnessError> {
        self.take(key)?;
        Ok(Box::new(PgJournal {
            runs: self.0.clone(),
            run_id: key.run_id.clone(),
        }))
    }

    fn reopen(&self, key: &RunKey) -> Result<(Box<dyn JournalWriter>, Journal), HarnessError> {
        self.take(key)?;
        let writer = Box::new(PgJournal {
            runs: self.0.clone(),
            run_id: key.run_id.clone(),
        });
        Ok((writer, self.journal(&key.run_id)?))
    }

    fn read(&self, key: &RunKey) -> Result<Option<Journal>, HarnessError> {
        let journal = self.journal(&key.run_id)?;
        Ok((!journal.events.is_empty()).then_some(journal))
    }
}

/// One run's journal in PostgreSQL; every line is committed (durable) when appended.
#[derive(Debug)]
struct PgJournal {
    runs: PgRuns,
    run_id: String,
}

impl JournalWriter for PgJournal {
    fn append(
        &mut self,
        seq: u64,
        event: &RunEvent,
        line: &[u8],
        _sync: bool,
    ) -> Result<(), HarnessError> {
        let line = journal_text(line);
        let topic = match event {
            RunEvent::RunStarted(lsm_harness::event::RunStarted { topic, .. }) => {
                Some(topic.as_str())
            }
            _ => None,
        };
        self.runs
            .append(&self.run_id, seq, &line, topic)
            .map_err(|e| HarnessError::Append {
                path: location(&self.run_id),
                reason: e.to_string(),
            })
    }

    fn append_lines(&mut self, lines: &[JournalLine<'_>], _sync: bool) -> Result<(), HarnessError> {
        // A step's lines in one statement and one commit.
        let topic = lines.iter().find_map(|l| match l.event {
            RunEvent::RunStarted(lsm_harness::event::RunStarted { topic, .. }) => {
                Some(topic.as_str())
            }
            _ => None,
        });
        let rows: Vec<(u64, String)> = lines
            .iter()
            .map(|l| (l.seq, journal_text(l.line)))
            .collect();
        self.runs
            .append_lines(&self.run_id, &rows, topic)
            .map_err(|e| HarnessError::Append {
                path: location(&self.run_id),
                reason: e.to_string(),
            })
    }

    fn sync(&mut self) -> Result<(), HarnessError> {
        Ok(())
    }

    fn finished(&mut self, summary: &serde_json::Value) -> Result<(), HarnessError> {
        let status = summary
            .get("status")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("failed")
            .to_string();
        self.runs
            .finish(&self.run_id, &status, summary.clone())
            .map_err(|e| HarnessError::Summary {
                path: location(&self.run_id),
                reason: e.to_string(),
            })
    }

    fn release(self: Box<Self>) {
        // A finished run has no lease left; an unfinished one is handed back at once.
        if let Err(e) = self.runs.release(&self.run_id) {
            tracing::warn!("cannot give run {} back: {e}", self.run_id);
        }
    }

    fn location(&self) -> String {
        location(&self.run_id)
    }
}

/// A journal line as the database keeps it: text, without its closing newline.
fn journal_text(line: &[u8]) -> String {
    String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line)).into_owned()
}

/// The store every run of `runs` keeps its journal in.
pub fn store_of(runs: &PgRuns) -> Arc<dyn RunStore> {
    Arc::new(PgRunStore(runs.clone()))
}

/// Renew `run_id`'s lease every third of it until `done` is cancelled; cancel `stop` when
/// someone asks the run to stop (`lsm runs cancel`) or the lease is lost (another process
/// took the run over), and tell `notify` why.
pub fn watch_lease(
    runs: PgRuns,
    run_id: String,
    stop: CancellationToken,
    done: CancellationToken,
    notify: Notify,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let every = runs.lease() / 3;
        loop {
            tokio::select! {
                () = done.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            match runs.heartbeat(&run_id).await {
                Ok(Heartbeat::Held {
                    cancel_requested: false,
                }) => {}
                Ok(Heartbeat::Held {
                    cancel_requested: true,
                }) => {
                    if !stop.is_cancelled() {
                        notify(Notice::CancelRequested {
                            run_id: run_id.clone(),
                        });
                        stop.cancel();
                    }
                }
                Ok(Heartbeat::Lost) => {
                    if !done.is_cancelled() && !stop.is_cancelled() {
                        notify(Notice::LeaseLost {
                            run_id: run_id.clone(),
                        });
                        stop.cancel();
                    }
                    return;
                }
                Err(e) => tracing::warn!("run {run_id}: cannot renew its lease: {e}"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    //! The `RunStore` conformance suite, run against both stores: the run folder's files and
    //! PostgreSQL.
    use std::time::Duration;

    use lsm_harness::{EventEnvelope, FileStore, RunEvent, RunKey, RunStore};
    use serde_json::json;

    use super::*;

    fn key(dir: &std::path::Path, run_id: &str) -> RunKey {
        RunKey {
            run_id: run_id.into(),
            agent: "general".into(),
            run_dir: dir.join("general").join("logs").join(run_id),
        }
    }

    fn line(run_id: &str, seq: u64, event: &RunEvent) -> Vec<u8> {
        let envelope = EventEnvelope {
            seq,
            ts: "2026-11-25T00:00:00.000Z".into(),
            run_id: run_id.into(),
            schema_version: lsm_harness::SCHEMA_VERSION,
            event: event.clone(),
        };
        let mut bytes = serde_json::to_vec(&envelope).unwrap();
        bytes.push(b'\n');
        bytes
    }

    fn started() -> RunEvent {
        RunEvent::from_parts(
            "run_started",
            json!({"agent": "general", "topic": "the task", "tool_allowlist": [],
                   "provider": "scripted", "model": "m", "max_tokens_budget": 1000,
                   "context_window_strategy": "compact"}),
        )
        .unwrap()
    }

    fn note(n: u64) -> RunEvent {
        RunEvent::from_parts(
            "llm_error",
            json!({"label": "__default__", "error": format!("e{n}")}),
        )
        .unwrap()
    }

    /// One store seen by two processes: `a` and `b`.
    fn conformance(a: &dyn RunStore, b: &dyn RunStore, dir: &std::path::Path) {
        let k = key(dir, "run1");
        assert!(a.read(&k).unwrap().is_none(), "no journal before the run");
        let mut w = a.create(&k).unwrap();
        w.append(1, &started(), &line("run1", 1, &started()), true)
            .unwrap();
        w.append(2, &note(2), &line("run1", 2, &note(2)), false)
            .unwrap();
        w.sync().unwrap();
        // Another process can read it, not take it, while it is held.
        let read = b.read(&k).unwrap().unwrap();
        assert_eq!(read.events.len(), 2);
        assert_eq!(read.events[1].seq, 2);
        assert!(read.warning.is_none());
        let refused = b.reopen(&k).unwrap_err();
        assert!(
            matches!(
                refused,
                HarnessError::Locked { .. } | HarnessError::Leased { .. }
            ),
            "{refused}"
        );
        // Given up, it is taken over and continued where it was.
        w.release();
        let (mut w2, journal) = b.reopen(&k).unwrap();
        assert_eq!(
            journal.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(matches!(
            journal.events[0].event,
            RunEvent::RunStarted(lsm_harness::event::RunStarted { .. })
        ));
        w2.append(3, &note(3), &line("run1", 3, &note(3)), true)
            .unwrap();
        w2.finished(&json!({"status": "completed"})).unwrap();
        w2.release();
        let all = a.read(&k).unwrap().unwrap();
        assert_eq!(all.events.len(), 3);
        // Two runs are independent.
        let k2 = key(dir, "run2");
        let w3 = a.create(&k2).unwrap();
        assert!(b.read(&k2).unwrap().is_none());
        w3.release();
    }

    #[test]
    fn the_file_store_keeps_the_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        conformance(&FileStore, &FileStore, dir.path());
    }

    #[test]
    fn the_postgres_store_keeps_the_conformance_suite() {
        let Some(db) = lsm_test_support::pg::database("postgres_run_store_conformance") else {
            return;
        };
        let settings = lsm_store_pg::PgSettings::new(&db.url).with_schema(&db.schema);
        let conn = Db::connect(settings).unwrap();
        let a = PgRunStore(PgRuns::new(Arc::clone(&conn), "a", Duration::from_secs(60)));
        let b = PgRunStore(PgRuns::new(conn, "b", Duration::from_secs(60)));
        let dir = tempfile::tempdir().unwrap();
        conformance(&a, &b, dir.path());
        // The end is recorded with the run, and a finished run is not taken again.
        let row = a.0.get_blocking("run1").unwrap().unwrap();
        assert_eq!(row.status, "completed");
        assert_eq!(row.topic, "the task");
        let e = b.reopen(&key(dir.path(), "run1")).unwrap_err();
        assert!(e.to_string().contains("already finished"), "{e}");
    }
}
