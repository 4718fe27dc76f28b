//! The tests every [`MemoryBackend`] must pass, whatever keeps its memories: each is a
//! function over a [`Fixture`], and [`backend_tests!`](crate::backend_tests) turns them all
//! into `#[test]`s for one backend. `lsm-memory` runs them against SQLite files,
//! `lsm-store-pg` against PostgreSQL (one schema per test).
//!
//! Only for tests (feature `testing`, enabled by dev-dependencies): the functions panic on
//! failure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Duration, Utc};
use lsm_sandbox::{
    Caller, ExecError, PermissionAsker, Sandbox, SandboxConfig, ToolEventKind, ToolRegistry,
};
use serde_json::{Value, json};

use crate::{
    Clock, Hit, ListFilter, Memory, MemoryBackend, MemoryError, NewMemory, Reach, STANDING_HEADER,
    Scope, SearchQuery, StandingOptions, Status, estimate_tokens,
};

/// A clock the test moves by hand, starting at 2030-01-01T00:00:00Z.
#[derive(Debug, Clone)]
pub struct TestClock(Arc<AtomicI64>);

impl Default for TestClock {
    fn default() -> Self {
        let start = DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
            .unwrap()
            .timestamp_millis();
        TestClock(Arc::new(AtomicI64::new(start)))
    }
}

impl TestClock {
    /// The clock for a store's `with_clock`.
    pub fn clock(&self) -> Clock {
        let now = Arc::clone(&self.0);
        Arc::new(move || DateTime::from_timestamp_millis(now.load(Ordering::SeqCst)).unwrap())
    }

    /// Move it forward.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.num_milliseconds(), Ordering::SeqCst);
    }

    /// What it says.
    pub fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.0.load(Ordering::SeqCst)).unwrap()
    }
}

/// One backend, fresh and empty, for one test.
pub trait Fixture {
    /// The store under test, on [`Fixture::clock`], with a global scope.
    fn store(&self) -> Arc<dyn MemoryBackend>;
    /// The store's clock.
    fn clock(&self) -> &TestClock;
    /// How many memories the store keeps for `scope` (for agent scope: `agent`'s), expired
    /// ones not yet deleted included: what is really there, not what a read returns.
    fn stored(&self, scope: Scope, agent: &str) -> usize;
    /// A person at the permission gate who always answers `yes`.
    fn asker(&self, yes: bool) -> Arc<dyn PermissionAsker>;
}

/// `#[test]`s running every shared test against the backend `$fixture` makes:
/// `$fixture(test_name) -> Option<Box<dyn Fixture>>` (`None`: the backend is not available
/// here, and the test says so and passes). The calling crate needs `tokio` (with `macros`
/// and `rt-multi-thread`) among its dev-dependencies.
#[macro_export]
macro_rules! backend_tests {
    ($fixture:path) => {
        $crate::backend_tests!(@sync $fixture;
            every_scope_round_trips,
            an_agent_reaches_its_own_project_and_global_memories_but_not_another_agents,
            an_empty_store_finds_nothing_and_has_nothing_to_change,
            bad_input_is_refused_with_clear_errors,
            storing_the_same_fact_again_refreshes_it_instead_of_duplicating,
            the_same_text_in_another_scope_or_by_another_agent_is_another_memory,
            candidates_are_hidden_from_agents_until_approved,
            expired_memories_are_never_returned_and_are_pruned,
            search_ranks_by_relevance_within_a_scope_and_scopes_in_order,
            tag_filters_require_every_tag_and_combine_with_words_and_scope,
            search_filters_by_owner_and_status_and_lists_by_scope_then_recency,
            the_standing_block_is_one_labelled_system_block_of_the_most_relevant_memories,
            concurrent_writers_from_several_runs_lose_nothing_and_never_see_a_lock,
            tool_schemas_describe_every_argument_and_deny_unknown_ones
        );
        $crate::backend_tests!(@async $fixture;
            memory_put_and_remove_need_permission_and_an_approval_stores_an_approved_memory,
            without_a_permission_prompt_memory_put_stores_a_candidate_awaiting_approval,
            tool_arguments_are_validated_and_oversize_text_is_refused_clearly,
            memory_search_is_ranked_json_bounded_by_limit_and_size,
            concurrent_tool_calls_from_several_runs_all_succeed
        );
    };
    (@sync $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                if let Some(fx) = $fixture(stringify!($name)) {
                    $crate::testing::$name(&*fx);
                }
            }
        )*
    };
    (@async $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                if let Some(fx) = $fixture(stringify!($name)) {
                    $crate::testing::$name(&*fx).await;
                }
            }
        )*
    };
}

// ---------- helpers ----------

/// An approved memory of `owner` from run `run-1`, never expiring.
pub fn new_memory(scope: Scope, owner: &str, text: &str, tags: &[&str]) -> NewMemory {
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

fn put(fx: &dyn Fixture, scope: Scope, owner: &str, text: &str, tags: &[&str]) -> Memory {
    fx.store()
        .put(new_memory(scope, owner, text, tags))
        .unwrap()
        .memory
}

/// Store `facts` (scope, text, tags) of agent `a`, approved, in order.
fn put_all(fx: &dyn Fixture, facts: &[(Scope, &str, &[&str])]) {
    for (scope, text, tags) in facts {
        put(fx, *scope, "a", text, tags);
    }
}

fn texts(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.memory.text.as_str()).collect()
}

fn agent(name: &str) -> Reach {
    Reach::Agent(name.into())
}

fn list_all(fx: &dyn Fixture) -> Vec<Memory> {
    fx.store()
        .list(&Reach::Everyone, &ListFilter::default())
        .unwrap()
}

// ---------- round trips, reach ----------

/// Every scope stores and returns a memory as given; listings go agent → project → global.
pub fn every_scope_round_trips(fx: &dyn Fixture) {
    let store = fx.store();
    let a = put(
        fx,
        Scope::Agent,
        "librarian",
        "The catalogue uses Dewey numbers",
        &["Catalogue"],
    );
    let p = put(
        fx,
        Scope::Project,
        "librarian",
        "The project is a novel",
        &[],
    );
    let g = put(
        fx,
        Scope::Global,
        "assistant",
        "The user writes British English",
        &["style"],
    );
    for m in [&a, &p, &g] {
        let got = store.get(&Reach::Everyone, &m.id).unwrap().unwrap();
        assert_eq!(&got, m);
        assert_eq!(got.status, Status::Approved);
        assert_eq!(got.source_run_id.as_deref(), Some("run-1"));
        assert_eq!(got.created_at, fx.clock().now());
        assert_eq!(got.updated_at, fx.clock().now());
        assert_eq!(got.expires_at, None);
        assert!(got.id.starts_with("m-") && got.id.len() == 18, "{}", got.id);
    }
    assert_eq!(a.tags, ["catalogue"], "tags are lower-cased");
    assert_eq!(a.scope, Scope::Agent);
    assert_eq!(g.owner_agent, "assistant");
    assert_eq!(fx.stored(Scope::Agent, "librarian"), 1);
    assert_eq!(fx.stored(Scope::Project, ""), 1);
    assert_eq!(fx.stored(Scope::Global, ""), 1);

    let scopes: Vec<Scope> = list_all(fx).iter().map(|m| m.scope).collect();
    assert_eq!(scopes, [Scope::Agent, Scope::Project, Scope::Global]);
    let only_global = ListFilter {
        scopes: vec![Scope::Global],
        ..ListFilter::default()
    };
    assert_eq!(
        store.list(&Reach::Everyone, &only_global).unwrap(),
        std::slice::from_ref(&g)
    );
    let by_owner = ListFilter {
        owner: Some("assistant".into()),
        ..ListFilter::default()
    };
    assert_eq!(store.list(&Reach::Everyone, &by_owner).unwrap(), [g]);

    // An expiry and no run survive the round trip too.
    let mut dated = new_memory(Scope::Project, "librarian", "Dated fact", &[]);
    dated.source_run_id = None;
    dated.expires_at = Some(fx.clock().now() + Duration::days(3));
    let d = store.put(dated).unwrap().memory;
    assert_eq!(d.expires_at, Some(fx.clock().now() + Duration::days(3)));
    assert_eq!(d.source_run_id, None);
    assert_eq!(store.get(&Reach::Everyone, &d.id).unwrap(), Some(d));
}

/// An agent reaches its own, the project's and the global memories, never another agent's.
pub fn an_agent_reaches_its_own_project_and_global_memories_but_not_another_agents(
    fx: &dyn Fixture,
) {
    let store = fx.store();
    let mine = put(
        fx,
        Scope::Agent,
        "librarian",
        "shelf seven holds atlases",
        &[],
    );
    let theirs = put(
        fx,
        Scope::Agent,
        "assistant",
        "shelf nine holds secrets",
        &[],
    );
    put(
        fx,
        Scope::Project,
        "assistant",
        "shelf three holds novels",
        &[],
    );
    put(fx, Scope::Global, "assistant", "shelf one holds maps", &[]);

    let hits = store
        .search(&agent("librarian"), &SearchQuery::new("shelf holds", 10))
        .unwrap();
    assert_eq!(
        texts(&hits),
        [
            "shelf seven holds atlases",
            "shelf three holds novels",
            "shelf one holds maps"
        ]
    );
    let listed = store
        .list(&agent("librarian"), &ListFilter::default())
        .unwrap();
    assert!(listed.iter().all(|m| m.id != theirs.id), "{listed:?}");
    assert_eq!(listed.len(), 3);
    assert_eq!(store.get(&agent("assistant"), &mine.id).unwrap(), None);
    assert_eq!(
        store.get(&agent("librarian"), &mine.id).unwrap().unwrap(),
        mine
    );
    assert!(matches!(
        store.remove(&agent("assistant"), &mine.id),
        Err(MemoryError::NotFound(_))
    ));
    assert!(matches!(
        store.approve(&agent("assistant"), &mine.id),
        Err(MemoryError::NotFound(_))
    ));
    assert!(store.get(&Reach::Everyone, &mine.id).unwrap().is_some());
    assert_eq!(
        store.agents_with_memory().unwrap(),
        ["assistant", "librarian"]
    );
    // A person reaches everything.
    assert_eq!(
        store
            .search(&Reach::Everyone, &SearchQuery::new("shelf", 10))
            .unwrap()
            .len(),
        4
    );
    // An agent removes its own memory.
    assert_eq!(store.remove(&agent("librarian"), &mine.id).unwrap(), mine);
    assert_eq!(store.get(&Reach::Everyone, &mine.id).unwrap(), None);
}

/// Reads of an empty store find nothing; changes find nothing to change.
pub fn an_empty_store_finds_nothing_and_has_nothing_to_change(fx: &dyn Fixture) {
    let store = fx.store();
    assert!(list_all(fx).is_empty());
    assert!(
        store
            .search(&agent("librarian"), &SearchQuery::new("x y z", 5))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .standing_context(
                "librarian",
                "anything at all",
                StandingOptions::for_run(8, 200_000)
            )
            .unwrap(),
        None
    );
    assert_eq!(
        store.get(&Reach::Everyone, "m-0000000000000000").unwrap(),
        None
    );
    assert!(matches!(
        store.approve(&Reach::Everyone, "m-0000000000000000"),
        Err(MemoryError::NotFound(_))
    ));
    assert!(matches!(
        store.remove(&Reach::Everyone, "m-0000000000000000"),
        Err(MemoryError::NotFound(_))
    ));
    assert_eq!(store.prune_expired(&Reach::Everyone).unwrap(), 0);
    assert!(store.agents_with_memory().unwrap().is_empty());
}

/// Bad text, tags and agent names are refused with errors that say what to do; nothing is
/// stored.
pub fn bad_input_is_refused_with_clear_errors(fx: &dyn Fixture) {
    let store = fx.store();
    let long = "x".repeat(crate::MAX_TEXT_BYTES + 1);
    let e = store
        .put(new_memory(Scope::Agent, "a", &long, &[]))
        .unwrap_err();
    assert!(e.to_string().contains("over the limit of 2000"), "{e}");
    let e = store
        .put(new_memory(Scope::Agent, "a", "  ", &[]))
        .unwrap_err();
    assert!(matches!(e, MemoryError::EmptyText), "{e}");
    let e = store
        .put(new_memory(Scope::Agent, "../x", "fact", &[]))
        .unwrap_err();
    assert!(matches!(e, MemoryError::BadAgentName(_)), "{e}");
    let e = store
        .put(new_memory(Scope::Project, "a b", "fact", &[]))
        .unwrap_err();
    assert!(matches!(e, MemoryError::BadAgentName(_)), "{e}");
    let e = store
        .put(new_memory(Scope::Agent, "a", "fact", &["no spaces"]))
        .unwrap_err();
    assert!(matches!(e, MemoryError::BadTag { .. }), "{e}");
    let nine: Vec<String> = (0..9).map(|i| format!("t{i}")).collect();
    let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
    let e = store
        .put(new_memory(Scope::Agent, "a", "fact", &nine))
        .unwrap_err();
    assert!(matches!(e, MemoryError::TooManyTags { .. }), "{e}");
    let e = store
        .search(
            &agent("a"),
            &SearchQuery {
                tags: vec!["a b".into()],
                ..SearchQuery::new("fact", 5)
            },
        )
        .unwrap_err();
    assert!(matches!(e, MemoryError::BadTag { .. }), "{e}");
    let e = store
        .search(&agent("../x"), &SearchQuery::new("fact", 5))
        .unwrap_err();
    assert!(matches!(e, MemoryError::BadAgentName(_)), "{e}");
    assert!(
        store
            .standing_context("../x", "fact", StandingOptions::for_run(8, 200_000))
            .is_err()
    );
    assert!(list_all(fx).is_empty());
    // Text is stored trimmed.
    let m = put(fx, Scope::Agent, "a", "  padded fact \n", &[]);
    assert_eq!(m.text, "padded fact");
}

/// Storing a fact again (case aside) refreshes the stored one: tags merged, time updated,
/// approval kept or granted.
pub fn storing_the_same_fact_again_refreshes_it_instead_of_duplicating(fx: &dyn Fixture) {
    let store = fx.store();
    let mut first = new_memory(
        Scope::Project,
        "librarian",
        "The archive closes at six",
        &["hours"],
    );
    first.status = Status::Candidate;
    let a = store.put(first).unwrap();
    assert!(a.created && !a.newly_approved);
    fx.clock().advance(Duration::minutes(5));
    let b = store
        .put(new_memory(
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
        b.memory.text, "The archive closes at six",
        "the first text stays"
    );
    assert_eq!(
        b.memory.created_at + Duration::minutes(5),
        b.memory.updated_at
    );
    // An approved memory stays approved when stored again as a candidate; a new expiry
    // replaces the old one; a run keeps the last one named.
    let mut again = new_memory(
        Scope::Project,
        "librarian",
        "The archive closes at six",
        &[],
    );
    again.status = Status::Candidate;
    again.source_run_id = None;
    again.expires_at = Some(fx.clock().now() + Duration::days(1));
    let c = store.put(again).unwrap();
    assert_eq!(c.memory.status, Status::Approved);
    assert!(!c.newly_approved && !c.created);
    assert_eq!(c.memory.source_run_id.as_deref(), Some("run-1"));
    assert_eq!(
        c.memory.expires_at,
        Some(fx.clock().now() + Duration::days(1))
    );
    assert_eq!(fx.stored(Scope::Project, ""), 1);
}

/// A fact is the same only in the same scope, stored by the same agent.
pub fn the_same_text_in_another_scope_or_by_another_agent_is_another_memory(fx: &dyn Fixture) {
    let text = "The printer is on floor two";
    let ids: Vec<String> = [
        (Scope::Agent, "a"),
        (Scope::Agent, "b"),
        (Scope::Project, "a"),
        (Scope::Project, "b"),
        (Scope::Global, "a"),
    ]
    .into_iter()
    .map(|(scope, owner)| {
        let out = fx.store().put(new_memory(scope, owner, text, &[])).unwrap();
        assert!(out.created, "{scope} {owner}");
        out.memory.id
    })
    .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 5);
    assert_eq!(fx.stored(Scope::Project, ""), 2);
    assert_eq!(fx.stored(Scope::Agent, "a"), 1);
    assert_eq!(list_all(fx).len(), 5);
}

// ---------- candidates and approval ----------

/// Candidates are found by people only, until approved.
pub fn candidates_are_hidden_from_agents_until_approved(fx: &dyn Fixture) {
    let store = fx.store();
    let mut c = new_memory(
        Scope::Agent,
        "assistant",
        "The user's cat is called Miso",
        &[],
    );
    c.status = Status::Candidate;
    let out = store.put(c).unwrap();
    assert!(out.created && !out.newly_approved);
    let m = out.memory;
    assert_eq!(m.status, Status::Candidate);
    let q = SearchQuery::new("cat called", 5);
    assert!(store.search(&agent("assistant"), &q).unwrap().is_empty());
    assert_eq!(
        store
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
    assert_eq!(store.search(&Reach::Everyone, &people).unwrap().len(), 1);
    let candidates = ListFilter {
        status: Some(Status::Candidate),
        ..ListFilter::default()
    };
    assert_eq!(store.list(&Reach::Everyone, &candidates).unwrap().len(), 1);
    let approved = ListFilter {
        status: Some(Status::Approved),
        ..ListFilter::default()
    };
    assert!(store.list(&Reach::Everyone, &approved).unwrap().is_empty());

    fx.clock().advance(Duration::seconds(1));
    let (approved_m, changed) = store.approve(&Reach::Everyone, &m.id).unwrap();
    assert!(changed);
    assert_eq!(approved_m.status, Status::Approved);
    assert_eq!(approved_m.updated_at, fx.clock().now());
    assert!(approved_m.updated_at > approved_m.created_at);
    fx.clock().advance(Duration::seconds(1));
    let (again, changed) = store.approve(&Reach::Everyone, &m.id).unwrap();
    assert!(!changed, "approving twice changes nothing");
    assert_eq!(again, approved_m);
    assert_eq!(store.search(&agent("assistant"), &q).unwrap().len(), 1);
    assert!(
        store
            .standing_context(
                "assistant",
                "what is my cat called",
                StandingOptions::for_run(8, 200_000)
            )
            .unwrap()
            .unwrap()
            .contains("Miso")
    );
    assert_eq!(store.list(&Reach::Everyone, &approved).unwrap().len(), 1);
    assert!(matches!(
        store.approve(&Reach::Everyone, "m-0000000000000000"),
        Err(MemoryError::NotFound(_))
    ));
    // The agent itself may approve its own candidate (the command line approves as a
    // person; the rule is the reach).
    let mut c2 = new_memory(Scope::Agent, "assistant", "The dog is called Rex", &[]);
    c2.status = Status::Candidate;
    let m2 = store.put(c2).unwrap().memory;
    assert!(store.approve(&agent("assistant"), &m2.id).unwrap().1);
}

// ---------- expiry ----------

/// From its expiry on a memory is never returned, and the next write (or a prune) deletes
/// it.
pub fn expired_memories_are_never_returned_and_are_pruned(fx: &dyn Fixture) {
    let store = fx.store();
    let mut soon = new_memory(
        Scope::Project,
        "a",
        "The meeting room is B12 today",
        &["rooms"],
    );
    soon.expires_at = Some(fx.clock().now() + Duration::hours(1));
    let soon = store.put(soon).unwrap().memory;
    put(
        fx,
        Scope::Project,
        "a",
        "The library room is B1",
        &["rooms"],
    );
    let q = SearchQuery::new("room", 10);
    assert_eq!(store.search(&agent("a"), &q).unwrap().len(), 2);

    fx.clock().advance(Duration::hours(1));
    // At the expiry instant it is gone from every read.
    assert_eq!(
        texts(&store.search(&agent("a"), &q).unwrap()),
        ["The library room is B1"]
    );
    assert_eq!(store.get(&Reach::Everyone, &soon.id).unwrap(), None);
    assert_eq!(list_all(fx).len(), 1);
    let by_tag = SearchQuery {
        tags: vec!["rooms".into()],
        ..SearchQuery::new("", 10)
    };
    assert_eq!(store.search(&agent("a"), &by_tag).unwrap().len(), 1);
    let block = store
        .standing_context("a", "which room", StandingOptions::for_run(8, 200_000))
        .unwrap()
        .unwrap();
    assert!(!block.contains("B12"), "{block}");
    // Reads leave the row; the next write (or an explicit prune) deletes it.
    assert_eq!(fx.stored(Scope::Project, ""), 2);
    put(fx, Scope::Project, "a", "Another fact", &[]);
    assert_eq!(
        fx.stored(Scope::Project, ""),
        2,
        "expired row pruned, new row added"
    );
    assert!(matches!(
        store.approve(&Reach::Everyone, &soon.id),
        Err(MemoryError::NotFound(_))
    ));
    assert!(matches!(
        store.remove(&Reach::Everyone, &soon.id),
        Err(MemoryError::NotFound(_))
    ));

    // Storing an expired fact again makes a new memory, not a refresh of the dead one.
    let mut later = new_memory(Scope::Project, "a", "Temporary fact", &[]);
    later.expires_at = Some(fx.clock().now() + Duration::days(1));
    store.put(later).unwrap();
    let mut agents_own = new_memory(Scope::Agent, "a", "Temporary private fact", &[]);
    agents_own.expires_at = Some(fx.clock().now() + Duration::days(1));
    store.put(agents_own).unwrap();
    fx.clock().advance(Duration::days(2));
    assert_eq!(fx.stored(Scope::Project, ""), 3);
    assert_eq!(store.prune_expired(&Reach::Everyone).unwrap(), 2);
    assert_eq!(fx.stored(Scope::Project, ""), 2);
    assert_eq!(fx.stored(Scope::Agent, "a"), 0);
    assert_eq!(store.prune_expired(&Reach::Everyone).unwrap(), 0);
    let again = store
        .put(new_memory(Scope::Project, "a", "Temporary fact", &[]))
        .unwrap();
    assert!(again.created);
    assert_eq!(again.memory.expires_at, None);
}

// ---------- search ----------

/// Scopes come in the order agent → project → global; within a scope the best match first.
/// Words are stemmed, tags are words too, common words match nothing.
pub fn search_ranks_by_relevance_within_a_scope_and_scopes_in_order(fx: &dyn Fixture) {
    let store = fx.store();
    put_all(
        fx,
        &[
            (Scope::Project, "Rust is a programming language", &["lang"]),
            (
                Scope::Project,
                "The borrow checker enforces borrow rules in Rust",
                &["lang"],
            ),
            (Scope::Project, "Gardening needs patience", &["hobby"]),
            (
                Scope::Global,
                "Borrow checker errors: read the borrow checker's notes",
                &[],
            ),
            (Scope::Agent, "A checker once borrowed my pen", &[]),
        ],
    );

    let hits = store
        .search(
            &agent("a"),
            &SearchQuery::new("How does the borrow checker work?", 10),
        )
        .unwrap();
    assert_eq!(
        texts(&hits),
        [
            // agent scope first, then project, then global.
            "A checker once borrowed my pen",
            "The borrow checker enforces borrow rules in Rust",
            "Borrow checker errors: read the borrow checker's notes",
        ]
    );
    assert!(hits.iter().all(|h| h.score > 0.0));

    // Within a scope: more of the query's words, and more often, rank higher.
    let hits = store
        .search(
            &agent("a"),
            &SearchQuery {
                scopes: vec![Scope::Project],
                ..SearchQuery::new("rust borrow checker", 10)
            },
        )
        .unwrap();
    assert_eq!(
        texts(&hits),
        [
            "The borrow checker enforces borrow rules in Rust",
            "Rust is a programming language"
        ]
    );
    assert!(hits[0].score > hits[1].score, "{hits:?}");

    // Stemming: "languages" finds "language"; tags are searchable words too.
    let hits = store
        .search(&agent("a"), &SearchQuery::new("languages", 10))
        .unwrap();
    assert_eq!(texts(&hits), ["Rust is a programming language"]);
    let hits = store
        .search(&agent("a"), &SearchQuery::new("hobby", 10))
        .unwrap();
    assert_eq!(texts(&hits), ["Gardening needs patience"]);

    // Limit keeps the best.
    let hits = store
        .search(&agent("a"), &SearchQuery::new("rust borrow", 1))
        .unwrap();
    assert_eq!(texts(&hits), ["A checker once borrowed my pen"]);
    // Only common words: nothing. Query syntax is only words.
    assert!(
        store
            .search(&agent("a"), &SearchQuery::new("the of and", 10))
            .unwrap()
            .is_empty()
    );
    let hits = store
        .search(
            &agent("a"),
            &SearchQuery::new("\"gardening\" OR NOT -patience* (needs", 10),
        )
        .unwrap();
    assert_eq!(texts(&hits), ["Gardening needs patience"]);
    assert!(
        store
            .search(&agent("a"), &SearchQuery::new("quantum", 10))
            .unwrap()
            .is_empty()
    );
    // Only the words the program calls common are left out: a store's own stop words are
    // not. Tags with punctuation are found by their parts.
    put(
        fx,
        Scope::Global,
        "a",
        "Only the very same key opens it",
        &["locale:en-gb"],
    );
    for query in ["only very same", "locale", "gb"] {
        let hits = store
            .search(&agent("a"), &SearchQuery::new(query, 10))
            .unwrap();
        assert_eq!(texts(&hits), ["Only the very same key opens it"], "{query}");
    }
}

/// Tag filters require every tag (any case), combine with words and scope; without words
/// the most recently updated come first.
pub fn tag_filters_require_every_tag_and_combine_with_words_and_scope(fx: &dyn Fixture) {
    let store = fx.store();
    put_all(
        fx,
        &[
            (Scope::Project, "Use tabs in Makefiles", &["style", "make"]),
            (
                Scope::Project,
                "Use four spaces in Python",
                &["style", "python"],
            ),
            (Scope::Global, "Use spaces in YAML", &["style"]),
        ],
    );

    let q = |text: &str, tags: &[&str], scopes: Vec<Scope>| SearchQuery {
        text: text.into(),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        scopes,
        ..SearchQuery::new("", 10)
    };
    let search = |query: SearchQuery| {
        let hits = store.search(&agent("a"), &query).unwrap();
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
    assert_eq!(
        search(q("", &[], vec![Scope::Project, Scope::Global])).len(),
        3
    );
    assert!(search(q("", &["nosuchtag"], vec![])).is_empty());
    assert!(search(q("", &["style"], vec![Scope::Agent])).is_empty());
    // Without words, the most recently updated first, with a score of 0.
    fx.clock().advance(Duration::seconds(1));
    put(fx, Scope::Project, "a", "Use tabs in Go", &["style"]);
    assert_eq!(
        search(q("", &["style"], vec![Scope::Project]))[0],
        "Use tabs in Go"
    );
    let hits = store
        .search(&agent("a"), &q("", &["style"], vec![]))
        .unwrap();
    assert!(hits.iter().all(|h| h.score == 0.0), "{hits:?}");
    // The limit holds without words too.
    assert_eq!(search(SearchQuery::new("", 2)).len(), 2);
}

/// Owner and status filters; a listing of people goes by scope, then recency, across
/// agents.
pub fn search_filters_by_owner_and_status_and_lists_by_scope_then_recency(fx: &dyn Fixture) {
    let store = fx.store();
    put(fx, Scope::Agent, "b", "Bee's own note about tea", &[]);
    fx.clock().advance(Duration::seconds(1));
    put(fx, Scope::Agent, "a", "Ay's own note about tea", &[]);
    fx.clock().advance(Duration::seconds(1));
    put(fx, Scope::Project, "b", "Tea is in the kitchen", &[]);
    fx.clock().advance(Duration::seconds(1));
    let mut cand = new_memory(Scope::Global, "a", "Green tea is preferred", &[]);
    cand.status = Status::Candidate;
    store.put(cand).unwrap();

    let listed: Vec<String> = list_all(fx).into_iter().map(|m| m.text).collect();
    assert_eq!(
        listed,
        [
            "Ay's own note about tea",
            "Bee's own note about tea",
            "Tea is in the kitchen",
            "Green tea is preferred"
        ]
    );
    let by_b = SearchQuery {
        owner: Some("b".into()),
        include_candidates: true,
        ..SearchQuery::new("tea", 10)
    };
    assert_eq!(
        texts(&store.search(&Reach::Everyone, &by_b).unwrap()),
        ["Bee's own note about tea", "Tea is in the kitchen"]
    );
    let people = SearchQuery {
        include_candidates: true,
        ..SearchQuery::new("tea", 10)
    };
    assert_eq!(store.search(&Reach::Everyone, &people).unwrap().len(), 4);
    assert_eq!(
        store
            .search(&Reach::Everyone, &SearchQuery::new("tea", 10))
            .unwrap()
            .len(),
        3
    );
    let filter = ListFilter {
        owner: Some("a".into()),
        status: Some(Status::Candidate),
        ..ListFilter::default()
    };
    let found: Vec<String> = store
        .list(&Reach::Everyone, &filter)
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(found, ["Green tea is preferred"]);
}

// ---------- the standing block ----------

/// The standing block: the header, then the most relevant approved memories, within the
/// limit and the budget; nothing when nothing is relevant.
pub fn the_standing_block_is_one_labelled_system_block_of_the_most_relevant_memories(
    fx: &dyn Fixture,
) {
    let store = fx.store();
    for i in 0..12 {
        let text = format!("Fact {i} about the garden: the beds along the south wall get full sun");
        put(fx, Scope::Project, "a", &text, &[]);
    }
    put_all(
        fx,
        &[
            (
                Scope::Project,
                "The garden gate code is 4711, garden garden",
                &[],
            ),
            (Scope::Project, "Unrelated: the car is blue", &[]),
        ],
    );

    let block = store
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
    let block = store
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

    // Nothing relevant, no topic, or a zero limit: no block at all.
    for (topic, limit) in [("quantum chromodynamics", 8), ("  ", 8), ("garden", 0)] {
        assert_eq!(
            store
                .standing_context("a", topic, StandingOptions::for_run(limit, 200_000))
                .unwrap(),
            None,
            "{topic:?} {limit}"
        );
    }
}

// ---------- concurrency ----------

/// Several runs writing and reading at once: every write lands, none fails.
pub fn concurrent_writers_from_several_runs_lose_nothing_and_never_see_a_lock(fx: &dyn Fixture) {
    const RUNS: usize = 8;
    const EACH: usize = 25;
    let handles: Vec<_> = (0..RUNS)
        .map(|run| {
            let store = fx.store();
            std::thread::spawn(move || {
                let agent = format!("agent{}", run % 2);
                for i in 0..EACH {
                    // Project scope: every run writes the same place. Agent scope: two runs
                    // per agent. Reads interleave with the writes.
                    let mut m = new_memory(
                        Scope::Project,
                        &agent,
                        &format!("run {run} fact {i}"),
                        &["load"],
                    );
                    m.source_run_id = Some(format!("run-{run}"));
                    store.put(m).unwrap();
                    store
                        .put(new_memory(
                            Scope::Agent,
                            &agent,
                            &format!("run {run} private {i}"),
                            &[],
                        ))
                        .unwrap();
                    // The same fact from every run at once: one memory.
                    store
                        .put(new_memory(
                            Scope::Global,
                            "shared",
                            "Everyone knows this",
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
    assert_eq!(fx.stored(Scope::Project, ""), RUNS * EACH);
    assert_eq!(
        fx.stored(Scope::Agent, "agent0") + fx.stored(Scope::Agent, "agent1"),
        RUNS * EACH
    );
    assert_eq!(fx.stored(Scope::Global, ""), 1);
    assert_eq!(list_all(fx).len(), 2 * RUNS * EACH + 1);
}

// ---------- the tools, through the sandbox ----------

/// The sandbox of a test: the memory tools over the fixture's store, confined to a
/// temporary workspace, with a person answering `asker` (or nobody).
struct ToolBench {
    _ws: tempfile::TempDir,
    config: SandboxConfig,
}

impl ToolBench {
    fn new() -> Self {
        let ws = tempfile::tempdir().unwrap();
        let config = SandboxConfig::confined_to(ws.path());
        ToolBench { _ws: ws, config }
    }

    fn sandbox(&self, fx: &dyn Fixture, config: SandboxConfig, asker: Option<bool>) -> Sandbox {
        let mut registry = ToolRegistry::new();
        for tool in crate::tools(fx.store()) {
            registry = registry.with(tool);
        }
        Sandbox::new(config, registry, asker.map(|yes| fx.asker(yes))).unwrap()
    }
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

/// `memory_put` and `memory_remove` ask a person; a yes stores an approved memory of the
/// calling agent and run.
pub async fn memory_put_and_remove_need_permission_and_an_approval_stores_an_approved_memory(
    fx: &dyn Fixture,
) {
    let bench = ToolBench::new();
    let store = fx.store();
    let args =
        json!({"text": "The reading room opens at nine", "tags": ["hours"], "scope": "project"});

    // Nobody to ask: denied, nothing stored.
    let sb = bench.sandbox(fx, bench.config.clone(), None);
    let e = err(sb.execute_as(&caller(), "memory_put", &args).await);
    assert!(e.is_denial(), "{e}");
    assert!(list_all(fx).is_empty());

    // A person says no: denied.
    let sb = bench.sandbox(fx, bench.config.clone(), Some(false));
    assert!(err(sb.execute_as(&caller(), "memory_put", &args).await).is_denial());

    // A person says yes: stored approved, owned by the caller, from the caller's run.
    let sb = bench.sandbox(fx, bench.config.clone(), Some(true));
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
    let m = store.get(&Reach::Everyone, &id).unwrap().unwrap();
    assert_eq!(
        (m.owner_agent.as_str(), m.source_run_id.as_deref()),
        ("librarian", Some("run-42"))
    );
    assert_eq!(m.status, Status::Approved);

    // With a time to live: it expires then.
    let exec = sb
        .execute_as(
            &caller(),
            "memory_put",
            &json!({"text": "The lift is out of order", "ttl_days": 2}),
        )
        .await;
    let lift = ok(exec)["id"].as_str().unwrap().to_string();
    let lift = store.get(&Reach::Everyone, &lift).unwrap().unwrap();
    assert_eq!(lift.expires_at, Some(fx.clock().now() + Duration::days(2)));
    assert_eq!(lift.scope, Scope::Agent);

    // memory_search needs no one.
    let sb_nobody = bench.sandbox(fx, bench.config.clone(), None);
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
    assert!(store.get(&Reach::Everyone, &id).unwrap().is_some());
    let exec = sb
        .execute_as(&caller(), "memory_remove", &json!({"id": id}))
        .await;
    assert_eq!(exec.events[0].kind, ToolEventKind::MemoryRemoved);
    assert_eq!(ok(exec)["removed"], id.as_str());
    assert!(store.get(&Reach::Everyone, &id).unwrap().is_none());
    // Removing it again: a clear error for the model.
    let e = err(sb
        .execute_as(&caller(), "memory_remove", &json!({"id": id}))
        .await);
    assert!(e.to_string().contains("no memory with id"), "{e}");
    // Another agent cannot remove the librarian's own memory.
    let e = err(sb
        .execute_as(
            &Caller::new("assistant", "run-43"),
            "memory_remove",
            &json!({"id": lift.id}),
        )
        .await);
    assert!(e.to_string().contains("no memory with id"), "{e}");
    assert!(store.get(&Reach::Everyone, &lift.id).unwrap().is_some());
}

/// Without a permission prompt, `memory_put` stores a candidate nobody sees until approved.
pub async fn without_a_permission_prompt_memory_put_stores_a_candidate_awaiting_approval(
    fx: &dyn Fixture,
) {
    let bench = ToolBench::new();
    let mut cfg = bench.config.clone();
    cfg.require_user_permission
        .insert("memory_put".into(), false);
    let sb = bench.sandbox(fx, cfg, None);
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
    fx.store().approve(&Reach::Everyone, id).unwrap();
    let found = ok(sb
        .execute_as(
            &caller(),
            "memory_search",
            &json!({"query": "short answers"}),
        )
        .await);
    assert_eq!(found["results"][0]["text"], "Prefers short answers");
}

/// Bad arguments are refused with messages that say what to do; nothing is stored.
pub async fn tool_arguments_are_validated_and_oversize_text_is_refused_clearly(fx: &dyn Fixture) {
    let bench = ToolBench::new();
    let sb = bench.sandbox(fx, bench.config.clone(), Some(true));
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
    assert!(list_all(fx).is_empty());
}

/// `memory_search` answers JSON, best first, within its limit and output size.
pub async fn memory_search_is_ranked_json_bounded_by_limit_and_size(fx: &dyn Fixture) {
    let bench = ToolBench::new();
    for i in 0..30 {
        let text = format!("Note {i} on orchids: {}", "leaf care ".repeat(180));
        put(fx, Scope::Project, "librarian", &text, &["plants"]);
    }
    put(
        fx,
        Scope::Project,
        "librarian",
        "Orchids orchids orchids",
        &["plants"],
    );
    let sb = bench.sandbox(fx, bench.config.clone(), None);
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

/// Many runs calling the tools at once: every call succeeds, every memory is kept.
pub async fn concurrent_tool_calls_from_several_runs_all_succeed(fx: &dyn Fixture) {
    let bench = ToolBench::new();
    let mut cfg = bench.config.clone();
    cfg.rate_limit = lsm_sandbox::RateLimit {
        calls: 1000,
        per_seconds: 1,
    };
    let sb = Arc::new(bench.sandbox(fx, cfg, Some(true)));
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
    assert_eq!(fx.stored(Scope::Project, ""), 80);
}

/// The tools' schemas describe every argument, refuse unknown ones, and take no paths.
pub fn tool_schemas_describe_every_argument_and_deny_unknown_ones(fx: &dyn Fixture) {
    let tools = crate::tools(fx.store());
    for tool in &tools {
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
    let names: Vec<String> = tools.iter().map(|t| t.name().to_string()).collect();
    assert_eq!(names, crate::TOOL_NAMES);
}
