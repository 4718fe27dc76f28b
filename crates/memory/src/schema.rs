//! Opening a database file: connection settings for concurrent runs, and the schema
//! migrations.
//!
//! Every database file has the same schema. `PRAGMA user_version` holds the number of
//! migrations applied; [`MIGRATIONS`] is the table of them, in order, and is only ever
//! appended to. Migrating runs inside an immediate transaction that re-reads the version, so
//! two processes opening a fresh file at once apply each migration exactly once.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use crate::MemoryError;

/// How long SQLite itself waits on a lock before reporting it busy.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an operation is retried on a busy or locked database before giving up.
const RETRY_FOR: Duration = Duration::from_secs(60);

/// The migrations, in order. Index `i` takes a database from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: memories, their full-text index (porter stemming), and the triggers that keep the
    // index in step with the table.
    r#"
    CREATE TABLE memories (
        id            TEXT    NOT NULL UNIQUE,
        scope         TEXT    NOT NULL CHECK (scope IN ('agent', 'project', 'global')),
        owner_agent   TEXT    NOT NULL,
        text          TEXT    NOT NULL,
        tags          TEXT    NOT NULL DEFAULT '[]',
        source_run_id TEXT,
        created_at    INTEGER NOT NULL,
        updated_at    INTEGER NOT NULL,
        expires_at    INTEGER,
        status        TEXT    NOT NULL CHECK (status IN ('candidate', 'approved'))
    );
    CREATE INDEX memories_expires_at ON memories (expires_at) WHERE expires_at IS NOT NULL;
    CREATE INDEX memories_updated_at ON memories (updated_at);
    CREATE VIRTUAL TABLE memories_fts USING fts5 (
        text, tags, content = 'memories', content_rowid = 'rowid',
        tokenize = 'porter unicode61'
    );
    CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, text, tags) VALUES (new.rowid, new.text, new.tags);
    END;
    CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text, tags)
            VALUES ('delete', old.rowid, old.text, old.tags);
    END;
    CREATE TRIGGER memories_au AFTER UPDATE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text, tags)
            VALUES ('delete', old.rowid, old.text, old.tags);
        INSERT INTO memories_fts (rowid, text, tags) VALUES (new.rowid, new.text, new.tags);
    END;
    "#,
];

/// The schema version this build writes.
pub(crate) fn current_version() -> i64 {
    i64::try_from(MIGRATIONS.len()).unwrap_or(i64::MAX)
}

/// Whether `e` means another connection holds a lock we need.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Run `op`, retrying while the database is busy (other runs writing), with a growing pause,
/// for up to [`RETRY_FOR`]. SQLite's own busy handler covers most waits; this covers the
/// cases it does not (a lock upgrade, switching a fresh file to WAL).
pub(crate) fn with_retry<T>(
    path: &Path,
    mut op: impl FnMut() -> Result<T, rusqlite::Error>,
) -> Result<T, MemoryError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        match op() {
            Ok(v) => return Ok(v),
            Err(e) if is_busy(&e) && started.elapsed() < RETRY_FOR => {
                tracing::debug!(path = %path.display(), "memory database busy; retrying");
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            Err(e) => return Err(MemoryError::sqlite(path)(e)),
        }
    }
}

/// Open `path` for reading and writing, creating the file and its folder when `create`; set
/// WAL, the busy timeout and `synchronous = NORMAL`; apply pending migrations.
pub(crate) fn open(path: &Path, create: bool) -> Result<Connection, MemoryError> {
    if create && let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| MemoryError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let mut conn = with_retry(path, || {
        let conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL lets readers and one writer work at once; the setting is stored in the file.
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(path = %path.display(), mode, "memory database is not in WAL mode");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        Ok(conn)
    })?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

fn user_version(conn: &Connection) -> Result<i64, rusqlite::Error> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Bring the schema to [`current_version`]; refuse a newer one.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), MemoryError> {
    let supported = current_version();
    let found = with_retry(path, || user_version(conn))?;
    if found > supported {
        return Err(MemoryError::NewerSchema {
            path: path.to_path_buf(),
            found,
            supported,
        });
    }
    if found == supported {
        return Ok(());
    }
    with_retry(path, || {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Another process may have migrated while we waited for the lock.
        let at = user_version(&tx)?;
        let start = usize::try_from(at).unwrap_or(usize::MAX);
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(start) {
            tracing::info!(path = %path.display(), version = i + 1, "migrating memory database");
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", i + 1)?;
        }
        tx.commit()
    })?;
    let now = with_retry(path, || user_version(conn))?;
    if now > supported {
        return Err(MemoryError::NewerSchema {
            path: path.to_path_buf(),
            found: now,
            supported,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_file_is_migrated_once_and_reopening_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/m.db");
        let conn = open(&path, true).unwrap();
        assert_eq!(user_version(&conn).unwrap(), current_version());
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        drop(conn);
        let conn = open(&path, false).unwrap();
        assert_eq!(user_version(&conn).unwrap(), current_version());
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name IN ('memories', 'memories_fts')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 2);
    }

    #[test]
    fn a_newer_schema_is_refused_with_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let conn = open(&path, true).unwrap();
        conn.pragma_update(None, "user_version", current_version() + 5)
            .unwrap();
        drop(conn);
        let e = open(&path, false).unwrap_err();
        assert!(matches!(e, MemoryError::NewerSchema { .. }), "{e}");
        assert!(e.to_string().contains("upgrade lsm"), "{e}");
    }

    #[test]
    fn an_older_schema_is_brought_up_to_date() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        // A file at version 0: it exists but has no tables yet.
        drop(Connection::open(&path).unwrap());
        let conn = open(&path, false).unwrap();
        assert_eq!(user_version(&conn).unwrap(), current_version());
    }

    #[test]
    fn a_missing_file_is_not_created_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.db");
        assert!(open(&path, false).is_err());
        assert!(!path.exists());
    }
}
