use std::time::Duration;

use lsm_memory::testing::{Fixture, TestClock, new_memory};
use lsm_memory::{ListFilter, StandingOptions};
use lsm_sandbox::PermissionAsker;
use lsm_test_support::{Asker, pg};

use super::*;
use crate::PgSettings;

/// A project's memories in a fresh schema of the test database, on a clock the test moves.
struct Pg {
    memory: PgMemory,
    clock: TestClock,
    _db: pg::TestDb,
}

fn connect(db: &pg::TestDb) -> Arc<Db> {
    Db::connect(PgSettings::new(&db.url).with_schema(&db.schema)).expect("connect")
}

fn postgres(test: &str) -> Option<Box<dyn Fixture>> {
    let db = pg::database(test)?;
    let clock = TestClock::default();
    let memory = PgMemory::new(connect(&db), "/srv/project-a/Agents").with_clock(clock.clock());
    Some(Box::new(Pg {
        memory,
        clock,
        _db: db,
    }))
}

/// How many rows `memory`'s table holds for `scope` of its project (of `agent`, for agent
/// scope), expired ones included.
fn rows(memory: &PgMemory, scope: Scope, agent: &str) -> usize {
    let (scope, project, agent) = (
        scope.as_str().to_string(),
        memory.project_of(scope),
        agent.to_string(),
    );
    let n: i64 = memory
        .db()
        .blocking("counting memories", move |c| {
            let (scope, project, agent) = (scope.clone(), project.clone(), agent.clone());
            async move {
                let r = c
                    .query_one(
                        "SELECT count(*) FROM lsm_memories WHERE scope = $1 AND project = $2 \
                         AND (scope <> 'agent' OR owner_agent = $3)",
                        &[&scope, &project, &agent],
                    )
                    .await?;
                Ok(r.get(0))
            }
        })
        .unwrap();
    usize::try_from(n).unwrap()
}

impl Fixture for Pg {
    fn store(&self) -> Arc<dyn MemoryBackend> {
        Arc::new(self.memory.clone())
    }
    fn clock(&self) -> &TestClock {
        &self.clock
    }
    fn stored(&self, scope: Scope, agent: &str) -> usize {
        rows(&self.memory, scope, agent)
    }
    fn asker(&self, yes: bool) -> Arc<dyn PermissionAsker> {
        Arc::new(Asker::answering(yes))
    }
}

lsm_memory::backend_tests!(postgres);

#[test]
fn two_projects_on_one_database_keep_agent_and_project_memories_apart_and_share_global() {
    let Some(db) = pg::database("two projects") else {
        return;
    };
    let a = PgMemory::new(connect(&db), "/srv/a/Agents");
    // Another process, on another connection pool.
    let b = PgMemory::new(connect(&db), "/srv/b/Agents");
    a.put(new_memory(
        Scope::Agent,
        "librarian",
        "Project A shelves are blue",
        &[],
    ))
    .unwrap();
    a.put(new_memory(
        Scope::Project,
        "librarian",
        "Project A is a novel",
        &[],
    ))
    .unwrap();
    let shared = a
        .put(new_memory(
            Scope::Global,
            "librarian",
            "The user is called Ada",
            &[],
        ))
        .unwrap()
        .memory;
    // The same fact in project B is B's own memory, not a refresh of A's.
    let b_own = b
        .put(new_memory(
            Scope::Project,
            "librarian",
            "Project A is a novel",
            &[],
        ))
        .unwrap();
    assert!(b_own.created);

    let everything = |m: &PgMemory| -> Vec<(Scope, String)> {
        m.list(&Reach::Everyone, &ListFilter::default())
            .unwrap()
            .into_iter()
            .map(|m| (m.scope, m.text))
            .collect()
    };
    assert_eq!(
        everything(&a),
        [
            (Scope::Agent, "Project A shelves are blue".to_string()),
            (Scope::Project, "Project A is a novel".to_string()),
            (Scope::Global, "The user is called Ada".to_string()),
        ]
    );
    assert_eq!(
        everything(&b),
        [
            (Scope::Project, "Project A is a novel".to_string()),
            (Scope::Global, "The user is called Ada".to_string()),
        ]
    );
    assert!(b.agents_with_memory().unwrap().is_empty());
    assert_eq!(a.agents_with_memory().unwrap(), ["librarian"]);
    let block = b
        .standing_context(
            "librarian",
            "what colour are the shelves? who is the user?",
            StandingOptions::for_run(8, 200_000),
        )
        .unwrap()
        .unwrap();
    assert!(
        block.contains("called Ada") && !block.contains("blue"),
        "{block}"
    );
    // B reaches A's global memory, not A's others.
    let a_project = everything(&a).len();
    assert_eq!(b.get(&Reach::Everyone, &shared.id).unwrap(), Some(shared));
    let a_ids: Vec<String> = a
        .list(&Reach::Everyone, &ListFilter::default())
        .unwrap()
        .into_iter()
        .filter(|m| m.scope != Scope::Global)
        .map(|m| m.id)
        .collect();
    for id in &a_ids {
        assert_eq!(b.get(&Reach::Everyone, id).unwrap(), None);
        assert!(matches!(
            b.remove(&Reach::Everyone, id),
            Err(MemoryError::NotFound(_))
        ));
    }
    assert_eq!(everything(&a).len(), a_project);
}

#[test]
fn the_memory_table_is_searched_through_a_gin_index_on_a_tsvector_column() {
    let Some(db) = pg::database("gin index") else {
        return;
    };
    let conn = connect(&db);
    let schema = db.schema.clone();
    let (column_type, index): (String, String) = conn
        .blocking("reading the catalogue", move |c| {
            let schema = schema.clone();
            async move {
                let t = c
                    .query_one(
                        "SELECT data_type FROM information_schema.columns \
                         WHERE table_schema = $1 AND table_name = 'lsm_memories' \
                         AND column_name = 'search'",
                        &[&schema],
                    )
                    .await?;
                let i = c
                    .query_one(
                        "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 \
                         AND indexname = 'lsm_memories_search'",
                        &[&schema],
                    )
                    .await?;
                Ok((t.get(0), i.get(0)))
            }
        })
        .unwrap();
    assert_eq!(column_type, "tsvector");
    assert!(index.contains("USING gin (search)"), "{index}");
}

#[test]
fn a_server_that_stays_away_is_a_clear_error_and_what_was_stored_stays() {
    let Some(server) = pg::PgServer::start("memory server away") else {
        return;
    };
    let mut settings = PgSettings::new(server.url());
    settings.retry_for = Duration::from_millis(300);
    let memory = PgMemory::new(Db::connect(settings).unwrap(), "p");
    memory
        .put(new_memory(
            Scope::Project,
            "a",
            "The server keeps this",
            &[],
        ))
        .unwrap();
    server.stop();
    let e = memory
        .put(new_memory(
            Scope::Project,
            "a",
            "This one waits for the server",
            &[],
        ))
        .unwrap_err();
    assert!(matches!(e, MemoryError::Backend(_)), "{e}");
    assert!(e.to_string().contains("cannot reach PostgreSQL"), "{e}");
    assert!(
        memory
            .standing_context("a", "server", StandingOptions::for_run(8, 200_000))
            .is_err()
    );
    server.start_again();
    let hits = memory
        .search(&Reach::Agent("a".into()), &SearchQuery::new("server", 5))
        .unwrap();
    assert_eq!(hits.len(), 1, "what was stored before is still there");
}
