//! The memory store, its tools through a real sandbox, and the standing block, against real
//! SQLite files in temporary folders.

// Helpers outside #[test] functions may fail loudly too: this is a test crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Duration, Utc};
use lsm_memory::{
    ListFilter, Memory, MemoryError, MemoryStore, NewMemory, Reach, STANDING_HEADER, Scope,
    SearchQuery, StandingOptions, Status, StoreLayout, estimate_tokens, format_block,
};
use lsm_sandbox::{
    Caller, ExecError, PermissionAsker, Sandbox, SandboxConfig, ToolEventKind, ToolRegistry,
};
use lsm_test_support::Asker;
use serde_json::{Value, json};

// ---------- fixtures ----------

struct Fx {
    dir: tempfile::TempDir,
    store: MemoryStore,
    now: Arc<AtomicI64>,
}

impl Fx {
    fn agents(&self) -> PathBuf {
        self.dir.path().join("Agents")
    }
    fn advance(&self, by: Duration) {
        self.now.fetch_add(by.num_milliseconds(), Ordering::SeqCst);
    }
    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.now.load(Ordering::SeqCst)).unwrap()
    }
}

/// A store over a temp agents folder and a temp global database, on a clock the test moves.
fn fx() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let layout = StoreLayout::new(dir.path().join("Agents"))
        .with_global_db(Some(dir.path().join("data/lsm/global_memory.db")));
    let now = Arc::new(AtomicI64::new(
        DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
            .unwrap()
            .timestamp_millis(),
    ));
    let clock = Arc::clone(&now);
    let store = MemoryStore::new(layout).with_clock(Arc::new(move || {
        DateTime::from_timestamp_millis(clock.load(Ordering::SeqCst)).unwrap()
    }));
    Fx { dir, store, now }
}

fn new(scope: Scope, owner: &str, text: &str, tags: &[&str]) -> NewMemory {
    NewMemory {
        scope,
        owner_agent: owner.into(),
        text: text.into(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        source_run_id: Some("run-1".into()),
        expires_at: None,
        status: Status::Approved,
    }
}

fn put(fx: &Fx, scope: Scope, owner: &str, text: &str, tags: &[&str]) -> Memory {
    fx.store.put(new(scope, owner, text, tags)).unwrap().memory
}

fn texts(hits: &[lsm_memory::Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.memory.text.as_str()).collect()
}

fn agent(name: &str) -> Reach {
    Reach::Agent(name.into())
}

fn rows_in(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT count(*) FROM memories", [], |r| r.get(0))
        .unwrap()
}

// ---------- round trips, layout, reach ----------

#[test]
fn every_scope_round_trips_in_its_own_file() {
    let fx = fx();
    let a = put(
        &fx,
        Scope::Agent,
        "librarian",
        "The catalogue uses Dewey numbers",
        &["Catalogue"],
    );
    let p = put(
        &fx,
        Scope::Project,
        "librarian",
        "The project is a novel",
        &[],
    );
    let g = put(
        &fx,
        Scope::Global,
        "assistant",
        "The user writes British English",
        &["style"],
    );

    assert!(fx.agents().join("librarian/memory/memory.db").is_file());
    assert!(fx.agents().join("project_memory.db").is_file());
    assert!(fx.dir.path().join("data/lsm/global_memory.db").is_file());

    for m in [&a, &p, &g] {
        let got = fx.store.get(&Reach::Everyone, &m.id).unwrap().unwrap();
        assert_eq!(&got, m);
        assert_eq!(got.status, Status::Approved);
        assert_eq!(got.source_run_id.as_deref(), Some("run-1"));
        assert_eq!(got.created_at, fx.now());
        assert!(got.id.starts_with("m-") && got.id.len() == 18, "{}", got.id);
    }
    assert_eq!(a.tags, ["catalogue"], "tags are lower-cased");
    assert_eq!(a.scope, Scope::Agent);
    assert_eq!(g.owner_agent, "assistant");

    let all = fx
        .store
        .list(&Reach::Everyone, &ListFilter::default())
        .unwrap();
    let scopes: Vec<Scope> = all.iter().map(|m| m.scope).collect();
    assert_eq!(scopes, [Scope::Agent, Scope::Project, Scope::Global]);

    let only_global = ListFilter {
        scopes: vec![Scope::Global],
        ..ListFilter::default()
    };
    assert_eq!(
        fx.store.list(&Reach::Everyone, &only_global).unwrap(),
        std::slice::from_ref(&g)
    );
    let by_owner = ListFilter {
        owner: Some("assistant".into()),
        ..ListFilter::default()
    };
    assert_eq!(fx.store.list(&Reach::Everyone, &by_owner).unwrap(), [g]);
}

#[test]
fn an_agent_reaches_its_own_project_and_global_memories_but_not_another_agents() {
    let fx = fx();
    let mine = put(
        &fx,
        Scope::Agent,
        "librarian",
        "shelf seven holds atlases",
        &[],
    );
    put(
        &fx,
        Scope::Agent,
        "assistant",
        "shelf nine holds secrets",
        &[],
    );
    put(
        &fx,
        Scope::Project,
        "assistant",
        "shelf three holds novels",
        &[],
    );

    let hits = fx
        .store
        .search(&agent("librarian"), &SearchQuery::new("shelf holds", 10))
        .unwrap();
    assert_eq!(
        texts(&hits),
        ["shelf seven holds atlases", "shelf three holds novels"]
    );
    assert_eq!(fx.store.get(&agent("assistant"), &mine.id).unwrap(), None);
    assert!(matches!(
        fx.store.remove(&agent("assistant"), &mine.id),
        Err(MemoryError::NotFound(_))
    ));
    assert_eq!(fx.store.agents_with_memory(), ["assistant", "librarian"]);
    // A person reaches everything.
    assert_eq!(
        fx.store
            .search(&Reach::Everyone, &SearchQuery::new("shelf", 10))
            .unwrap()
            .len(),
        3
    );
}

#[test]
fn reads_never_create_files() {
    let fx = fx();
    assert!(
        fx.store
            .list(&Reach::Everyone, &ListFilter::default())
            .unwrap()
            .is_empty()
    );
    assert!(
        fx.store
            .search(&agent("librarian"), &SearchQuery::new("x y z", 5))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        fx.store
            .standing_context(
                "librarian",
                "anything at all",
                StandingOptions::for_run(8, 200_000)
            )
            .unwrap(),
        None
    );
    assert!(!fx.agents().exists());
    assert!(!fx.dir.path().join("data").exists());
}

#[test]
fn bad_input_is_refused_with_clear_errors() {
    let fx = fx();
    let long = "x".repeat(lsm_memory::MAX_TEXT_BYTES + 1);
    let e = fx
        .store
        .put(new(Scope::Agent, "a", &long, &[]))
        .unwrap_err();
    assert!(e.to_string().contains("over the limit of 2000"), "{e}");
    let e = fx.store.put(new(Scope::Agent, "a", "  ", &[])).unwrap_err();
    assert!(matches!(e, MemoryError::EmptyText), "{e}");
    let e = fx
        .store
        .put(new(Scope::Agent, "../x", "fact", &[]))
        .unwrap_err();
    assert!(matches!(e, MemoryError::BadAgentName(_)), "{e}");
    let e = fx
        .store
        .put(new(Scope::Agent, "a", "fact", &["no spaces"]))
        .unwrap_err();
    assert!(matches!(e, MemoryError::BadTag { .. }), "{e}");

    let no_global = MemoryStore::new(StoreLayout::new(fx.agents()).with_global_db(None));
    let e = no_global
        .put(new(Scope::Global, "a", "fact", &[]))
        .unwrap_err();
    assert!(e.to_string().contains("global_db"), "{e}");
    // Without a global database, searches simply skip global scope.
    assert!(
        no_global
            .search(&agent("a"), &SearchQuery::new("fact", 5))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn storing_the_same_fact_again_refreshes_it_instead_of_duplicating() {
    let fx = fx();
    let mut first = new(
        Scope::Project,
        "librarian",
        "The archive closes at six",
        &["hours"],
    );
    first.status = Status::Candidate;
    let a = fx.store.put(first).unwrap();
    assert!(a.created && !a.newly_approved);
    fx.advance(Duration::minutes(5));
    let b = fx
        .store
        .put(new(
            Scope::Project,
            "librarian",
            "the archive closes at SIX",
            &["archive"],
        ))
        .unwrap();
    assert!(!b.created && b.newly_approved);
    assert_eq!(b.memory.id, a.memory.id);
    assert_eq!(b.memory.tags, ["hours", "archive"]);
    assert_eq!(b.memory.status, Status::Approved);
    assert_eq!(
        b.memory.created_at + Duration::minutes(5),
        b.memory.updated_at
    );
    // An approved memory stays approved when stored again as a candidate.
    let mut again = new(
        Scope::Project,
        "librarian",
        "The archive closes at six",
        &[],
    );
    again.status = Status::Candidate;
    let c = fx.store.put(again).unwrap();
    assert_eq!(c.memory.status, Status::Approved);
    assert!(!c.newly_approved);
    assert_eq!(rows_in(&fx.agents().join("project_memory.db")), 1);
}

// ---------- candidates and approval ----------

#[test]
fn candidates_are_hidden_from_agents_until_approved() {
    let fx = fx();
    let mut c = new(
        Scope::Agent,
        "assistant",
        "The user's cat is called Miso",
        &[],
    );
    c.status = Status::Candidate;
    let m = fx.store.put(c).unwrap().memory;
    let q = SearchQuery::new("cat called", 5);
    assert!(fx.store.search(&agent("assistant"), &q).unwrap().is_empty());
    assert_eq!(
        fx.store
            .standing_context(
                "assistant",
                "what is my cat called",
                StandingOptions::for_run(8, 200_000)
            )
            .unwrap(),
        None
    );
    let people = SearchQuery {
        include_candidates: true,
        ..q.clone()
    };
    assert_eq!(fx.store.search(&Reach::Everyone, &people).unwrap().len(), 1);
    let candidates = ListFilter {
        status: Some(Status::Candidate),
        ..ListFilter::default()
    };
    assert_eq!(
        fx.store.list(&Reach::Everyone, &candidates).unwrap().len(),
        1
    );

    fx.advance(Duration::seconds(1));
    let (approved, changed) = fx.store.approve(&Reach::Everyone, &m.id).unwrap();
    assert!(changed);
    assert_eq!(approved.status, Status::Approved);
    assert!(approved.updated_at > approved.created_at);
    let (_, changed) = fx.store.approve(&Reach::Everyone, &m.id).unwrap();
    assert!(!changed, "approving twice changes nothing");
    assert_eq!(fx.store.search(&agent("assistant"), &q).unwrap().len(), 1);
    assert!(matches!(
        fx.store.approve(&Reach::Everyone, "m-0000000000000000"),
        Err(MemoryError::NotFound(_))
    ));
}

// ---------- expiry ----------

#[test]
fn expired_memories_are_never_returned_and_are_pruned() {
    let fx = fx();
    let mut soon = new(
        Scope::Project,
        "a",
        "The meeting room is B12 today",
        &["rooms"],
    );
    soon.expires_at = Some(fx.now() + Duration::hours(1));
    let soon = fx.store.put(soon).unwrap().memory;
    put(
        &fx,
        Scope::Project,
        "a",
        "The library room is B1",
        &["rooms"],
    );
    let q = SearchQuery::new("room", 10);
    assert_eq!(fx.store.search(&agent("a"), &q).unwrap().len(), 2);

    fx.advance(Duration::hours(1));
    // At the expiry instant it is gone from every read.
    assert_eq!(
        texts(&fx.store.search(&agent("a"), &q).unwrap()),
        ["The library room is B1"]
    );
    assert_eq!(fx.store.get(&Reach::Everyone, &soon.id).unwrap(), None);
    assert_eq!(
        fx.store
            .list(&Reach::Everyone, &ListFilter::default())
            .unwrap()
            .len(),
        1
    );
    let block = fx
        .store
        .standing_context("a", "which room", StandingOptions::for_run(8, 200_000))
        .unwrap()
        .unwrap();
    assert!(!block.contains("B12"), "{block}");
    // Reads leave the row; the next write (or an explicit prune) deletes it.
    let db = fx.agents().join("project_memory.db");
    assert_eq!(rows_in(&db), 2);
    put(&fx, Scope::Project, "a", "Another fact", &[]);
    assert_eq!(rows_in(&db), 2, "expired row pruned, new row added");
    assert!(matches!(
        fx.store.approve(&Reach::Everyone, &soon.id),
        Err(MemoryError::NotFound(_))
    ));

    let mut later = new(Scope::Project, "a", "Temporary fact", &[]);
    later.expires_at = Some(fx.now() + Duration::days(1));
    fx.store.put(later).unwrap();
    fx.advance(Duration::days(2));
    assert_eq!(fx.store.prune_expired(&Reach::Everyone).unwrap(), 1);
    assert_eq!(rows_in(&db), 2);
}

// ---------- search ----------

#[test]
fn search_ranks_by_relevance_within_a_scope_and_scopes_in_order() {
    let fx = fx();
    put(
        &fx,
        Scope::Project,
        "a",
        "Rust is a programming language",
        &["lang"],
    );
    put(
        &fx,
        Scope::Project,
        "a",
        "The borrow checker enforces borrow rules in Rust",
        &["lang"],
    );
    put(
        &fx,
        Scope::Project,
        "a",
        "Gardening needs patience",
        &["hobby"],
    );
    put(
        &fx,
        Scope::Global,
        "a",
        "Borrow checker errors: read the borrow checker's notes",
        &[],
    );
    put(
        &fx,
        Scope::Agent,
        "a",
        "A checker once borrowed my pen",
        &[],
    );

    let hits = fx
        .store
        .search(
            &agent("a"),
            &SearchQuery::new("How does the borrow checker work?", 10),
        )
        .unwrap();
    assert_eq!(
        texts(&hits),
        [
            // agent scope first, then project by relevance, then global.
            "A checker once borrowed my pen",
            "The borrow checker enforces borrow rules in Rust",
            "Borrow checker errors: read the borrow checker's notes",
        ]
    );
    assert!(hits.iter().all(|h| h.score > 0.0));

    // Stemming: "languages" finds "language"; tags are searchable words too.
    let hits = fx
        .store
        .search(&agent("a"), &SearchQuery::new("languages", 10))
        .unwrap();
    assert_eq!(texts(&hits), ["Rust is a programming language"]);
    let hits = fx
        .store
        .search(&agent("a"), &SearchQuery::new("hobby", 10))
        .unwrap();
    assert_eq!(texts(&hits), ["Gardening needs patience"]);

    // Limit keeps the best.
    let hits = fx
        .store
        .search(&agent("a"), &SearchQuery::new("rust borrow", 1))
        .unwrap();
    assert_eq!(texts(&hits), ["A checker once borrowed my pen"]);
    // Only common words: nothing.
    assert!(
        fx.store
            .search(&agent("a"), &SearchQuery::new("the of and", 10))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn tag_filters_require_every_tag_and_combine_with_words_and_scope() {
    let fx = fx();
    put(
        &fx,
        Scope::Project,
        "a",
        "Use tabs in Makefiles",
        &["style", "make"],
    );
    put(
        &fx,
        Scope::Project,
        "a",
        "Use four spaces in Python",
        &["style", "python"],
    );
    put(&fx, Scope::Global, "a", "Use spaces in YAML", &["style"]);

    let q = |text: &str, tags: &[&str], scopes: Vec<Scope>| SearchQuery {
        text: text.into(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        scopes,
        ..SearchQuery::new("", 10)
    };
    let search = |query: SearchQuery| {
        let hits = fx.store.search(&agent("a"), &query).unwrap();
        hits.into_iter().map(|h| h.memory.text).collect::<Vec<_>>()
    };
    assert_eq!(search(q("", &["STYLE"], vec![])).len(), 3);
    assert_eq!(
        search(q("", &["style", "python"], vec![])),
        ["Use four spaces in Python"]
    );
    assert_eq!(
        search(q("spaces", &["style"], vec![])),
        ["Use four spaces in Python", "Use spaces in YAML"]
    );
    assert_eq!(
        search(q("spaces", &["style"], vec![Scope::Global])),
        ["Use spaces in YAML"]
    );
    assert!(search(q("", &["nosuchtag"], vec![])).is_empty());
    // Without words, the most recently updated first.
    fx.advance(Duration::seconds(1));
    put(&fx, Scope::Project, "a", "Use tabs in Go", &["style"]);
    assert_eq!(
        search(q("", &["style"], vec![Scope::Project]))[0],
        "Use tabs in Go"
    );
}

// ---------- the standing block ----------

#[test]
fn the_standing_block_is_one_labelled_system_block_of_the_most_relevant_memories() {
    let fx = fx();
    for i in 0..12 {
        let text = format!("Fact {i} about the garden: the beds along the south wall get full sun");
        put(&fx, Scope::Project, "a", &text, &[]);
    }
    put(
        &fx,
        Scope::Project,
        "a",
        "The garden gate code is 4711, garden garden",
        &[],
    );
    put(&fx, Scope::Project, "a", "Unrelated: the car is blue", &[]);

    let block = fx
        .store
        .standing_context(
            "a",
            "open the garden gate",
            StandingOptions::for_run(8, 200_000),
        )
        .unwrap()
        .unwrap();
    assert!(block.starts_with(STANDING_HEADER), "{block}");
    let lines: Vec<&str> = block.lines().skip(1).collect();
    assert_eq!(lines.len(), 8, "limit: {block}");
    assert!(
        lines[0].contains("gate code is 4711"),
        "most relevant first: {block}"
    );
    assert!(!block.contains("car is blue"));

    // A small run budget: 200 tokens. The most relevant memory is still there.
    let block = fx
        .store
        .standing_context(
            "a",
            "open the garden gate",
            StandingOptions::for_run(8, 1_000),
        )
        .unwrap()
        .unwrap();
    assert!(
        estimate_tokens(&block) <= 200,
        "{}",
        estimate_tokens(&block)
    );
    assert!(block.lines().nth(1).unwrap().contains("4711"), "{block}");
    assert!(block.lines().count() < 9, "the budget cut some: {block}");

    // Nothing relevant: no block at all.
    assert_eq!(
        fx.store
            .standing_context(
                "a",
                "quantum chromodynamics",
                StandingOptions::for_run(8, 200_000)
            )
            .unwrap(),
        None
    );
}

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

// ---------- concurrency ----------

#[test]
fn concurrent_writers_from_several_runs_lose_nothing_and_never_see_a_lock() {
    let fx = fx();
    let store = Arc::new(fx.store.clone());
    const RUNS: usize = 8;
    const EACH: usize = 25;
    let handles: Vec<_> = (0..RUNS)
        .map(|run| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let agent = format!("agent{}", run % 2);
                for i in 0..EACH {
                    // Project scope: every run writes the same file. Agent scope: two runs
                    // per agent file. Reads interleave with the writes.
                    let mut m = new(
                        Scope::Project,
                        &agent,
                        &format!("run {run} fact {i}"),
                        &["load"],
                    );
                    m.source_run_id = Some(format!("run-{run}"));
                    store.put(m).unwrap();
                    store
                        .put(new(
                            Scope::Agent,
                            &agent,
                            &format!("run {run} private {i}"),
                            &[],
                        ))
                        .unwrap();
                    store
                        .search(&Reach::Agent(agent.clone()), &SearchQuery::new("fact", 5))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        rows_in(&fx.agents().join("project_memory.db")),
        (RUNS * EACH) as i64
    );
    let private = rows_in(&fx.agents().join("agent0/memory/memory.db"))
        + rows_in(&fx.agents().join("agent1/memory/memory.db"));
    assert_eq!(private, (RUNS * EACH) as i64);
    let all = fx
        .store
        .list(&Reach::Everyone, &ListFilter::default())
        .unwrap();
    assert_eq!(all.len(), 2 * RUNS * EACH);
}

// ---------- the tools, through the sandbox ----------

fn sandbox(fx: &Fx, config: SandboxConfig, asker: Option<bool>) -> Sandbox {
    let mut registry = ToolRegistry::new();
    for tool in lsm_memory::tools(Arc::new(fx.store.clone())) {
        registry = registry.with(tool);
    }
    let asker = asker.map(|yes| {
        Arc::new(if yes {
            Asker::approving("a person said yes")
        } else {
            Asker::denying("a person said no")
        }) as Arc<dyn PermissionAsker>
    });
    Sandbox::new(config, registry, asker).unwrap()
}

fn config(fx: &Fx) -> SandboxConfig {
    let ws = fx.dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    SandboxConfig::confined_to(&ws)
}

fn caller() -> Caller {
    Caller::new("librarian", "run-42")
}

fn ok(exec: lsm_sandbox::Execution) -> Value {
    match exec.outcome {
        Ok(text) => {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
        }
        Err(e) => panic!("expected success, got: {e}"),
    }
}

fn err(exec: lsm_sandbox::Execution) -> ExecError {
    match exec.outcome {
        Ok(text) => panic!("expected an error, got: {text}"),
        Err(e) => e,
    }
}

#[tokio::test]
async fn memory_put_and_remove_need_permission_and_an_approval_stores_an_approved_memory() {
    let fx = fx();
    let args =
        json!({"text": "The reading room opens at nine", "tags": ["hours"], "scope": "project"});

    // Nobody to ask: denied, nothing stored.
    let sb = sandbox(&fx, config(&fx), None);
    let e = err(sb.execute_as(&caller(), "memory_put", &args).await);
    assert!(e.is_denial(), "{e}");
    assert!(
        fx.store
            .list(&Reach::Everyone, &ListFilter::default())
            .unwrap()
            .is_empty()
    );

    // A person says no: denied.
    let sb = sandbox(&fx, config(&fx), Some(false));
    assert!(err(sb.execute_as(&caller(), "memory_put", &args).await).is_denial());

    // A person says yes: stored approved, owned by the caller, from the caller's run.
    let sb = sandbox(&fx, config(&fx), Some(true));
    let exec = sb.execute_as(&caller(), "memory_put", &args).await;
    let kinds: Vec<ToolEventKind> = exec.events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [ToolEventKind::MemoryWritten, ToolEventKind::MemoryApproved]
    );
    assert_eq!(
        exec.events[0].data["text"],
        "The reading room opens at nine"
    );
    let out = ok(exec);
    assert_eq!(out["status"], "approved");
    assert_eq!(out["scope"], "project");
    let id = out["id"].as_str().unwrap().to_string();
    let m = fx.store.get(&Reach::Everyone, &id).unwrap().unwrap();
    assert_eq!(
        (m.owner_agent.as_str(), m.source_run_id.as_deref()),
        ("librarian", Some("run-42"))
    );
    assert_eq!(m.status, Status::Approved);

    // memory_search needs no one.
    let sb_nobody = sandbox(&fx, config(&fx), None);
    let found = ok(sb_nobody
        .execute_as(
            &caller(),
            "memory_search",
            &json!({"query": "when does the reading room open"}),
        )
        .await);
    assert_eq!(found["results"][0]["id"], id.as_str());

    // memory_remove: nobody to ask → denied and kept; a person says yes → removed.
    let e = err(sb_nobody
        .execute_as(&caller(), "memory_remove", &json!({"id": id}))
        .await);
    assert!(e.is_denial(), "{e}");
    assert!(fx.store.get(&Reach::Everyone, &id).unwrap().is_some());
    let exec = sb
        .execute_as(&caller(), "memory_remove", &json!({"id": id}))
        .await;
    assert_eq!(exec.events[0].kind, ToolEventKind::MemoryRemoved);
    assert_eq!(ok(exec)["removed"], id.as_str());
    assert!(fx.store.get(&Reach::Everyone, &id).unwrap().is_none());
    // Removing it again: a clear error for the model.
    let e = err(sb
        .execute_as(&caller(), "memory_remove", &json!({"id": id}))
        .await);
    assert!(e.to_string().contains("no memory with id"), "{e}");
}

#[tokio::test]
async fn without_a_permission_prompt_memory_put_stores_a_candidate_awaiting_approval() {
    let fx = fx();
    let mut cfg = config(&fx);
    cfg.require_user_permission
        .insert("memory_put".into(), false);
    let sb = sandbox(&fx, cfg, None);
    let exec = sb
        .execute_as(
            &caller(),
            "memory_put",
            &json!({"text": "Prefers short answers"}),
        )
        .await;
    let kinds: Vec<ToolEventKind> = exec.events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [ToolEventKind::MemoryWritten]);
    let out = ok(exec);
    assert_eq!(out["status"], "candidate");
    assert_eq!(out["scope"], "agent");
    assert!(out["note"].as_str().unwrap().contains("lsm memory approve"));
    let found = ok(sb
        .execute_as(
            &caller(),
            "memory_search",
            &json!({"query": "short answers"}),
        )
        .await);
    assert_eq!(found["results"], json!([]), "candidates are not for agents");
    let id = out["id"].as_str().unwrap();
    fx.store.approve(&Reach::Everyone, id).unwrap();
    let found = ok(sb
        .execute_as(
            &caller(),
            "memory_search",
            &json!({"query": "short answers"}),
        )
        .await);
    assert_eq!(found["results"][0]["text"], "Prefers short answers");
}

#[tokio::test]
async fn tool_arguments_are_validated_and_oversize_text_is_refused_clearly() {
    let fx = fx();
    let sb = sandbox(&fx, config(&fx), Some(true));
    let bad = [
        (
            "memory_put",
            json!({"text": "x", "colour": "red"}),
            "unexpected argument 'colour'",
        ),
        (
            "memory_put",
            json!({"tags": ["a"]}),
            "missing required argument 'text'",
        ),
        (
            "memory_put",
            json!({"text": "x", "scope": "universe"}),
            "scope",
        ),
        (
            "memory_put",
            json!({"text": "x", "ttl_days": 0}),
            "ttl_days",
        ),
        ("memory_put", json!({"text": 5}), "text"),
        ("memory_search", json!({"query": "x", "limit": 50}), "limit"),
        ("memory_remove", json!({}), "missing required argument 'id'"),
    ];
    for (tool, args, needle) in bad {
        let e = err(sb.execute_as(&caller(), tool, &args).await);
        assert!(
            matches!(e, ExecError::InvalidArguments { .. }) && e.to_string().contains(needle),
            "{tool} {args}: {e}"
        );
    }
    let long = "fact ".repeat(500);
    let e = err(sb
        .execute_as(&caller(), "memory_put", &json!({"text": long}))
        .await);
    let msg = e.to_string();
    assert!(
        msg.contains("memory text is 2499 bytes, over the limit of 2000")
            && msg.contains("one short fact"),
        "{msg}"
    );
    let e = err(sb
        .execute_as(
            &caller(),
            "memory_put",
            &json!({"text": "x", "tags": ["a b"]}),
        )
        .await);
    assert!(e.to_string().contains("tag 'a b'"), "{e}");
    let e = err(sb
        .execute_as(
            &caller(),
            "memory_put",
            &json!({"text": "The deploy token is sk-abcdefghijklmnopqrstuvwxyz123456"}),
        )
        .await);
    assert!(e.to_string().contains("never store secrets"), "{e}");
    let e = err(sb
        .execute_as(&caller(), "memory_search", &json!({"query": " "}))
        .await);
    assert!(e.to_string().contains("give a query, tags, or both"), "{e}");
    // No caller: the tools cannot know whose memory it is.
    let e = err(sb.execute("memory_search", &json!({"query": "x"})).await);
    assert!(e.to_string().contains("calling agent"), "{e}");
    assert!(
        fx.store
            .list(&Reach::Everyone, &ListFilter::default())
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn memory_search_is_ranked_json_bounded_by_limit_and_size() {
    let fx = fx();
    for i in 0..30 {
        let text = format!("Note {i} on orchids: {}", "leaf care ".repeat(180));
        put(&fx, Scope::Project, "librarian", &text, &["plants"]);
    }
    put(
        &fx,
        Scope::Project,
        "librarian",
        "Orchids orchids orchids",
        &["plants"],
    );
    let sb = sandbox(&fx, config(&fx), None);
    let out = ok(sb
        .execute_as(
            &caller(),
            "memory_search",
            &json!({"query": "orchids", "limit": 20, "tags": ["plants"]}),
        )
        .await);
    let results = out["results"].as_array().unwrap();
    assert_eq!(results[0]["text"], "Orchids orchids orchids");
    assert!(results[0]["score"].as_f64().unwrap() >= results[1]["score"].as_f64().unwrap());
    // 20 asked, ~1.9 KB each: the 16 KiB output bound leaves some out, and says how many.
    assert!(results.len() < 20, "{}", results.len());
    assert_eq!(
        out["left_out"].as_u64().unwrap() as usize,
        20 - results.len()
    );
    let default = ok(sb
        .execute_as(&caller(), "memory_search", &json!({"query": "orchids"}))
        .await);
    assert_eq!(default["results"].as_array().unwrap().len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_tool_calls_from_several_runs_all_succeed() {
    let fx = fx();
    let mut cfg = config(&fx);
    cfg.rate_limit = lsm_sandbox::RateLimit {
        calls: 1000,
        per_seconds: 1,
    };
    let sb = Arc::new(sandbox(&fx, cfg, Some(true)));
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let sb = Arc::clone(&sb);
            tokio::spawn(async move {
                let who = Caller::new(format!("agent{}", i % 4), format!("run-{i}"));
                let mut ids = Vec::new();
                for j in 0..5 {
                    let args = json!({"text": format!("fact {j} of run {i}"), "scope": "project"});
                    let exec = sb.execute_as(&who, "memory_put", &args).await;
                    let text = exec.outcome.unwrap_or_else(|e| panic!("run {i}: {e}"));
                    let v: Value = serde_json::from_str(&text).unwrap();
                    ids.push(v["id"].as_str().unwrap().to_string());
                }
                ids
            })
        })
        .collect();
    let mut ids = Vec::new();
    for t in tasks {
        ids.extend(t.await.unwrap());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 80);
    assert_eq!(rows_in(&fx.agents().join("project_memory.db")), 80);
}

#[test]
fn tool_schemas_describe_every_argument_and_deny_unknown_ones() {
    let fx = fx();
    for tool in lsm_memory::tools(Arc::new(fx.store.clone())) {
        let schema = tool.parameters();
        assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
        for (name, prop) in schema["properties"].as_object().unwrap() {
            assert!(
                prop.get("description")
                    .and_then(Value::as_str)
                    .is_some_and(|d| !d.is_empty()),
                "{}.{name} has no description: {schema}",
                tool.name()
            );
        }
        assert!(tool.path_args().is_empty(), "memory tools take no paths");
    }
    let names: Vec<String> = lsm_memory::tools(Arc::new(fx.store.clone()))
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    assert_eq!(names, lsm_memory::TOOL_NAMES);
}
