//! Agent memory in PostgreSQL: `lsm_store_pg::PgMemory` as a run's memory store, for one
//! project of a database many projects and machines share.

use std::path::Path;
use std::sync::Arc;

use lsm_memory::MemoryBackend;
use lsm_store_pg::{Db, PgMemory};

/// The memory of the project `project_key` (see [`project_key`]) in `db`: agent and project
/// scope that project's, global scope shared by every project of the database's schema.
pub fn pg_memory(db: Arc<Db>, project_key: &str) -> Arc<dyn MemoryBackend> {
    Arc::new(PgMemory::new(db, project_key))
}

/// The key of the project whose agents folder is `agents_folder`: its absolute path, with
/// symbolic links resolved when it exists, so that two spellings of one folder are one
/// project and two folders are two.
pub fn project_key(agents_folder: &Path) -> String {
    let absolute = std::path::absolute(agents_folder).unwrap_or_else(|_| agents_folder.into());
    let resolved = std::fs::canonicalize(&absolute).unwrap_or(absolute);
    resolved.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wiring::memory::tests::{
        a_fact_stored_with_the_tools_is_standing_context, provider_injects_what_the_store_finds,
    };
    use crate::wiring::memory::{StoreMemory, backend};
    use lsm_memory::MemoryConfig;
    use lsm_store_pg::PgSettings;

    fn connect(test: &str) -> Option<(Arc<Db>, lsm_test_support::pg::TestDb)> {
        let db = lsm_test_support::pg::database(test)?;
        let conn = Db::connect(PgSettings::new(&db.url).with_schema(&db.schema)).unwrap();
        Some((conn, db))
    }

    #[test]
    fn the_project_key_is_the_resolved_absolute_agents_folder() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("Agents");
        std::fs::create_dir(&agents).unwrap();
        let real = std::fs::canonicalize(&agents).unwrap();
        assert_eq!(project_key(&agents), real.to_string_lossy());
        assert_eq!(
            project_key(&dir.path().join("Agents/../Agents")),
            real.to_string_lossy()
        );
        // Not there yet: still absolute.
        let key = project_key(Path::new("not-there/Agents"));
        assert!(Path::new(&key).is_absolute(), "{key}");
        assert!(key.ends_with("not-there/Agents"), "{key}");
    }

    #[tokio::test]
    async fn the_standing_context_adapter_works_on_postgres() {
        let Some((conn, _db)) = connect("cli memory adapter") else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let shared = pg_memory(conn, &project_key(dir.path()));
        // The shared store is the one picked, not the SQLite files.
        let store = backend(&MemoryConfig::default(), dir.path(), Some(shared));
        provider_injects_what_the_store_finds(store).await;
        assert!(!dir.path().join("project_memory.db").exists());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fact_stored_with_the_tools_is_standing_context_of_the_next_run_on_postgres() {
        let Some((conn, _db)) = connect("cli memory composition") else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join("Agents");
        let store = pg_memory(Arc::clone(&conn), &project_key(&agents));
        a_fact_stored_with_the_tools_is_standing_context(Arc::clone(&store), &agents).await;
        assert!(!agents.join("assistant/memory/memory.db").exists());
        // Another project on the same database does not see the first one's agent memory.
        let other = pg_memory(conn, &project_key(&dir.path().join("Other")));
        let adapter = StoreMemory::new(other, 8, 200_000);
        use lsm_harness::MemoryProvider;
        assert_eq!(
            adapter
                .standing_context("assistant", "what is the user's name?")
                .await,
            None
        );
    }
}
