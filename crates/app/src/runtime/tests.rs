//! The runtime manager: concurrency limit and queue, status, stop, routing answers, logs —
//! with a controllable launcher, and end to end with the real harness on a scripted model.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lsm_interaction::{AnswerSource, Decision, InteractionConfig, InteractionEvent};
use lsm_sandbox::{PermissionRequest, RiskLevel, SandboxConfig};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

use super::*;
use crate::config::Config;

/// A launcher whose runs ask permission when told to, and end when released.
#[derive(Default)]
struct Controlled {
    release: Mutex<HashMap<String, Arc<Notify>>>,
    ask: bool,
    answers: Mutex<HashMap<String, oneshot::Sender<bool>>>,
}

impl Controlled {
    fn release(&self, run_id: &str) {
        lock(&self.release)
            .entry(run_id.to_string())
            .or_default()
            .notify_one();
    }
}

#[async_trait::async_trait]
impl RunLauncher for Controlled {
    async fn launch(&self, ctx: LaunchContext) -> RunEnd {
        ctx.log.push("note", format!("{} started", ctx.run_id));
        if self.ask {
            let d = ctx
                .channel
                .ask_permission(&PermissionRequest {
                    tool_name: "write_file".into(),
                    risk_level: RiskLevel::WritesWorkspace,
                    reason: "test".into(),
                    args_summary: "{}".into(),
                    preview: None,
                })
                .await;
            if let Some(tx) = lock(&self.answers).remove(&ctx.run_id) {
                let _ = tx.send(d.allowed);
            }
        }
        let release = Arc::clone(lock(&self.release).entry(ctx.run_id.clone()).or_default());
        tokio::select! {
            () = release.notified() => RunEnd {
                status: RunStatus::Completed, outcome: "done".into(), final_text: "ok".into(),
            },
            () = ctx.stop.cancelled() => RunEnd {
                status: RunStatus::Stopped, outcome: "stop_requested".into(), final_text: String::new(),
            },
        }
    }
}

/// A run of the general agent on `task`.
fn general(task: &str) -> crate::run::RunRequest {
    crate::run::RunRequest {
        name: "general".into(),
        task: Some(task.into()),
        ..crate::run::RunRequest::default()
    }
}

/// [`general`] on the script `harness_manager` wrote in `dir`.
fn scripted(dir: &Path, task: &str) -> crate::run::RunRequest {
    crate::run::RunRequest {
        llm: crate::wiring::ProviderFlags {
            provider: Some(format!("scripted:{}", dir.join("script.jsonl").display())),
            ..Default::default()
        },
        ..general(task)
    }
}

/// Every event as its name (how a front end shows them does not matter here).
fn every_event(e: &lsm_harness::EventEnvelope) -> Option<String> {
    Some(e.event.name().to_string())
}

fn config(max_concurrent: usize, log_limit: usize) -> ManagerConfig {
    ManagerConfig {
        max_concurrent,
        log_stream_queue_limit: log_limit,
        interaction: InteractionConfig::default(),
        describe: every_event,
    }
}

fn manager(launcher: Arc<dyn RunLauncher>, max_concurrent: usize) -> AgentRuntimeManager {
    AgentRuntimeManager::new(
        config(max_concurrent, 500),
        launcher,
        tokio::runtime::Handle::current(),
    )
}

async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

fn statuses(m: &AgentRuntimeManager) -> Vec<RunStatus> {
    m.list().iter().map(|r| r.status).collect()
}

#[tokio::test(start_paused = true)]
async fn runs_beyond_max_concurrent_wait_in_a_queue() {
    let launcher = Arc::new(Controlled::default());
    let m = manager(launcher.clone(), 2);
    let ids: Vec<String> = (0..3)
        .map(|i| m.start(general(&format!("task {i}"))).unwrap())
        .collect();
    assert_eq!(ids, ["r1", "r2", "r3"]);
    settle().await;
    use RunStatus::*;
    assert_eq!(statuses(&m), [Running, Running, Queued]);
    launcher.release("r1");
    let r1 = m.wait("r1").await.unwrap();
    assert_eq!(r1.status, Completed);
    settle().await;
    assert_eq!(statuses(&m), [Completed, Running, Running]);
    launcher.release("r2");
    launcher.release("r3");
    assert_eq!(m.wait("r3").await.unwrap().status, Completed);
    assert_eq!(m.get("r3").unwrap().task, "task 2");
}

#[tokio::test(start_paused = true)]
async fn a_stopped_queued_run_never_starts() {
    let launcher = Arc::new(Controlled::default());
    let m = manager(launcher.clone(), 1);
    m.start(general("a")).unwrap();
    m.start(general("b")).unwrap();
    settle().await;
    m.stop("r2").unwrap();
    let r2 = m.wait("r2").await.unwrap();
    assert_eq!(r2.status, RunStatus::Stopped);
    assert!(m.logs("r2").unwrap().lines.is_empty(), "it ran");
    assert_eq!(m.get("r1").unwrap().status, RunStatus::Running);
    m.stop("r1").unwrap();
    assert_eq!(m.wait("r1").await.unwrap().status, RunStatus::Stopped);
}

#[tokio::test(start_paused = true)]
async fn a_pending_request_shows_as_waiting_user_and_stop_releases_it_with_a_denial() {
    let launcher = Arc::new(Controlled {
        ask: true,
        ..Controlled::default()
    });
    let (tx, rx) = oneshot::channel();
    lock(&launcher.answers).insert("r1".into(), tx);
    let m = manager(launcher.clone(), 5);
    m.start(general("t")).unwrap();
    let mut pending = m.subscribe_pending("r1").unwrap();
    pending.wait_for(Option::is_some).await.unwrap();
    assert_eq!(m.get("r1").unwrap().status, RunStatus::WaitingUser);
    assert!(m.pending("r1").unwrap().is_some());
    m.stop("r1").unwrap();
    assert!(!rx.await.unwrap(), "a stopped run's request was allowed");
    assert_eq!(m.wait("r1").await.unwrap().status, RunStatus::Stopped);
    assert!(m.pending("r1").unwrap().is_none());
}

#[tokio::test(start_paused = true)]
async fn answers_are_routed_to_the_right_run_and_wrong_ids_are_refused() {
    let launcher = Arc::new(Controlled {
        ask: true,
        ..Controlled::default()
    });
    let (tx1, rx1) = oneshot::channel();
    let (tx2, rx2) = oneshot::channel();
    lock(&launcher.answers).insert("r1".into(), tx1);
    lock(&launcher.answers).insert("r2".into(), tx2);
    let m = manager(launcher.clone(), 5);
    m.start(general("one")).unwrap();
    m.start(general("two")).unwrap();
    for id in ["r1", "r2"] {
        m.subscribe_pending(id)
            .unwrap()
            .wait_for(Option::is_some)
            .await
            .unwrap();
    }
    let req1 = m.pending("r1").unwrap().unwrap().request.request_id;
    let req2 = m.pending("r2").unwrap().unwrap().request.request_id;
    // r2's request id does not answer r1.
    let e = m.respond("r1", &req2, Decision::Approve, "").unwrap_err();
    assert!(matches!(e, ManagerError::Interaction { .. }), "{e}");
    assert!(m.acknowledge_interaction("r1", &req2).is_err());
    assert!(matches!(
        m.respond("r9", &req1, Decision::Approve, ""),
        Err(ManagerError::UnknownRun(_))
    ));
    assert_eq!(m.acknowledge_interaction("r1", &req1), Ok(true));
    assert_eq!(m.acknowledge_interaction("r1", &req1), Ok(false));
    m.respond("r1", &req1, Decision::Approve, "").unwrap();
    m.respond("r2", &req2, Decision::Deny, "no").unwrap();
    assert!(rx1.await.unwrap());
    assert!(!rx2.await.unwrap());
    launcher.release("r1");
    launcher.release("r2");
    m.wait("r2").await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn each_run_has_its_own_bounded_log() {
    let launcher = Arc::new(Controlled::default());
    let m = AgentRuntimeManager::new(
        config(5, 3),
        launcher.clone(),
        tokio::runtime::Handle::current(),
    );
    m.start(general("a")).unwrap();
    m.start(general("b")).unwrap();
    settle().await;
    let log = m.log_stream("r1").unwrap();
    for i in 0..5 {
        log.push("note", format!("line {i}"));
    }
    let s = m.logs("r1").unwrap();
    assert_eq!(s.lines.len(), 3);
    assert_eq!(s.dropped, 3);
    assert_eq!(s.lines.last().unwrap().text, "line 4");
    assert_eq!(m.logs("r2").unwrap().lines.len(), 1);
    m.shutdown("test over");
    assert_eq!(m.start(general("c")), Err(ManagerError::ShuttingDown));
    m.wait("r1").await.unwrap();
}

// ---------- end to end: the real harness, a scripted model, answers through the manager ----------

fn harness_manager(
    dir: &Path,
    script: &[Value],
    interaction: InteractionConfig,
) -> AgentRuntimeManager {
    let script_path = dir.join("script.jsonl");
    let text: String = script.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&script_path, text).unwrap();
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut config = Config::default();
    config.agents.agents_folder = dir.join("Agents");
    config.sandbox = SandboxConfig::confined_to(&ws);
    config.agents.interaction = interaction.clone();
    let launcher = HarnessLauncher::new(config, lsm_agents::Catalog::builtin(), dir.to_path_buf());
    AgentRuntimeManager::new(
        ManagerConfig {
            max_concurrent: 5,
            log_stream_queue_limit: 500,
            interaction,
            describe: every_event,
        },
        Arc::new(launcher),
        tokio::runtime::Handle::current(),
    )
}

fn write_script() -> Vec<Value> {
    use lsm_test_support::script::{call, text};
    vec![
        call(
            "write_file",
            json!({"path": "out.md", "content": "approved content"}),
        ),
        text("finished"),
    ]
}

fn transcript(dir: &Path, info: &RunInfo) -> Vec<Value> {
    let path = dir
        .join("Agents/general/logs")
        .join(info.record_id.as_deref().unwrap())
        .join("transcript.jsonl");
    lsm_test_support::script::read_jsonl(&path)
}

fn names(t: &[Value]) -> Vec<&str> {
    t.iter()
        .filter_map(|e| e["event"].as_str())
        .filter(|n| n.starts_with("interaction_") || n.starts_with("tool_"))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_scripted_agent_asks_to_write_and_the_manager_approves() {
    let dir = tempfile::tempdir().unwrap();
    let m = harness_manager(dir.path(), &write_script(), InteractionConfig::default());
    let run = m.start(scripted(dir.path(), "write out.md")).unwrap();
    let mut pending = m.subscribe_pending(&run).unwrap();
    pending.wait_for(Option::is_some).await.unwrap();
    assert_eq!(m.get(&run).unwrap().status, RunStatus::WaitingUser);
    let request = m.pending(&run).unwrap().unwrap().request;
    assert_eq!(request.tool_name, "write_file");
    assert_eq!(
        request.prompt,
        "Allow tool 'write_file' (risk: writes_workspace)?"
    );
    assert!(!dir.path().join("ws/out.md").exists());
    assert!(
        m.acknowledge_interaction(&run, &request.request_id)
            .unwrap()
    );
    // Acknowledged: an hour later it still waits (acknowledged_timeout_seconds = 0).
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(m.get(&run).unwrap().status, RunStatus::WaitingUser);
    m.respond(&run, &request.request_id, Decision::Approve, "")
        .unwrap();
    let info = m.wait(&run).await.unwrap();
    assert_eq!(info.status, RunStatus::Completed, "{info:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/out.md")).unwrap(),
        "approved content"
    );
    let t = transcript(dir.path(), &info);
    assert_eq!(
        names(&t),
        [
            "tool_call_started",
            "interaction_request",
            "interaction_acknowledged",
            "interaction_response",
            "tool_result"
        ]
    );
    let answer = t
        .iter()
        .find(|e| e["event"] == "interaction_response")
        .unwrap();
    assert_eq!(answer["decision"], "approve");
    assert_eq!(answer["source"], "person");
    // The live log saw the request too.
    let log = m.logs(&run).unwrap();
    assert!(
        log.lines.iter().any(|l| l.event == "interaction_request"),
        "{log:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_scripted_agent_asks_to_write_and_the_request_times_out_denied() {
    let dir = tempfile::tempdir().unwrap();
    let mut script = write_script();
    script[1] =
        json!({"text": "could not write", "usage": {"input_tokens": 10, "output_tokens": 5}});
    let m = harness_manager(dir.path(), &script, InteractionConfig::default());
    let run = m.start(scripted(dir.path(), "write out.md")).unwrap();
    m.subscribe_pending(&run)
        .unwrap()
        .wait_for(Option::is_some)
        .await
        .unwrap();
    assert_eq!(m.get(&run).unwrap().status, RunStatus::WaitingUser);
    // Nobody acknowledges: paused time runs to the 300 s deadline.
    let info = m.wait(&run).await.unwrap();
    assert_eq!(info.status, RunStatus::Completed, "{info:?}");
    assert!(
        !dir.path().join("ws/out.md").exists(),
        "written without approval"
    );
    let t = transcript(dir.path(), &info);
    assert_eq!(
        names(&t),
        [
            "tool_call_started",
            "interaction_request",
            "interaction_timeout",
            "interaction_response",
            "tool_denied"
        ]
    );
    let answer = t
        .iter()
        .find(|e| e["event"] == "interaction_response")
        .unwrap();
    assert_eq!(answer["decision"], "deny");
    assert_eq!(answer["source"], "timeout");
    let denied = t.iter().find(|e| e["event"] == "tool_denied").unwrap();
    let reason = denied["reason"].as_str().unwrap();
    assert!(reason.contains("timed out after 300 s"), "{reason}");
    // The run's summary counts the denial.
    let summary: Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join("Agents/general/logs")
                .join(info.record_id.as_deref().unwrap())
                .join("run_summary.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(summary["approvals_denials"]["denials"], 1);
}

#[tokio::test(start_paused = true)]
async fn ask_user_is_answered_through_the_manager() {
    let dir = tempfile::tempdir().unwrap();
    let script = vec![
        json!({"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which title?"}}],
               "usage": {"input_tokens": 10, "output_tokens": 5}}),
        json!({"text": "used it", "usage": {"input_tokens": 10, "output_tokens": 5}}),
    ];
    let m = harness_manager(dir.path(), &script, InteractionConfig::default());
    let run = m.start(scripted(dir.path(), "ask")).unwrap();
    m.subscribe_pending(&run)
        .unwrap()
        .wait_for(Option::is_some)
        .await
        .unwrap();
    let req = m.pending(&run).unwrap().unwrap().request;
    assert!(req.request_id.starts_with("clarify-"));
    m.respond(&run, &req.request_id, Decision::Reply, "Rust notes")
        .unwrap();
    let info = m.wait(&run).await.unwrap();
    let t = transcript(dir.path(), &info);
    let result = t.iter().find(|e| e["event"] == "tool_result").unwrap();
    assert_eq!(result["content"], "Rust notes");
    let _ = (
        AnswerSource::Person,
        std::marker::PhantomData::<InteractionEvent>,
    );
}
