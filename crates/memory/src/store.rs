//! [`MemoryStore`]: where each scope's database lives, and every operation on memories.
//!
//! The store's methods block (SQLite); async callers run them with
//! `tokio::task::spawn_blocking` (the tools and the standing-context provider do). Each
//! operation opens its own connection, so any number of threads and processes can use the
//! same files at once: WAL lets readers run beside a writer, writers take the lock up front
//! (`BEGIN IMMEDIATE`) and wait for each other (busy timeout, then retries), and reads never
//! create a file that does not exist yet.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::backend::{Matching, MemoryBackend, new_memory_id, refresh, scopes_wanted};
use crate::model::{check_agent_name, normalize_tags};
use crate::schema::{open, with_retry};
use crate::{Hit, Memory, MemoryError, NewMemory, PutOutcome, Reach, Scope, SearchQuery, Status};

/// File name of an agent's database, inside `<agents_folder>/<agent>/memory/`.
pub const AGENT_DB_FILE: &str = "memory.db";
/// File name of the project database, directly inside the agents folder.
pub const PROJECT_DB_FILE: &str = "project_memory.db";
/// File name of the global database, inside the user's data folder's `lsm/`.
pub const GLOBAL_DB_FILE: &str = "global_memory.db";
/// The time source (tests fix it to check expiry without waiting).
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// Where each scope's database file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreLayout {
    /// The agents folder: agent databases are `<agents_folder>/<agent>/memory/memory.db`.
    pub agents_folder: PathBuf,
    /// The project database (default `<agents_folder>/project_memory.db`).
    pub project_db: PathBuf,
    /// The global database (default [`default_global_db`]); `None`: there is no global scope.
    pub global_db: Option<PathBuf>,
}

impl StoreLayout {
    /// The default layout for `agents_folder`, with global memory in the user's data folder.
    pub fn new(agents_folder: impl Into<PathBuf>) -> Self {
        let agents_folder = agents_folder.into();
        StoreLayout {
            project_db: agents_folder.join(PROJECT_DB_FILE),
            global_db: default_global_db(),
            agents_folder,
        }
    }

    /// Use this project database instead of the default.
    #[must_use]
    pub fn with_project_db(mut self, path: impl Into<PathBuf>) -> Self {
        self.project_db = path.into();
        self
    }

    /// Use this global database (or none) instead of the default.
    #[must_use]
    pub fn with_global_db(mut self, path: Option<PathBuf>) -> Self {
        self.global_db = path;
        self
    }

    /// `<agents_folder>/<agent>/memory/memory.db`.
    ///
    /// # Errors
    /// [`MemoryError::BadAgentName`] when `agent` could name another folder.
    pub fn agent_db(&self, agent: &str) -> Result<PathBuf, MemoryError> {
        check_agent_name(agent)?;
        Ok(self
            .agents_folder
            .join(agent)
            .join("memory")
            .join(AGENT_DB_FILE))
    }
}

/// The default global database: `lsm/global_memory.db` in the user's data folder —
/// `$XDG_DATA_HOME` (when absolute) else `~/.local/share` on Linux and macOS, `%APPDATA%` on
/// Windows (`etcetera`'s base strategy); `None` when there is no home folder.
pub fn default_global_db() -> Option<PathBuf> {
    use etcetera::BaseStrategy;
    let data = etcetera::choose_base_strategy().ok()?.data_dir();
    Some(data.join("lsm").join(GLOBAL_DB_FILE))
}

/// The memory store. Cheap to clone; share it between tools and the standing-context provider.
#[derive(Clone)]
pub struct MemoryStore {
    layout: StoreLayout,
    clock: Clock,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

const COLUMNS: &str = "m.id, m.scope, m.owner_agent, m.text, m.tags, m.source_run_id, \
                       m.created_at, m.updated_at, m.expires_at, m.status";

impl MemoryStore {
    /// A store over `layout`, on the system clock.
    pub fn new(layout: StoreLayout) -> Self {
        MemoryStore {
            layout,
            clock: Arc::new(Utc::now),
        }
    }

    /// Use `clock` for "now" (creation times, expiry).
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Where the databases are.
    pub fn layout(&self) -> &StoreLayout {
        &self.layout
    }

    fn now_ms(&self) -> i64 {
        self.now().timestamp_millis()
    }

    /// The database file of `scope` for a memory owned by `agent`.
    ///
    /// # Errors
    /// A bad agent name, or global scope without a global database.
    pub fn db_for(&self, scope: Scope, agent: &str) -> Result<PathBuf, MemoryError> {
        match scope {
            Scope::Agent => self.layout.agent_db(agent),
            Scope::Project => Ok(self.layout.project_db.clone()),
            Scope::Global => self
                .layout
                .global_db
                .clone()
                .ok_or(MemoryError::NoGlobalDatabase),
        }
    }

    /// The existing database files `reach` covers for `scopes` (empty: all), in search order.
    fn targets(
        &self,
        reach: &Reach,
        scopes: &[Scope],
    ) -> Result<Vec<(Scope, PathBuf)>, MemoryError> {
        let mut out = Vec::new();
        for scope in scopes_wanted(scopes) {
            match (scope, reach) {
                (Scope::Agent, Reach::Agent(agent)) => {
                    out.push((scope, self.layout.agent_db(agent)?));
                }
                (Scope::Agent, Reach::Everyone) => {
                    for agent in self.agent_names() {
                        out.push((scope, self.layout.agent_db(&agent)?));
                    }
                }
                (Scope::Project, _) => out.push((scope, self.layout.project_db.clone())),
                (Scope::Global, _) => out.extend(self.layout.global_db.clone().map(|p| (scope, p))),
            }
        }
        out.retain(|(_, p)| p.is_file());
        Ok(out)
    }

    /// Agents (folder names) that have a memory database, sorted.
    fn agent_names(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.layout.agents_folder) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| check_agent_name(name).is_ok())
            .filter(|name| {
                self.layout
                    .agents_folder
                    .join(name)
                    .join("memory")
                    .join(AGENT_DB_FILE)
                    .is_file()
            })
            .collect();
        names.sort();
        names
    }
}

/// Each scope in its own files: a write opens the one database it changes (and prunes that
/// database's expired memories), a read the existing databases its reach covers; a read never
/// creates a file.
impl MemoryBackend for MemoryStore {
    fn now(&self) -> DateTime<Utc> {
        (self.clock)()
    }

    fn agents_with_memory(&self) -> Result<Vec<String>, MemoryError> {
        Ok(self.agent_names())
    }

    fn put(&self, new: NewMemory) -> Result<PutOutcome, MemoryError> {
        let new = new.checked()?;
        let (text, tags) = (&new.text, &new.tags);
        let path = self.db_for(new.scope, &new.owner_agent)?;
        let mut conn = open(&path, true)?;
        let now = self.now_ms();
        let id = new_memory_id();
        let expires = new.expires_at.map(|t| t.timestamp_millis());
        let (id, created, newly_approved) = with_retry(&path, || {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            prune(&tx, now)?;
            let existing: Option<(String, String, String)> = tx
                .query_row(
                    "SELECT id, tags, status FROM memories
                     WHERE scope = ?1 AND owner_agent = ?2 AND lower(text) = lower(?3)",
                    (new.scope.as_str(), &new.owner_agent, text),
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            let outcome = match existing {
                Some((id, old_tags, old_status)) => {
                    let old_status = Status::parse(&old_status).unwrap_or(Status::Candidate);
                    let r = refresh(parse_tags(&old_tags), old_status, tags, new.status);
                    tx.execute(
                        "UPDATE memories SET tags = ?2, updated_at = ?3, expires_at = ?4,
                             status = ?5, source_run_id = coalesce(?6, source_run_id)
                         WHERE id = ?1",
                        (
                            &id,
                            tags_json(&r.tags),
                            now,
                            expires,
                            r.status.as_str(),
                            &new.source_run_id,
                        ),
                    )?;
                    (id, false, r.newly_approved)
                }
                None => {
                    tx.execute(
                        "INSERT INTO memories (id, scope, owner_agent, text, tags, source_run_id,
                             created_at, updated_at, expires_at, status)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9)",
                        (
                            &id,
                            new.scope.as_str(),
                            &new.owner_agent,
                            text,
                            tags_json(tags),
                            &new.source_run_id,
                            now,
                            expires,
                            new.status.as_str(),
                        ),
                    )?;
                    (id.clone(), true, new.status == Status::Approved)
                }
            };
            tx.commit()?;
            Ok(outcome)
        })?;
        let memory = with_retry(&path, || get_row(&conn, &id, now))?
            .ok_or_else(|| MemoryError::NotFound(id.clone()))?;
        tracing::debug!(id = %memory.id, scope = %memory.scope, created, "memory stored");
        Ok(PutOutcome {
            memory,
            created,
            newly_approved,
        })
    }

    fn get(&self, reach: &Reach, id: &str) -> Result<Option<Memory>, MemoryError> {
        let now = self.now_ms();
        for (_, path) in self.targets(reach, &[])? {
            let conn = open(&path, false)?;
            if let Some(m) = with_retry(&path, || get_row(&conn, id, now))? {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    fn approve(&self, reach: &Reach, id: &str) -> Result<(Memory, bool), MemoryError> {
        let now = self.now_ms();
        for (_, path) in self.targets(reach, &[])? {
            let mut conn = open(&path, false)?;
            let changed = with_retry(&path, || {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                prune(&tx, now)?;
                let n = tx.execute(
                    "UPDATE memories SET status = 'approved', updated_at = ?2
                     WHERE id = ?1 AND status = 'candidate'",
                    (id, now),
                )?;
                tx.commit()?;
                Ok(n > 0)
            })?;
            if let Some(m) = with_retry(&path, || get_row(&conn, id, now))? {
                return Ok((m, changed));
            }
        }
        Err(MemoryError::NotFound(id.to_string()))
    }

    fn remove(&self, reach: &Reach, id: &str) -> Result<Memory, MemoryError> {
        let now = self.now_ms();
        for (_, path) in self.targets(reach, &[])? {
            let mut conn = open(&path, false)?;
            let removed = with_retry(&path, || {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                prune(&tx, now)?;
                let found = get_row(&tx, id, now)?;
                if found.is_some() {
                    tx.execute("DELETE FROM memories WHERE id = ?1", [id])?;
                }
                tx.commit()?;
                Ok(found)
            })?;
            if let Some(m) = removed {
                tracing::debug!(id = %m.id, scope = %m.scope, "memory removed");
                return Ok(m);
            }
        }
        Err(MemoryError::NotFound(id.to_string()))
    }

    fn search(&self, reach: &Reach, query: &SearchQuery) -> Result<Vec<Hit>, MemoryError> {
        let tags = normalize_tags(&query.tags)?;
        let fts = match query.matching() {
            Matching::Everything => None,
            Matching::Words(terms) => Some(fts_query(&terms)),
            Matching::Nothing => return Ok(Vec::new()),
        };
        let now = self.now_ms();
        let mut hits: Vec<(Scope, Hit)> = Vec::new();
        for (scope, path) in self.targets(reach, &query.scopes)? {
            let conn = open(&path, false)?;
            let found = with_retry(&path, || {
                search_db(&conn, scope, fts.as_deref(), &tags, query, now)
            })?;
            hits.extend(found.into_iter().map(|h| (scope, h)));
        }
        // Stable: within a scope each database's own order (relevance, or recency) holds;
        // results of several agent databases are merged by score, then recency.
        hits.sort_by(|(sa, a), (sb, b)| {
            sa.cmp(sb)
                .then(b.score.total_cmp(&a.score))
                .then(b.memory.updated_at.cmp(&a.memory.updated_at))
        });
        Ok(hits.into_iter().map(|(_, h)| h).take(query.limit).collect())
    }

    fn prune_expired(&self, reach: &Reach) -> Result<usize, MemoryError> {
        let now = self.now_ms();
        let mut total = 0;
        for (_, path) in self.targets(reach, &[])? {
            let mut conn = open(&path, false)?;
            total += with_retry(&path, || {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let n = prune(&tx, now)?;
                tx.commit()?;
                Ok(n)
            })?;
        }
        Ok(total)
    }
}

fn tags_json(tags: &[String]) -> String {
    serde_json::to_string(tags).unwrap_or_else(|_| "[]".to_string())
}

fn parse_tags(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

fn prune(conn: &Connection, now: i64) -> Result<usize, rusqlite::Error> {
    let n = conn.execute(
        "DELETE FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ?1",
        [now],
    )?;
    if n > 0 {
        tracing::debug!(pruned = n, "expired memories pruned");
    }
    Ok(n)
}

fn ms_to_time(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

fn row_to_memory(r: &rusqlite::Row<'_>) -> Result<Memory, rusqlite::Error> {
    let scope: String = r.get(1)?;
    let status: String = r.get(9)?;
    let bad = |col: usize, v: &str| {
        rusqlite::Error::FromSqlConversionFailure(
            col,
            rusqlite::types::Type::Text,
            format!("unexpected value '{v}'").into(),
        )
    };
    Ok(Memory {
        id: r.get(0)?,
        scope: Scope::parse(&scope).ok_or_else(|| bad(1, &scope))?,
        owner_agent: r.get(2)?,
        text: r.get(3)?,
        tags: parse_tags(&r.get::<_, String>(4)?),
        source_run_id: r.get(5)?,
        created_at: ms_to_time(r.get(6)?),
        updated_at: ms_to_time(r.get(7)?),
        expires_at: r.get::<_, Option<i64>>(8)?.map(ms_to_time),
        status: Status::parse(&status).ok_or_else(|| bad(9, &status))?,
    })
}

fn get_row(conn: &Connection, id: &str, now: i64) -> Result<Option<Memory>, rusqlite::Error> {
    conn.query_row(
        &format!(
            "SELECT {COLUMNS} FROM memories m
             WHERE m.id = ?1 AND (m.expires_at IS NULL OR m.expires_at > ?2)"
        ),
        (id, now),
        row_to_memory,
    )
    .optional()
}

fn search_db(
    conn: &Connection,
    scope: Scope,
    fts: Option<&str>,
    tags: &[String],
    query: &SearchQuery,
    now: i64,
) -> Result<Vec<Hit>, rusqlite::Error> {
    let mut params: Vec<SqlValue> = vec![
        SqlValue::Text(scope.as_str().to_string()),
        SqlValue::Integer(now),
    ];
    let mut sql = match fts {
        Some(_) => format!(
            "SELECT {COLUMNS}, bm25(memories_fts, 1.0, 0.5) AS rank
             FROM memories_fts JOIN memories m ON m.rowid = memories_fts.rowid
             WHERE m.scope = ?1 AND (m.expires_at IS NULL OR m.expires_at > ?2)"
        ),
        None => format!(
            "SELECT {COLUMNS}, 0.0 AS rank FROM memories m
             WHERE m.scope = ?1 AND (m.expires_at IS NULL OR m.expires_at > ?2)"
        ),
    };
    if let Some(q) = fts {
        params.push(SqlValue::Text(q.to_string()));
        sql.push_str(&format!(" AND memories_fts MATCH ?{}", params.len()));
    }
    if !query.include_candidates {
        sql.push_str(" AND m.status = 'approved'");
    }
    if let Some(owner) = &query.owner {
        params.push(SqlValue::Text(owner.clone()));
        sql.push_str(&format!(" AND m.owner_agent = ?{}", params.len()));
    }
    for tag in tags {
        params.push(SqlValue::Text(tag.clone()));
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM json_each(m.tags) WHERE json_each.value = ?{})",
            params.len()
        ));
    }
    sql.push_str(match fts {
        Some(_) => " ORDER BY rank, m.updated_at DESC",
        None => " ORDER BY m.updated_at DESC",
    });
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
    params.push(SqlValue::Integer(limit));
    sql.push_str(&format!(" LIMIT ?{}", params.len()));
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(params), |r| {
        let rank: f64 = r.get(10)?;
        Ok(Hit {
            memory: row_to_memory(r)?,
            // BM25 in SQLite is lower-is-better; flip it so higher is better.
            score: if rank == 0.0 { 0.0 } else { -rank },
        })
    })?;
    rows.collect()
}

/// An FTS5 query matching any of `terms` (each quoted, so no word can be read as query
/// syntax).
fn fts_query(terms: &[String]) -> String {
    terms
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

#[cfg(test)]
mod tests;
