//! The SQLite memory store: the tests every backend must pass (`lsm_memory::testing`), and
//! what only files do (one database per scope, reads that create no file, no global
//! database); the standing block's budget. Against real SQLite files in temporary folders.

// Helpers outside #[test] functions may fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::DateTime;
use lsm_memory::testing::{Fixture, TestClock, new_memory};
use lsm_memory::{
    Memory, MemoryBackend, MemoryStore, Reach, Scope, SearchQuery, StandingOptions, Status,
    StoreLayout, estimate_tokens, format_block,
};
use lsm_sandbox::PermissionAsker;
use lsm_test_support::Asker;

// ---------- fixtures ----------

/// A store over a temp agents folder and a temp global database, on a clock the test moves.
struct Files {
    dir: tempfile::TempDir,
    store: MemoryStore,
    clock: TestClock,
}

impl Files {
    fn agents(&self) -> PathBuf {
        self.dir.path().join("Agents")
    }
    fn global(&self) -> PathBuf {
        self.dir.path().join("data/lsm/global_memory.db")
    }
}

fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    let layout = StoreLayout::new(dir.path().join("Agents"))
        .with_global_db(Some(dir.path().join("data/lsm/global_memory.db")));
    let clock = TestClock::default();
    let store = MemoryStore::new(layout).with_clock(clock.clock());
    Files { dir, store, clock }
}

fn rows_in(path: &Path) -> usize {
    if !path.is_file() {
        return 0;
    }
    let conn = rusqlite::Connection::open(path).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM memories", [], |r| r.get(0))
        .unwrap();
    n as usize
}

impl Fixture for Files {
    fn store(&self) -> Arc<dyn MemoryBackend> {
        Arc::new(self.store.clone())
    }
    fn clock(&self) -> &TestClock {
        &self.clock
    }
    fn stored(&self, scope: Scope, agent: &str) -> usize {
        match scope {
            Scope::Agent => rows_in(&self.store.layout().agent_db(agent).unwrap()),
            Scope::Project => rows_in(&self.agents().join("project_memory.db")),
            Scope::Global => rows_in(&self.global()),
        }
    }
    fn asker(&self, yes: bool) -> Arc<dyn PermissionAsker> {
        Arc::new(Asker::answering(yes))
    }
}

fn sqlite(_test: &str) -> Option<Box<dyn Fixture>> {
    Some(Box::new(files()))
}

lsm_memory::backend_tests!(sqlite);

// ---------- what only files do ----------

#[test]
fn every_scope_lives_in_its_own_file() {
    let fx = files();
    for (scope, owner) in [
        (Scope::Agent, "librarian"),
        (Scope::Agent, "assistant"),
        (Scope::Project, "librarian"),
        (Scope::Global, "assistant"),
    ] {
        fx.store
            .put(new_memory(scope, owner, "A fact", &[]))
            .unwrap();
    }
    for path in [
        fx.agents().join("librarian/memory/memory.db"),
        fx.agents().join("assistant/memory/memory.db"),
        fx.agents().join("project_memory.db"),
        fx.global(),
    ] {
        assert_eq!(rows_in(&path), 1, "{}", path.display());
    }
}

#[test]
fn reads_never_create_files() {
    let fx = files();
    lsm_memory::testing::an_empty_store_finds_nothing_and_has_nothing_to_change(&fx);
    assert!(!fx.agents().exists());
    assert!(!fx.dir.path().join("data").exists());
}

#[test]
fn without_a_global_database_global_scope_is_refused_and_skipped() {
    let fx = files();
    let no_global = MemoryStore::new(StoreLayout::new(fx.agents()).with_global_db(None));
    let e = no_global
        .put(new_memory(Scope::Global, "a", "fact", &[]))
        .unwrap_err();
    assert!(e.to_string().contains("global_db"), "{e}");
    // Without a global database, searches simply skip global scope.
    no_global
        .put(new_memory(Scope::Project, "a", "project fact", &[]))
        .unwrap();
    let hits = no_global
        .search(&Reach::Agent("a".into()), &SearchQuery::new("fact", 5))
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].memory.scope, Scope::Project);
}

// ---------- the standing block ----------

/// A tiny deterministic generator, so the property below runs the same every time.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % below.max(1)
    }
}

fn memory(text: String, tags: Vec<String>) -> Memory {
    Memory {
        id: "m-0".into(),
        scope: Scope::Agent,
        owner_agent: "a".into(),
        text,
        tags,
        source_run_id: None,
        created_at: DateTime::default(),
        updated_at: DateTime::default(),
        expires_at: None,
        status: Status::Approved,
    }
}

#[test]
fn the_standing_budget_is_never_exceeded_and_keeps_the_most_relevant_in_order() {
    let mut rng = Lcg(7);
    for case in 0..500 {
        let n = 1 + rng.next(12);
        let ranked: Vec<Memory> = (0..n)
            .map(|i| {
                // Multi-byte characters too, so cuts must respect char boundaries.
                let unit = ["word ", "é ", "日本 "][rng.next(3)];
                let text = format!("#{i} {}", unit.repeat(1 + rng.next(700)));
                let tags = (0..rng.next(3)).map(|t| format!("t{t}")).collect();
                memory(text.trim().to_string(), tags)
            })
            .collect();
        let options = StandingOptions {
            limit: 1 + rng.next(10),
            token_budget: lsm_memory::token_budget_for(rng.next(40_000) as u64),
        };
        let Some(block) = format_block(&ranked, options) else {
            panic!("case {case}: the most relevant memory can always be cut to fit");
        };
        assert!(
            estimate_tokens(&block) <= options.token_budget,
            "case {case}: {} > {}",
            estimate_tokens(&block),
            options.token_budget
        );
        let lines: Vec<&str> = block.lines().skip(1).collect();
        assert!(lines.len() <= options.limit, "case {case}");
        assert!(
            lines[0].starts_with("- [agent] #0 "),
            "case {case}: {}",
            lines[0]
        );
        // Kept memories appear in ranked order.
        let order: Vec<usize> = lines
            .iter()
            .map(|l| {
                let rest = l.strip_prefix("- [agent] #").unwrap();
                rest.split(' ').next().unwrap().parse().unwrap()
            })
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "case {case}: {order:?}"
        );
        // A memory is left out only when it did not fit (or the limit was reached).
        if lines.len() < options.limit.min(n) {
            let used = block.len();
            for (i, m) in ranked.iter().enumerate() {
                if !order.contains(&i) {
                    let mut line = format!("- [agent] {}", m.text);
                    if !m.tags.is_empty() {
                        line.push_str(&format!(" (tags: {})", m.tags.join(", ")));
                    }
                    assert!(
                        used + 1 + line.len() > options.token_budget * 3,
                        "case {case}: #{i} would have fitted"
                    );
                }
            }
        }
    }
}
