//! The run store of a configuration: the run folders' files (the default), or PostgreSQL when
//! `[store] url` is set — `lsm-store-pg`'s [`PgRuns`] adapted to the harness's [`RunStore`],
//! and the lease watcher that renews a run's lease and carries a remote cancel to it.

use std::sync::Arc;

use anyhow::Result;
use lsm_harness::{
    HarnessError, Journal, JournalWriter, RunEvent, RunKey, RunStore, parse_journal,
};
use lsm_store_pg::{Db, Heartbeat, PgRuns, TakeOutcome};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::exit::usage;

/// This process's name as a lease owner: host, pid and a random part (a pid can come back).
pub fn owner_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    let rand = &lsm_harness::new_run_id()[16..];
    format!("{host}:{}:{rand}", std::process::id())
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
    let db = Db::connect(settings).map_err(|e| usage(format!("[store] url: {e}")))?;
    Ok(Some(PgRuns::new(db, owner_id(), config.store.lease())))
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
        let line = String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line));
        let topic = match event {
            RunEvent::RunStarted { topic, .. } => Some(topic.as_str()),
            _ => None,
        };
        self.runs
            .append(&self.run_id, seq, &line, topic)
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

/// The store every run of `runs` keeps its journal in.
pub fn store_of(runs: &PgRuns) -> Arc<dyn RunStore> {
    Arc::new(PgRunStore(runs.clone()))
}

/// Renew `run_id`'s lease every third of it until `done` is cancelled; cancel `stop` when
/// someone asks the run to stop (`lsm runs cancel`) or the lease is lost (another process
/// took the run over).
pub fn watch_lease(
    runs: PgRuns,
    run_id: String,
    stop: CancellationToken,
    done: CancellationToken,
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
                        eprintln!("run {run_id}: cancel requested; stopping at the next step");
                        stop.cancel();
                    }
                }
                Ok(Heartbeat::Lost) => {
                    if !done.is_cancelled() && !stop.is_cancelled() {
                        eprintln!(
                            "run {run_id}: its lease was lost (another process holds it); stopping"
                        );
                        stop.cancel();
                    }
                    return;
                }
                Err(e) => tracing::warn!("run {run_id}: cannot renew its lease: {e}"),
            }
        }
    })
}
