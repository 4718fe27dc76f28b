//! Worker runs through `run_workers` on a real harness: concurrency (seen in the parent's
//! journal, not timed), the bound on workers in flight, failures as escalations, one budget
//! for the tree, worker events in the parent's records and event stream, and a parent killed
//! while its workers ran, resumed to the same outcomes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use lsm_harness::workers::ended_outcome;
use lsm_harness::{
    AgentHarness, EventEnvelope, EventSink, HarnessConfig, ResumePoint, RunEvent, WorkerJob,
    WorkerReporter, WorkerSpawner, read_journal,
};
use lsm_phase::{
    AgentIdentity, PhaseExecutor, RunOutcome, StopReason, WorkerOutcome, WorkerRequest,
};
use lsm_providers::{ScriptedProvider, ScriptedResponse};
use lsm_sandbox::{Sandbox, SandboxConfig};
use serde_json::json;

/// Forwards a worker's events to its parent's watchers.
struct ToParent(WorkerReporter);

impl EventSink for ToParent {
    fn event(&self, event: &EventEnvelope) {
        self.0.progress(event);
    }
}

/// Collects what a parent's event sink is shown.
#[derive(Default)]
struct Shown(Mutex<Vec<EventEnvelope>>);

impl EventSink for Shown {
    fn event(&self, event: &EventEnvelope) {
        self.0.lock().unwrap().push(event.clone());
    }
}

/// Runs each worker as a one-phase harness run on its own script (by item id); items named
/// in `broken` cannot start.
struct Spawner {
    dir: PathBuf,
    scripts: BTreeMap<String, Vec<ScriptedResponse>>,
    broken: BTreeSet<String>,
    /// Every worker's provider, by item id (the last one, when resumed).
    providers: Mutex<BTreeMap<String, Arc<ScriptedProvider>>>,
}

impl Spawner {
    fn new(dir: &Path, scripts: &[(&str, Vec<ScriptedResponse>)]) -> Self {
        Spawner {
            dir: dir.to_path_buf(),
            scripts: scripts
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone()))
                .collect(),
            broken: BTreeSet::new(),
            providers: Mutex::new(BTreeMap::new()),
        }
    }
}

fn worker_config(dir: &Path) -> HarnessConfig {
    HarnessConfig {
        agents_folder: dir.to_path_buf(),
        ..HarnessConfig::default()
    }
}

fn worker_identity(request: &WorkerRequest) -> AgentIdentity {
    AgentIdentity {
        name: format!("worker_{}", request.capability),
        tool_allowlist: vec!["read_file".into()],
        tier: Default::default(),
        topic: request.objective.clone(),
    }
}

#[async_trait::async_trait]
impl WorkerSpawner for Spawner {
    async fn run(&self, job: WorkerJob) -> WorkerOutcome {
        let request = job.request.clone();
        if self.broken.contains(&request.item_id) {
            return WorkerOutcome::failed(&request, "no worker can do that");
        }
        let sandbox = Arc::new(
            Sandbox::new(
                SandboxConfig::confined_to(&self.dir),
                lsm_sandbox::builtin::registry(),
                None,
            )
            .unwrap(),
        );
        let script = self.scripts[&request.item_id].clone();
        let config = worker_config(&self.dir.join("Agents"));
        let (h, provider) = match &job.resume {
            Some(dir) => {
                if let Some(outcome) = ended_outcome(&request, dir, &job.budget) {
                    return outcome;
                }
                let point = ResumePoint::open(dir).unwrap();
                let provider = Arc::new(
                    ScriptedProvider::new(script).starting_at(point.model_calls_made() as usize),
                );
                let h = AgentHarness::resumed(
                    point,
                    worker_identity(&request),
                    "You are a worker.",
                    config,
                    provider.clone(),
                    sandbox,
                );
                (h, provider)
            }
            None => {
                let provider = Arc::new(ScriptedProvider::new(script));
                let h = AgentHarness::new(
                    worker_identity(&request),
                    "You are a worker.",
                    config,
                    provider.clone(),
                    sandbox,
                );
                (h, provider)
            }
        };
        self.providers
            .lock()
            .unwrap()
            .insert(request.item_id.clone(), provider);
        let mut h = h
            .with_budget(job.budget.clone())
            .with_stop_token(job.stop.clone())
            .with_event_sink(Arc::new(ToParent(job.reporter.clone())));
        job.reporter
            .started(h.run_id(), "worker", &h.run_dir(), &request.objective);
        let report = h.run(&request.objective).await;
        WorkerOutcome {
            item_id: request.item_id.clone(),
            capability: request.capability.clone(),
            worker_run_id: Some(h.run_id().to_string()),
            stop_reason: report.result.stop_reason,
            report: h.run_report().unwrap_or_default(),
            error: None,
        }
    }
}

fn parent(dir: &Path, budget: u64, spawner: Arc<Spawner>) -> (AgentHarness, Arc<Shown>) {
    let shown = Arc::new(Shown::default());
    let sandbox = Arc::new(
        Sandbox::new(
            SandboxConfig::confined_to(dir),
            lsm_sandbox::builtin::registry(),
            None,
        )
        .unwrap(),
    );
    let config = HarnessConfig {
        agents_folder: dir.join("Agents"),
        max_tokens_budget: budget,
        ..HarnessConfig::default()
    };
    let identity = AgentIdentity {
        name: "conductor".into(),
        tool_allowlist: Vec::new(),
        tier: Default::default(),
        topic: "conduct".into(),
    };
    let h = AgentHarness::new(
        identity,
        "You conduct.",
        config,
        Arc::new(ScriptedProvider::new(Vec::new())),
        sandbox,
    )
    .with_worker_spawner(spawner)
    .with_event_sink(Arc::clone(&shown) as Arc<dyn EventSink>);
    (h, shown)
}

fn request(item: &str, capability: &str) -> WorkerRequest {
    WorkerRequest {
        item_id: item.into(),
        capability: capability.into(),
        objective: format!("do {item}"),
    }
}

/// Read `notes.md`, then report a finding citing the read.
fn reading_worker(claim: &str) -> Vec<ScriptedResponse> {
    let mut first =
        ScriptedResponse::tool("read_file", json!({"path": "notes.md"})).with_usage(10, 5);
    first.delay_ms = Some(30);
    vec![
        first,
        ScriptedResponse::tool(
            "complete",
            json!({"summary": format!("found {claim}"),
                   "findings": [{"claim": claim, "confidence": 0.8,
                                 "evidence_refs": ["call_1_0", "notes.md"]}],
                   "learnings": [format!("{claim} was easy")]}),
        )
        .with_usage(10, 5),
    ]
}

fn journal(run_dir: &Path) -> Vec<RunEvent> {
    read_journal(&run_dir.join("transcript.jsonl"))
        .unwrap()
        .events
        .into_iter()
        .map(|e| e.event)
        .collect()
}

/// The most workers in flight at once, from the parent's journal.
fn most_in_flight(events: &[RunEvent]) -> usize {
    let mut now: usize = 0;
    let mut most = 0;
    for e in events {
        match e {
            RunEvent::WorkerStarted { .. } => {
                now += 1;
                most = most.max(now);
            }
            RunEvent::WorkerCompleted { .. } | RunEvent::WorkerFailed { .. } => {
                now = now.saturating_sub(1);
            }
            _ => {}
        }
    }
    most
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "Soil holds carbon.\n").unwrap();
    dir
}

#[tokio::test]
async fn three_workers_run_at_once_and_their_reports_reach_the_parent() {
    let dir = workspace();
    let spawner = Arc::new(Spawner::new(
        dir.path(),
        &[
            ("a", reading_worker("A")),
            ("b", reading_worker("B")),
            ("c", reading_worker("C")),
        ],
    ));
    let (mut h, shown) = parent(dir.path(), 100_000, spawner);
    let outcomes = h
        .run_workers(
            vec![
                request("a", "researcher"),
                request("b", "researcher"),
                request("c", "terminal"),
            ],
            3,
        )
        .await;
    assert_eq!(
        outcomes
            .iter()
            .map(|o| o.item_id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "c"],
        "in the order asked"
    );
    for (o, claim) in outcomes.iter().zip(["A", "B", "C"]) {
        assert!(o.succeeded(), "{o:?}");
        assert_eq!(o.report.findings[0].claim, claim);
        assert_eq!(o.report.findings[0].evidence_refs, ["call_1_0", "notes.md"]);
    }
    h.finish(RunOutcome::Completed).await;
    let events = journal(&h.run_dir());
    assert_eq!(most_in_flight(&events), 3, "all three overlapped");
    let names: Vec<&str> = events.iter().map(RunEvent::name).collect();
    assert_eq!(names.iter().filter(|n| **n == "worker_finding").count(), 3);
    assert_eq!(names.iter().filter(|n| **n == "worker_learning").count(), 3);
    assert_eq!(
        names.iter().filter(|n| **n == "worker_completed").count(),
        3
    );
    assert_eq!(names.last(), Some(&"run_finished"));
    // Whoever watches the parent sees the workers' progress, each line naming its worker
    // and the parent.
    let shown = shown.0.lock().unwrap();
    let progress: Vec<&EventEnvelope> = shown
        .iter()
        .filter(|e| e.event.name() == "worker_progress")
        .collect();
    assert!(progress.len() >= 9, "{}", progress.len());
    assert!(progress.iter().all(|e| e.seq == 0), "never journaled");
    assert!(progress.iter().all(|e| matches!(
        &e.event,
        RunEvent::WorkerProgress { parent_run_id, .. } if parent_run_id == h.run_id()
    )));
    // The tree's tokens: the workers' calls are the parent's budget's.
    let summary = h.summary("completed", "done");
    assert_eq!(summary.token_usage.tokens_used, 6 * 15);
    assert_eq!(summary.token_usage.workers_tokens_used, 6 * 15);
}

#[tokio::test]
async fn max_concurrent_bounds_the_workers_in_flight() {
    let dir = workspace();
    let scripts: Vec<(&str, Vec<ScriptedResponse>)> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|k| (k, reading_worker(k)))
        .collect();
    let spawner = Arc::new(Spawner::new(dir.path(), &scripts));
    let (mut h, _) = parent(dir.path(), 100_000, spawner);
    let requests = ["a", "b", "c", "d"]
        .into_iter()
        .map(|k| request(k, "researcher"))
        .collect();
    let outcomes = h.run_workers(requests, 2).await;
    assert!(outcomes.iter().all(WorkerOutcome::succeeded));
    h.finish(RunOutcome::Completed).await;
    assert_eq!(most_in_flight(&journal(&h.run_dir())), 2);
}

#[tokio::test]
async fn a_worker_that_cannot_run_or_blocks_is_an_escalation_never_a_crash() {
    let dir = workspace();
    let mut spawner = Spawner::new(
        dir.path(),
        &[
            ("ok", reading_worker("fine")),
            (
                "stuck",
                vec![
                    ScriptedResponse::tool("block", json!({"reason": "no access to the lab"}))
                        .with_usage(10, 5),
                ],
            ),
            ("gone", Vec::new()),
        ],
    );
    spawner.broken.insert("gone".into());
    let (mut h, _) = parent(dir.path(), 100_000, Arc::new(spawner));
    let outcomes = h
        .run_workers(
            vec![
                request("ok", "researcher"),
                request("stuck", "terminal"),
                request("gone", "painter"),
            ],
            3,
        )
        .await;
    assert!(outcomes[0].succeeded());
    assert_eq!(outcomes[1].stop_reason, StopReason::Blocked);
    assert!(!outcomes[1].succeeded());
    assert_eq!(
        outcomes[1].report.escalations,
        ["blocked: no access to the lab"]
    );
    assert_eq!(outcomes[2].stop_reason, StopReason::Error);
    assert_eq!(outcomes[2].report.escalations, ["no worker can do that"]);
    h.finish(RunOutcome::Completed).await;
    let failed = journal(&h.run_dir())
        .iter()
        .filter(|e| e.name() == "worker_failed")
        .count();
    assert_eq!(failed, 2);
}

#[tokio::test]
async fn the_shared_budget_ends_every_worker_and_no_call_starts_after_it_is_spent() {
    let dir = workspace();
    // Each worker would read forever: 50 tool calls of 100 + 10 tokens each.
    let endless = |k: &str| -> Vec<ScriptedResponse> {
        (0..50)
            .map(|i| {
                let mut r = ScriptedResponse::tool(
                    "read_file",
                    json!({"path": "notes.md", "k": format!("{k}{i}")}),
                )
                .with_usage(100, 10);
                r.delay_ms = Some(2);
                r
            })
            .collect()
    };
    let spawner = Arc::new(Spawner::new(
        dir.path(),
        &[
            ("a", endless("a")),
            ("b", endless("b")),
            ("c", endless("c")),
        ],
    ));
    let budget = 2_000;
    let (mut h, _) = parent(dir.path(), budget, Arc::clone(&spawner));
    let outcomes = h
        .run_workers(
            vec![
                request("a", "researcher"),
                request("b", "researcher"),
                request("c", "researcher"),
            ],
            3,
        )
        .await;
    for o in &outcomes {
        assert_eq!(o.stop_reason, StopReason::BudgetExhausted, "{o:?}");
    }
    // Every call reached a model only while the tree had budget left: the calls served
    // account for everything spent, and the overshoot is at most one call's prompt per
    // worker in flight.
    let served: usize = spawner
        .providers
        .lock()
        .unwrap()
        .values()
        .map(|p| p.requests().len())
        .sum();
    let spent = h.budget().usage().tokens_used;
    assert_eq!(spent, served as u64 * 110);
    assert!(spent <= budget + 3 * 100, "{spent}");
    assert!(spent >= budget, "the budget was used up: {spent}");
}

#[tokio::test]
async fn a_parent_killed_while_its_workers_ran_resumes_to_the_same_outcomes() {
    let base = tempfile::tempdir().unwrap();
    let scripts = |k: &str| reading_worker(k);
    let requests = || vec![request("a", "researcher"), request("b", "researcher")];
    // The reference: one process, to the end.
    let ref_dir = base.path().join("ref");
    std::fs::create_dir_all(&ref_dir).unwrap();
    std::fs::write(ref_dir.join("notes.md"), "Soil holds carbon.\n").unwrap();
    let spawner = Arc::new(Spawner::new(
        &ref_dir,
        &[("a", scripts("a")), ("b", scripts("b"))],
    ));
    let (mut h, _) = parent(&ref_dir, 100_000, spawner);
    let reference = h.run_workers(requests(), 2).await;
    let ref_tokens = h.budget().usage().tokens_used;
    drop(h);

    // Killed after both workers started; one worker's journal cut after its first answer.
    let dir = base.path().join("cut");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.md"), "Soil holds carbon.\n").unwrap();
    let spawner = Arc::new(Spawner::new(
        &dir,
        &[("a", scripts("a")), ("b", scripts("b"))],
    ));
    let (mut h, _) = parent(&dir, 100_000, spawner);
    h.run_workers(requests(), 2).await;
    let run_dir = h.run_dir();
    drop(h);
    let lines = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    let kept: Vec<&str> = lines.lines().collect();
    let n = kept
        .iter()
        .rposition(|l| l.contains("\"event\":\"worker_started\""))
        .unwrap()
        + 1;
    std::fs::write(
        run_dir.join("transcript.jsonl"),
        kept[..n]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let _ = std::fs::remove_file(run_dir.join("run_summary.json"));
    let worker_dir = read_journal(&run_dir.join("transcript.jsonl"))
        .unwrap()
        .events
        .iter()
        .find_map(|e| match &e.event {
            RunEvent::WorkerStarted {
                item_id, run_dir, ..
            } if item_id == "a" => Some(PathBuf::from(run_dir)),
            _ => None,
        })
        .unwrap();
    let wl = std::fs::read_to_string(worker_dir.join("transcript.jsonl")).unwrap();
    let cut = wl
        .lines()
        .position(|l| l.contains("\"event\":\"llm_response\""))
        .unwrap()
        + 1;
    std::fs::write(
        worker_dir.join("transcript.jsonl"),
        wl.lines()
            .take(cut)
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let _ = std::fs::remove_file(worker_dir.join("run_summary.json"));

    let point = ResumePoint::open(&run_dir).unwrap();
    let spawner = Arc::new(Spawner::new(
        &dir,
        &[("a", scripts("a")), ("b", scripts("b"))],
    ));
    let sandbox = Arc::new(
        Sandbox::new(
            SandboxConfig::confined_to(&dir),
            lsm_sandbox::builtin::registry(),
            None,
        )
        .unwrap(),
    );
    let mut h = AgentHarness::resumed(
        point,
        AgentIdentity {
            name: "conductor".into(),
            tool_allowlist: Vec::new(),
            tier: Default::default(),
            topic: "conduct".into(),
        },
        "You conduct.",
        HarnessConfig {
            agents_folder: dir.join("Agents"),
            max_tokens_budget: 100_000,
            ..HarnessConfig::default()
        },
        Arc::new(ScriptedProvider::new(Vec::new())),
        sandbox,
    )
    .with_worker_spawner(Arc::clone(&spawner) as Arc<dyn WorkerSpawner>);
    let resumed = h.run_workers(requests(), 2).await;
    let strip = |o: &[WorkerOutcome]| -> Vec<(String, StopReason, lsm_phase::TurnReport)> {
        o.iter()
            .map(|o| (o.item_id.clone(), o.stop_reason, o.report.clone()))
            .collect()
    };
    assert_eq!(strip(&resumed), strip(&reference));
    // Worker a continued after its first answer; b had ended and was read, not rerun.
    let providers = spawner.providers.lock().unwrap();
    assert_eq!(providers["a"].requests().len(), 1, "only a's second answer");
    assert!(!providers.contains_key("b"), "b was not run again");
    assert_eq!(
        h.budget().usage().tokens_used,
        ref_tokens,
        "the tree's tokens"
    );
}
