//! [`PgMemory`]: agent memory in PostgreSQL, an `lsm_memory::MemoryBackend`.
//!
//! Every scope is in one table, `lsm_memories`: agent- and project-scope memories carry the
//! project's key (two projects on one database stay apart), global ones `''`. Full-text
//! search runs on a generated `tsvector` column under a GIN index (English stemming, no stop
//! words: the query's words are chosen by `lsm_memory::query_terms`, as for every store),
//! ranked with `ts_rank` (text weighs 1, tags 0.5, scores divided by the log of the length).
//! Times come from the store's clock, never the server's, so expiry means the same here as
//! in SQLite.
//!
//! Concurrency: a write first deletes the expired memories it can lock at once (`SKIP
//! LOCKED`: it never waits on another writer's pruning), then locks at most the one row it
//! changes, so writers never deadlock; storing the same fact at once from many processes
//! makes one memory (a unique index on the fact, and a retry when an insert loses the race).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use lsm_memory::{
    Clock, Hit, Matching, Memory, MemoryBackend, MemoryError, NewMemory, PutOutcome, Reach, Scope,
    SearchQuery, Status, new_memory_id, normalize_tags, refresh, scopes_wanted,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::OpError;
use crate::{Db, StoreError};

const COLUMNS: &str = "id, scope, owner_agent, text, tags, source_run_id, created_at, \
                       updated_at, expires_at, status";

/// The rows a reach covers: `$1` the project, `$2` the agent (NULL: every agent), `$3` the
/// scopes.
const REACH: &str = "((scope = 'agent' AND project = $1 AND ($2::text IS NULL OR owner_agent = $2)) \
     OR (scope = 'project' AND project = $1) OR scope = 'global') AND scope = ANY($3::text[])";

/// Attempts at storing a fact when concurrent writers keep winning the race to insert it.
const PUT_ATTEMPTS: usize = 5;

/// Agent memory in PostgreSQL for one project. Cheap to clone.
#[derive(Clone)]
pub struct PgMemory {
    db: Arc<Db>,
    project: String,
    clock: Clock,
}

impl std::fmt::Debug for PgMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgMemory")
            .field("db", &self.db)
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

/// The parameters of [`REACH`].
#[derive(Debug, Clone)]
struct ReachParams {
    project: String,
    agent: Option<String>,
    scopes: Vec<String>,
}

impl ReachParams {
    fn refs(&self) -> [&(dyn ToSql + Sync); 3] {
        [&self.project, &self.agent, &self.scopes]
    }
}

fn backend_error(e: StoreError) -> MemoryError {
    MemoryError::Backend(Box::new(e))
}

fn bad_row(reason: String) -> OpError {
    OpError::Store(StoreError::Query {
        what: "reading a memory",
        reason,
    })
}

fn memory(r: &Row) -> Result<Memory, OpError> {
    let scope: String = r.try_get(1)?;
    let status: String = r.try_get(9)?;
    Ok(Memory {
        id: r.try_get(0)?,
        scope: scope.parse().map_err(bad_row)?,
        owner_agent: r.try_get(2)?,
        text: r.try_get(3)?,
        tags: r.try_get(4)?,
        source_run_id: r.try_get(5)?,
        created_at: r.try_get(6)?,
        updated_at: r.try_get(7)?,
        expires_at: r.try_get(8)?,
        status: status.parse().map_err(bad_row)?,
    })
}

/// Delete the expired memories `reach` covers that no other writer is deleting now.
async fn prune(
    c: &tokio_postgres::Client,
    reach: &ReachParams,
    now: DateTime<Utc>,
) -> Result<usize, OpError> {
    let [p1, p2, p3] = reach.refs();
    let n = c
        .execute(
            &format!(
                "DELETE FROM lsm_memories WHERE id IN (SELECT id FROM lsm_memories \
                 WHERE {REACH} AND expires_at <= $4 FOR UPDATE SKIP LOCKED)"
            ),
            &[p1, p2, p3, &now],
        )
        .await?;
    if n > 0 {
        tracing::debug!(pruned = n, "expired memories pruned");
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// The memory `id` if `reach` covers it and it has not expired by `now`.
async fn live(
    c: &tokio_postgres::Client,
    reach: &ReachParams,
    id: &str,
    now: DateTime<Utc>,
) -> Result<Option<Memory>, OpError> {
    let [p1, p2, p3] = reach.refs();
    let row = c
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM lsm_memories WHERE {REACH} AND id = $4 \
                 AND (expires_at IS NULL OR expires_at > $5)"
            ),
            &[p1, p2, p3, &id, &now],
        )
        .await?;
    row.as_ref().map(memory).transpose()
}

impl PgMemory {
    /// The memories of `project` (any stable key naming it, such as its agents folder) in
    /// `db`, on the system clock.
    pub fn new(db: Arc<Db>, project: impl Into<String>) -> Self {
        PgMemory {
            db,
            project: project.into(),
            clock: Arc::new(Utc::now),
        }
    }

    /// Use `clock` for "now" (creation times, expiry).
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The project's key.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// The database.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    fn reach(&self, reach: &Reach, scopes: &[Scope]) -> Result<ReachParams, MemoryError> {
        reach.check()?;
        Ok(ReachParams {
            project: self.project.clone(),
            agent: match reach {
                Reach::Agent(a) => Some(a.clone()),
                Reach::Everyone => None,
            },
            scopes: scopes_wanted(scopes)
                .into_iter()
                .map(|s| s.as_str().to_string())
                .collect(),
        })
    }

    /// The project key a memory of `scope` is stored under.
    fn project_of(&self, scope: Scope) -> String {
        match scope {
            Scope::Agent | Scope::Project => self.project.clone(),
            Scope::Global => String::new(),
        }
    }
}

impl MemoryBackend for PgMemory {
    fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    fn put(&self, new: NewMemory) -> Result<PutOutcome, MemoryError> {
        let new = new.checked()?;
        let everyone = self.reach(&Reach::Everyone, &[])?;
        let project = self.project_of(new.scope);
        let (now, id) = (self.now(), new_memory_id());
        self.db
            .blocking("storing a memory", move |mut c| {
                let (new, everyone, project, id) =
                    (new.clone(), everyone.clone(), project.clone(), id.clone());
                async move {
                    prune(&c, &everyone, now).await?;
                    let scope = new.scope.as_str();
                    let status = new.status.as_str();
                    for _ in 0..PUT_ATTEMPTS {
                        let tx = c.transaction().await?;
                        let existing = tx
                            .query_opt(
                                "SELECT id, tags, status, expires_at <= $5 FROM lsm_memories \
                                 WHERE scope = $1 AND project = $2 AND owner_agent = $3 \
                                   AND md5(lower(text)) = md5(lower($4)) \
                                   AND lower(text) = lower($4) \
                                 FOR UPDATE",
                                &[&scope, &project, &new.owner_agent, &new.text, &now],
                            )
                            .await?;
                        if let Some(old) = &existing {
                            let old_id: String = old.try_get(0)?;
                            if old.try_get::<_, Option<bool>>(3)? == Some(true) {
                                // Expired (by this clock) and not pruned yet: it is gone.
                                tx.execute("DELETE FROM lsm_memories WHERE id = $1", &[&old_id])
                                    .await?;
                            } else {
                                let old_status: String = old.try_get(2)?;
                                let old_status =
                                    old_status.parse::<Status>().unwrap_or(Status::Candidate);
                                let r = refresh(old.try_get(1)?, old_status, &new.tags, new.status);
                                let row = tx
                                    .query_one(
                                        &format!(
                                            "UPDATE lsm_memories SET tags = $2, updated_at = $3, \
                                             expires_at = $4, status = $5, \
                                             source_run_id = coalesce($6, source_run_id) \
                                             WHERE id = $1 RETURNING {COLUMNS}"
                                        ),
                                        &[
                                            &old_id,
                                            &r.tags,
                                            &now,
                                            &new.expires_at,
                                            &r.status.as_str(),
                                            &new.source_run_id,
                                        ],
                                    )
                                    .await?;
                                let memory = memory(&row)?;
                                tx.commit().await?;
                                return Ok(PutOutcome {
                                    memory,
                                    created: false,
                                    newly_approved: r.newly_approved,
                                });
                            }
                        }
                        let inserted = tx
                            .query_opt(
                                &format!(
                                    "INSERT INTO lsm_memories (id, scope, project, owner_agent, \
                                       text, tags, source_run_id, created_at, updated_at, \
                                       expires_at, status) \
                                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10) \
                                     ON CONFLICT DO NOTHING RETURNING {COLUMNS}"
                                ),
                                &[
                                    &id,
                                    &scope,
                                    &project,
                                    &new.owner_agent,
                                    &new.text,
                                    &new.tags,
                                    &new.source_run_id,
                                    &now,
                                    &new.expires_at,
                                    &status,
                                ],
                            )
                            .await?;
                        if let Some(row) = inserted {
                            let memory = memory(&row)?;
                            tx.commit().await?;
                            return Ok(PutOutcome {
                                memory,
                                created: true,
                                newly_approved: new.status == Status::Approved,
                            });
                        }
                        // Another writer stored the same fact meanwhile: refresh theirs.
                        tx.rollback().await?;
                    }
                    Err(OpError::Store(StoreError::Query {
                        what: "storing a memory",
                        reason: format!(
                            "other writers kept storing the same fact; gave up after \
                             {PUT_ATTEMPTS} attempts"
                        ),
                    }))
                }
            })
            .inspect(|outcome| {
                tracing::debug!(id = %outcome.memory.id, scope = %outcome.memory.scope,
                    created = outcome.created, "memory stored");
            })
            .map_err(backend_error)
    }

    fn get(&self, reach: &Reach, id: &str) -> Result<Option<Memory>, MemoryError> {
        let reach = self.reach(reach, &[])?;
        let (id, now) = (id.to_string(), self.now());
        self.db
            .blocking("reading a memory", move |c| {
                let (reach, id) = (reach.clone(), id.clone());
                async move { live(&c, &reach, &id, now).await }
            })
            .map_err(backend_error)
    }

    fn approve(&self, reach: &Reach, id: &str) -> Result<(Memory, bool), MemoryError> {
        let reach = self.reach(reach, &[])?;
        let (key, now) = (id.to_string(), self.now());
        let found = self
            .db
            .blocking("approving a memory", move |c| {
                let (reach, id) = (reach.clone(), key.clone());
                async move {
                    prune(&c, &reach, now).await?;
                    let [p1, p2, p3] = reach.refs();
                    let changed = c
                        .query_opt(
                            &format!(
                                "UPDATE lsm_memories SET status = 'approved', updated_at = $5 \
                                 WHERE {REACH} AND id = $4 AND status = 'candidate' \
                                 AND (expires_at IS NULL OR expires_at > $5) \
                                 RETURNING {COLUMNS}"
                            ),
                            &[p1, p2, p3, &id, &now],
                        )
                        .await?;
                    if let Some(row) = changed {
                        return Ok(Some((memory(&row)?, true)));
                    }
                    Ok(live(&c, &reach, &id, now).await?.map(|m| (m, false)))
                }
            })
            .map_err(backend_error)?;
        found.ok_or_else(|| MemoryError::NotFound(id.to_string()))
    }

    fn remove(&self, reach: &Reach, id: &str) -> Result<Memory, MemoryError> {
        let reach = self.reach(reach, &[])?;
        let (key, now) = (id.to_string(), self.now());
        let removed = self
            .db
            .blocking("removing a memory", move |c| {
                let (reach, id) = (reach.clone(), key.clone());
                async move {
                    prune(&c, &reach, now).await?;
                    let [p1, p2, p3] = reach.refs();
                    let row = c
                        .query_opt(
                            &format!(
                                "DELETE FROM lsm_memories WHERE {REACH} AND id = $4 \
                                 AND (expires_at IS NULL OR expires_at > $5) \
                                 RETURNING {COLUMNS}"
                            ),
                            &[p1, p2, p3, &id, &now],
                        )
                        .await?;
                    row.as_ref().map(memory).transpose()
                }
            })
            .map_err(backend_error)?;
        let m = removed.ok_or_else(|| MemoryError::NotFound(id.to_string()))?;
        tracing::debug!(id = %m.id, scope = %m.scope, "memory removed");
        Ok(m)
    }

    fn search(&self, reach: &Reach, query: &SearchQuery) -> Result<Vec<Hit>, MemoryError> {
        let tags = normalize_tags(&query.tags)?;
        let words = match query.matching() {
            Matching::Everything => None,
            Matching::Words(terms) => Some(terms.join(" or ")),
            Matching::Nothing => return Ok(Vec::new()),
        };
        let reach = self.reach(reach, &query.scopes)?;
        let now = self.now();
        let (candidates, owner) = (query.include_candidates, query.owner.clone());
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        let (score, matches) = match words {
            // Weights of D, C, B (tags), A (text); normalization 1: divided by 1 + the log
            // of the length, so a short memory all about the words ranks above a long one
            // mentioning them once.
            Some(_) => (
                "ts_rank('{0.1, 0.2, 0.5, 1.0}', search, \
                 websearch_to_tsquery('lsm_memory', $9), 1)",
                "AND search @@ websearch_to_tsquery('lsm_memory', $9)",
            ),
            None => ("0::real", ""),
        };
        let sql = format!(
            "SELECT {COLUMNS}, {score} AS score FROM lsm_memories \
             WHERE {REACH} AND (expires_at IS NULL OR expires_at > $4) \
               AND ($5 OR status = 'approved') \
               AND ($6::text IS NULL OR owner_agent = $6) \
               AND tags @> $7::text[] {matches} \
             ORDER BY CASE scope WHEN 'agent' THEN 0 WHEN 'project' THEN 1 ELSE 2 END, \
               score DESC, updated_at DESC, id COLLATE \"C\" \
             LIMIT $8"
        );
        self.db
            .blocking("searching memories", move |c| {
                let (reach, owner, tags, words, sql) = (
                    reach.clone(),
                    owner.clone(),
                    tags.clone(),
                    words.clone(),
                    sql.clone(),
                );
                async move {
                    let [p1, p2, p3] = reach.refs();
                    let mut params: Vec<&(dyn ToSql + Sync)> =
                        vec![p1, p2, p3, &now, &candidates, &owner, &tags, &limit];
                    if let Some(w) = &words {
                        params.push(w);
                    }
                    let rows = c.query(&sql, &params).await?;
                    rows.iter()
                        .map(|r| {
                            let score: f32 = r.try_get(10)?;
                            Ok(Hit {
                                memory: memory(r)?,
                                score: f64::from(score),
                            })
                        })
                        .collect()
                }
            })
            .map_err(backend_error)
    }

    fn prune_expired(&self, reach: &Reach) -> Result<usize, MemoryError> {
        let reach = self.reach(reach, &[])?;
        let now = self.now();
        self.db
            .blocking("pruning expired memories", move |c| {
                let reach = reach.clone();
                async move { prune(&c, &reach, now).await }
            })
            .map_err(backend_error)
    }

    fn agents_with_memory(&self) -> Result<Vec<String>, MemoryError> {
        let project = self.project.clone();
        self.db
            .blocking("listing agents with memory", move |c| {
                let project = project.clone();
                async move {
                    let rows = c
                        .query(
                            "SELECT owner_agent FROM lsm_memories \
                             WHERE scope = 'agent' AND project = $1 \
                             GROUP BY owner_agent ORDER BY owner_agent COLLATE \"C\"",
                            &[&project],
                        )
                        .await?;
                    rows.iter()
                        .map(|r| r.try_get(0).map_err(OpError::from))
                        .collect()
                }
            })
            .map_err(backend_error)
    }
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
