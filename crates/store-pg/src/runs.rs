//! [`PgRuns`]: run journals, leases and the queue of runs.
//!
//! A run's row says who drives it (`lease_owner`) and until when (`lease_until`); the owner
//! renews the lease by [`PgRuns::heartbeat`]. A run is claimable when it is queued, or when
//! it is running and its lease has run out (its driver died or lost the network). Every
//! journal append checks the lease in the same statement, so once another process has taken
//! a run over, the old driver's appends fail ([`StoreError::LeaseLost`]) and nothing it does
//! afterwards reaches the journal.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio_postgres::Row;

use crate::{Db, StoreError};

mod journal;

/// The statuses of a run that has ended.
pub const FINISHED_STATUSES: &[&str] = &["completed", "stopped", "failed", "cancelled"];

/// One run as the store knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRow {
    /// The run's id.
    pub run_id: String,
    /// The agent.
    pub agent: String,
    /// The task or topic (filled in when the run starts, or at submission).
    pub topic: String,
    /// `queued`, `running`, `completed`, `stopped`, `failed` or `cancelled`.
    pub status: String,
    /// How to start it (what was submitted).
    pub request: Value,
    /// When it was stored (RFC 3339, UTC).
    pub created_at: String,
    /// When a process first took it.
    pub started_at: Option<String>,
    /// When it ended.
    pub finished_at: Option<String>,
    /// Who drives it.
    pub lease_owner: Option<String>,
    /// Until when, unless renewed.
    pub lease_until: Option<String>,
    /// Whether the lease has run out (by the server's clock).
    pub lease_expired: bool,
    /// How many times it was taken.
    pub attempts: i32,
    /// Whether someone asked it to stop.
    pub cancel_requested: bool,
    /// Its journal's last line.
    pub last_seq: i64,
    /// Its summary, once ended.
    pub summary: Option<Value>,
}

const COLUMNS: &str = "run_id, agent, topic, status, request, \
    to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
    to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
    to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
    lease_owner, \
    to_char(lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
    coalesce(lease_until < now(), true), attempts, cancel_requested, last_seq, summary";

fn row(r: &Row) -> RunRow {
    RunRow {
        run_id: r.get(0),
        agent: r.get(1),
        topic: r.get(2),
        status: r.get(3),
        request: r.get(4),
        created_at: r.get(5),
        started_at: r.get(6),
        finished_at: r.get(7),
        lease_owner: r.get(8),
        lease_until: r.get(9),
        lease_expired: r.get(10),
        attempts: r.get(11),
        cancel_requested: r.get(12),
        last_seq: r.get(13),
        summary: r.get(14),
    }
}

/// What [`PgRuns::heartbeat`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    /// The lease is renewed; `cancel_requested` says whether someone asked the run to stop.
    Held {
        /// Stop the run.
        cancel_requested: bool,
    },
    /// Another process holds the run now, or it ended: stop driving it.
    Lost,
}

/// What [`PgRuns::take`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeOutcome {
    /// This process holds the run now.
    Taken,
    /// A live lease of another process holds it.
    Held {
        /// Who.
        owner: String,
        /// Until when, unless renewed.
        until: String,
    },
    /// It has ended.
    Finished {
        /// How.
        status: String,
    },
}

/// What [`PgRuns::cancel`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Nobody was driving it (queued, or its driver gone): it is cancelled now.
    Cancelled,
    /// Its driver is asked to stop it; it will within one heartbeat.
    Requested,
    /// It had already ended.
    AlreadyFinished {
        /// How.
        status: String,
    },
    /// There is no such run.
    NotFound,
}

/// Which runs [`PgRuns::list`] returns.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this agent's.
    pub agent: Option<String>,
    /// Only these statuses (all when empty).
    pub statuses: Vec<String>,
    /// At most this many, newest first (all when `None`).
    pub limit: Option<i64>,
}

/// Runs in PostgreSQL, as seen by one process (`owner`), which holds leases of `lease`.
#[derive(Debug, Clone)]
pub struct PgRuns {
    db: Arc<Db>,
    owner: String,
    lease: Duration,
}

impl PgRuns {
    /// The runs of `db`, for the process `owner` (unique per process: it fences appends),
    /// whose leases last `lease` unless renewed.
    pub fn new(db: Arc<Db>, owner: impl Into<String>, lease: Duration) -> Self {
        PgRuns {
            db,
            owner: owner.into(),
            lease,
        }
    }

    /// The database.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// This process's name as a lease owner.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// How long a lease lasts unless renewed.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    fn lease_secs(&self) -> f64 {
        self.lease.as_secs_f64()
    }

    /// Store a queued run for a worker to take.
    ///
    /// # Errors
    /// A run with this id exists; the database fails.
    pub async fn submit(
        &self,
        run_id: &str,
        agent: &str,
        topic: &str,
        request: Value,
    ) -> Result<(), StoreError> {
        let (run_id, agent, topic) = (run_id.to_string(), agent.to_string(), topic.to_string());
        self.db
            .run("queueing a run", move |c| {
                let (run_id, agent, topic, request) = (
                    run_id.clone(),
                    agent.clone(),
                    topic.clone(),
                    request.clone(),
                );
                async move {
                    c.execute(
                        "INSERT INTO lsm_runs (run_id, agent, topic, status, request) \
                         VALUES ($1, $2, $3, 'queued', $4)",
                        &[&run_id, &agent, &topic, &request],
                    )
                    .await?;
                    Ok(())
                }
            })
            .await
    }

    /// Take the oldest claimable run (queued, or running with its lease run out) of
    /// `agents` (any agent when empty) for this process, skipping runs other workers are
    /// taking at this moment.
    ///
    /// # Errors
    /// The database fails.
    pub async fn claim(&self, agents: &[String]) -> Result<Option<RunRow>, StoreError> {
        let (owner, secs, agents) = (self.owner.clone(), self.lease_secs(), agents.to_vec());
        self.db
            .run("claiming a run", move |c| {
                let (owner, agents) = (owner.clone(), agents.clone());
                async move {
                    let sql = format!(
                        "UPDATE lsm_runs r SET status = 'running', lease_owner = $1, \
                         lease_until = now() + make_interval(secs => $2), \
                         attempts = r.attempts + 1, started_at = coalesce(r.started_at, now()) \
                         WHERE r.run_id = ( \
                           SELECT run_id FROM lsm_runs \
                           WHERE (status = 'queued' OR (status = 'running' AND \
                                  (lease_until IS NULL OR lease_until < now()))) \
                             AND NOT cancel_requested \
                             AND (cardinality($3::text[]) = 0 OR agent = ANY($3)) \
                           ORDER BY created_at, run_id \
                           FOR UPDATE SKIP LOCKED LIMIT 1) \
                         RETURNING {COLUMNS}"
                    );
                    let found = c.query_opt(&sql, &[&owner, &secs, &agents]).await?;
                    Ok(found.as_ref().map(row))
                }
            })
            .await
    }

    /// Take the run `run_id` (of `agent`) for this process to drive now: a new run is
    /// created running, a queued one or one whose lease ran out is taken over; one this
    /// process already holds stays held.
    ///
    /// # Errors
    /// The database fails.
    pub fn take(&self, run_id: &str, agent: &str) -> Result<TakeOutcome, StoreError> {
        let (run_id, agent, owner, secs) = (
            run_id.to_string(),
            agent.to_string(),
            self.owner.clone(),
            self.lease_secs(),
        );
        self.db.blocking("taking a run", move |c| {
            let (run_id, agent, owner) = (run_id.clone(), agent.clone(), owner.clone());
            async move {
                let taken = c
                    .query_opt(
                        "INSERT INTO lsm_runs (run_id, agent, status, lease_owner, lease_until, \
                           attempts, started_at) \
                         VALUES ($1, $2, 'running', $3, now() + make_interval(secs => $4), 1, now()) \
                         ON CONFLICT (run_id) DO UPDATE SET status = 'running', \
                           lease_owner = EXCLUDED.lease_owner, lease_until = EXCLUDED.lease_until, \
                           attempts = lsm_runs.attempts + \
                             (lsm_runs.lease_owner IS DISTINCT FROM EXCLUDED.lease_owner)::int, \
                           started_at = coalesce(lsm_runs.started_at, now()) \
                         WHERE lsm_runs.status IN ('queued', 'running') \
                           AND (lsm_runs.lease_owner = EXCLUDED.lease_owner \
                                OR lsm_runs.lease_owner IS NULL OR lsm_runs.lease_until < now()) \
                         RETURNING run_id",
                        &[&run_id, &agent, &owner, &secs],
                    )
                    .await?;
                if taken.is_some() {
                    return Ok(TakeOutcome::Taken);
                }
                let r = c
                    .query_one(
                        &format!("SELECT {COLUMNS} FROM lsm_runs WHERE run_id = $1"),
                        &[&run_id],
                    )
                    .await
                    .map(|r| row(&r))?;
                Ok(if FINISHED_STATUSES.contains(&r.status.as_str()) {
                    TakeOutcome::Finished { status: r.status }
                } else {
                    TakeOutcome::Held {
                        owner: r.lease_owner.unwrap_or_default(),
                        until: r.lease_until.unwrap_or_default(),
                    }
                })
            }
        })
    }

    /// Renew this process's lease of `run_id`; says whether someone asked the run to stop.
    ///
    /// # Errors
    /// The database fails.
    pub async fn heartbeat(&self, run_id: &str) -> Result<Heartbeat, StoreError> {
        let (run_id, owner, secs) = (run_id.to_string(), self.owner.clone(), self.lease_secs());
        self.db
            .run("renewing a lease", move |c| {
                let (run_id, owner) = (run_id.clone(), owner.clone());
                async move {
                    let r = c
                        .query_opt(
                            "UPDATE lsm_runs SET lease_until = now() + make_interval(secs => $3) \
                             WHERE run_id = $1 AND lease_owner = $2 AND status = 'running' \
                             RETURNING cancel_requested",
                            &[&run_id, &owner, &secs],
                        )
                        .await?;
                    Ok(match r {
                        Some(r) => Heartbeat::Held {
                            cancel_requested: r.get(0),
                        },
                        None => Heartbeat::Lost,
                    })
                }
            })
            .await
    }

    /// Give the run up without ending it (another process may take it at once).
    ///
    /// # Errors
    /// The database fails.
    pub fn release(&self, run_id: &str) -> Result<(), StoreError> {
        let (run_id, owner) = (run_id.to_string(), self.owner.clone());
        self.db.blocking("releasing a lease", move |c| {
            let (run_id, owner) = (run_id.clone(), owner.clone());
            async move {
                c.execute(
                    "UPDATE lsm_runs SET lease_owner = NULL, lease_until = NULL \
                     WHERE run_id = $1 AND lease_owner = $2 AND status = 'running'",
                    &[&run_id, &owner],
                )
                .await?;
                Ok(())
            }
        })
    }

    /// The run `run_id`, if there is one.
    ///
    /// # Errors
    /// The database fails.
    pub async fn get(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        let run_id = run_id.to_string();
        self.db
            .run("reading a run", move |c| {
                let run_id = run_id.clone();
                async move {
                    let r = c
                        .query_opt(
                            &format!("SELECT {COLUMNS} FROM lsm_runs WHERE run_id = $1"),
                            &[&run_id],
                        )
                        .await?;
                    Ok(r.as_ref().map(row))
                }
            })
            .await
    }

    /// [`PgRuns::get`] for synchronous callers.
    ///
    /// # Errors
    /// The database fails.
    pub fn get_blocking(&self, run_id: &str) -> Result<Option<RunRow>, StoreError> {
        let run_id = run_id.to_string();
        self.db.blocking("reading a run", move |c| {
            let run_id = run_id.clone();
            async move {
                let r = c
                    .query_opt(
                        &format!("SELECT {COLUMNS} FROM lsm_runs WHERE run_id = $1"),
                        &[&run_id],
                    )
                    .await?;
                Ok(r.as_ref().map(row))
            }
        })
    }

    /// The runs `filter` selects, oldest first.
    ///
    /// # Errors
    /// The database fails.
    pub async fn list(&self, filter: &ListFilter) -> Result<Vec<RunRow>, StoreError> {
        let filter = filter.clone();
        self.db
            .run("listing runs", move |c| {
                let filter = filter.clone();
                async move {
                    let sql = format!(
                        "SELECT * FROM (SELECT {COLUMNS}, created_at AS created FROM lsm_runs \
                         WHERE ($1::text IS NULL OR agent = $1) \
                           AND (cardinality($2::text[]) = 0 OR status = ANY($2)) \
                         ORDER BY created_at DESC, run_id DESC LIMIT $3) newest \
                         ORDER BY created, run_id"
                    );
                    let limit = filter.limit.unwrap_or(i64::MAX);
                    let rows = c
                        .query(&sql, &[&filter.agent, &filter.statuses, &limit])
                        .await?;
                    Ok(rows.iter().map(row).collect())
                }
            })
            .await
    }

    /// Ask `run_id` to stop: a run nobody drives ends at once, a driven one is stopped by
    /// its driver at its next heartbeat.
    ///
    /// # Errors
    /// The database fails.
    pub async fn cancel(&self, run_id: &str) -> Result<CancelOutcome, StoreError> {
        let run_id = run_id.to_string();
        self.db
            .run("cancelling a run", move |c| {
                let run_id = run_id.clone();
                async move {
                    let r = c
                        .query_opt(
                            "UPDATE lsm_runs SET cancel_requested = true, \
                               status = CASE WHEN status = 'queued' OR lease_until IS NULL \
                                             OR lease_until < now() \
                                        THEN 'cancelled' ELSE status END, \
                               finished_at = CASE WHEN status = 'queued' OR lease_until IS NULL \
                                             OR lease_until < now() \
                                        THEN now() ELSE finished_at END, \
                               lease_owner = CASE WHEN status = 'queued' OR lease_until IS NULL \
                                             OR lease_until < now() \
                                        THEN NULL ELSE lease_owner END \
                             WHERE run_id = $1 AND status IN ('queued', 'running') \
                             RETURNING status",
                            &[&run_id],
                        )
                        .await?;
                    if let Some(r) = r {
                        let status: String = r.get(0);
                        return Ok(if status == "cancelled" {
                            CancelOutcome::Cancelled
                        } else {
                            CancelOutcome::Requested
                        });
                    }
                    let r = c
                        .query_opt("SELECT status FROM lsm_runs WHERE run_id = $1", &[&run_id])
                        .await?;
                    Ok(match r {
                        Some(r) => CancelOutcome::AlreadyFinished { status: r.get(0) },
                        None => CancelOutcome::NotFound,
                    })
                }
            })
            .await
    }
}

#[cfg(test)]
#[path = "runs_tests.rs"]
mod tests;
