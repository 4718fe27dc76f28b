//! Seed 000 §2.3–2.4 and seed 001 §6.3 layers 3 and 4: AgentCore's executor lifecycle,
//! forwarding, workspace accessors, artifact names and the agent log.

use std::io::Write;
use std::sync::{Arc, Mutex};

use chrono::{TimeZone, Utc};
use lsm_phase::{DirectToolCall, PhaseRequest, RunOutcome, StopReason};
use serde_json::json;

use super::spy::{Spy, context, done, is_artifact_name, log_lines, stopped};
use crate::{
    Agent, AgentCore, AgentError, AgentLogSink, artifact_filename_at, sanitize_artifact_name,
};

fn core_on(spy: &Arc<Spy>) -> (tempfile::TempDir, AgentCore) {
    let (dir, ctx) = context(spy);
    (dir, AgentCore::new(super::spy::spec("general"), ctx))
}

// ---------- the executor lifecycle (layer 3) ----------

#[tokio::test]
async fn the_first_phase_creates_exactly_one_executor_and_later_phases_reuse_it() {
    let spy = Spy::new(|_| done("ok"));
    let (_dir, mut core) = core_on(&spy);
    core.begin_run("the topic");
    assert_eq!(spy.created_count(), 0, "no executor before the first phase");
    for i in 0..4 {
        core.run_phase("prompt", PhaseRequest::new(format!("phase {i}")))
            .await;
    }
    assert_eq!(spy.created_count(), 1);
    let indices: Vec<usize> = spy
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(indices, [0, 0, 0, 0]);
    let (identity, prompt) = spy.created.lock().unwrap()[0].clone();
    assert_eq!(identity.name, "general");
    assert_eq!(identity.topic, "the topic");
    assert_eq!(prompt, "prompt");
    assert_eq!(identity.tool_allowlist, core.tool_allowlist());
}

#[tokio::test]
async fn each_run_gets_a_fresh_executor_and_finishes_it() {
    let spy = Spy::new(|_| done("answer"));
    let (_dir, ctx) = context(&spy);
    let mut agent = super::spy::builtin("general", ctx);
    let first = agent.run("task one").await;
    assert_eq!(spy.created_count(), 1);
    let second = agent.run("task two").await;
    assert_eq!(
        spy.created_count(),
        2,
        "a second run creates a second executor"
    );
    assert_eq!(
        spy.finished(),
        [(0, RunOutcome::Completed), (1, RunOutcome::Completed)]
    );
    let indices: Vec<usize> = spy
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(indices, [0, 1], "each run's phase went to its own executor");
    assert_eq!(spy.created.lock().unwrap()[1].0.topic, "task two");
    assert_ne!(first.artifacts, second.artifacts);
}

#[tokio::test]
async fn begin_run_replaces_an_executor_left_by_an_unfinished_run() {
    let spy = Spy::new(|_| done("ok"));
    let (_dir, mut core) = core_on(&spy);
    core.begin_run("a");
    core.run_phase("p", PhaseRequest::new("x")).await;
    core.begin_run("b");
    core.run_phase("p", PhaseRequest::new("y")).await;
    assert_eq!(spy.created_count(), 2);
    assert!(
        spy.finished().is_empty(),
        "the abandoned run was never finished"
    );
}

/// Captures `tracing` output at debug level for the current thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_later_phases_different_system_prompt_is_ignored_with_a_debug_log() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let spy = Spy::new(|_| done("ok"));
    let (_dir, mut core) = core_on(&spy);
    core.begin_run("t");
    core.run_phase("first prompt", PhaseRequest::new("a")).await;
    core.run_phase("first prompt", PhaseRequest::new("b")).await;
    let logged_same = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        !logged_same.contains("system prompt differs"),
        "{logged_same}"
    );
    core.run_phase("another prompt", PhaseRequest::new("c"))
        .await;
    assert_eq!(spy.created_count(), 1);
    assert_eq!(spy.created.lock().unwrap()[0].1, "first prompt");
    let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("DEBUG") && logged.contains("system prompt differs"),
        "{logged}"
    );
}

#[tokio::test]
async fn every_request_field_is_forwarded_unchanged_including_context_label() {
    let spy = Spy::new(|_| done("ok"));
    let (_dir, mut core) = core_on(&spy);
    core.begin_run("t");
    let request = PhaseRequest::new("look at subtopic x")
        .with_tool_names(["query_and_synthesize"])
        .with_max_iterations(3)
        .with_continue_context(false)
        .with_context_label(Some("subtopic:x"));
    let primary = PhaseRequest::new("primary").with_context_label(None::<String>);
    core.run_phase("p", request.clone()).await;
    core.run_phase("p", primary.clone()).await;
    assert_eq!(spy.requests(), [request, primary]);
    assert_eq!(
        spy.requests()[0].context_label.as_deref(),
        Some("subtopic:x")
    );
    assert_eq!(spy.requests()[1].context_label, None);
}

#[tokio::test]
async fn direct_tool_calls_are_forwarded_and_create_then_reuse_the_executor() {
    let spy = Spy::new(|r| {
        if r.direct_tool_calls.is_some() {
            stopped(StopReason::Done)
        } else {
            done("llm")
        }
    });
    let (_dir, mut core) = core_on(&spy);
    core.begin_run("t");
    let calls = vec![DirectToolCall {
        name: "hash_file".into(),
        arguments: json!({"path": "a.md"}),
    }];
    let result = core
        .run_phase("the prompt", PhaseRequest::direct(calls.clone()))
        .await;
    assert_eq!(result.stop_reason, StopReason::Done);
    assert_eq!(
        spy.created_count(),
        1,
        "tool-only mode still creates the executor (the sandbox lives there)"
    );
    core.run_phase("the prompt", PhaseRequest::new("then think"))
        .await;
    core.run_phase("the prompt", PhaseRequest::direct(calls.clone()))
        .await;
    assert_eq!(spy.created_count(), 1, "and reuses it");
    let requests = spy.requests();
    assert_eq!(requests[0].direct_tool_calls.as_deref(), Some(&calls[..]));
    assert_eq!(requests[1].direct_tool_calls, None);
    assert_eq!(requests[2].direct_tool_calls.as_deref(), Some(&calls[..]));
}

#[tokio::test]
async fn end_run_reports_the_outcome_from_the_last_phase_or_the_agents_error() {
    for (last, expected) in [
        (StopReason::Done, RunOutcome::Completed),
        (
            StopReason::BudgetExhausted,
            RunOutcome::Stopped(StopReason::BudgetExhausted),
        ),
        (
            StopReason::MaxIterations,
            RunOutcome::Stopped(StopReason::MaxIterations),
        ),
        (StopReason::Error, RunOutcome::Stopped(StopReason::Error)),
    ] {
        let spy = Spy::new(move |_| {
            let mut r = stopped(last);
            r.final_text = "provider failed: boom".into();
            r
        });
        let (_dir, mut core) = core_on(&spy);
        core.begin_run("t");
        core.run_phase("p", PhaseRequest::new("x")).await;
        let out = core.end_run(Ok("text".into())).await;
        assert_eq!(out.outcome, expected);
        assert_eq!(out.stop_reason, Some(last));
        assert_eq!(spy.finished(), [(0, expected)]);
        assert_eq!(
            out.error.is_some(),
            last == StopReason::Error,
            "the last phase's error message is the run's error"
        );
    }

    let spy = Spy::new(|_| done("x"));
    let (_dir, mut core) = core_on(&spy);
    core.begin_run("t");
    core.run_phase("p", PhaseRequest::new("x")).await;
    let err = AgentError::Artifact {
        path: "/nowhere/x.md".into(),
        source: std::io::Error::other("disk full"),
    };
    let out = core.end_run(Err(err)).await;
    assert_eq!(out.outcome, RunOutcome::Failed);
    assert!(out.error.unwrap().contains("disk full"));
    assert_eq!(spy.finished(), [(0, RunOutcome::Failed)]);

    // No phase, no executor: nothing to finish.
    let spy = Spy::new(|_| done("x"));
    let (_dir, mut core) = core_on(&spy);
    core.begin_run("t");
    let out = core.end_run(Ok(String::new())).await;
    assert_eq!(out.outcome, RunOutcome::Completed);
    assert_eq!(out.stop_reason, None);
    assert_eq!(spy.created_count(), 0);
}

// ---------- workspace accessors (layer 4) ----------

#[test]
fn accessors_return_the_agents_folders() {
    let spy = Spy::new(|_| done(""));
    let (dir, core) = core_on(&spy);
    let root = dir.path().join("Agents").join("general");
    assert_eq!(core.workspace_root().unwrap(), root);
    assert_eq!(core.artifacts_dir().unwrap(), root.join("artifacts"));
    assert_eq!(core.logs_dir().unwrap(), root.join("logs"));
    assert_eq!(core.memory_dir().unwrap(), root.join("memory"));
}

#[test]
fn nothing_is_created_at_construction_and_first_access_creates_the_tree() {
    let spy = Spy::new(|_| done(""));
    let (dir, ctx) = context(&spy);
    let agents = dir.path().join("Agents");
    let core = AgentCore::new(super::spy::spec("research"), ctx);
    assert!(!agents.exists(), "construction touches nothing on disk");
    let artifacts = core.artifacts_dir().unwrap();
    assert!(artifacts.is_dir());
    let root = agents.join("research");
    for sub in ["logs", "artifacts", "memory"] {
        assert!(root.join(sub).is_dir(), "{sub} created with the root");
    }
    // Accessing again is fine.
    assert_eq!(core.memory_dir().unwrap(), root.join("memory"));
}

#[test]
fn an_unwritable_agents_folder_is_a_clear_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "a file, not a folder").unwrap();
    let spy = Spy::new(|_| done(""));
    let core = AgentCore::new(
        super::spy::spec("general"),
        crate::AgentContext::new(spy.factory(), &blocker),
    );
    let e = core.artifacts_dir().unwrap_err();
    assert!(matches!(e, AgentError::Workspace { .. }));
    assert!(
        e.to_string()
            .contains("check that the agents folder is writable"),
        "{e}"
    );
}

#[test]
fn artifact_filename_is_the_sanitized_name_a_utc_timestamp_and_the_suffix() {
    let t = Utc.with_ymd_and_hms(2024, 3, 15, 14, 30, 22).unwrap();
    assert_eq!(
        artifact_filename_at("some topic name", ".md", t),
        "some_topic_name_20240315_143022.md"
    );
    assert_eq!(
        artifact_filename_at("neural networks overview", ".md", t),
        "neural_networks_overview_20240315_143022.md"
    );
    // The method uses the current UTC time in the same format.
    let spy = Spy::new(|_| done(""));
    let (_dir, core) = core_on(&spy);
    let name = core.artifact_filename("some topic name", ".md");
    assert!(is_artifact_name(&name, "some_topic_name", ".md"), "{name}");
}

#[test]
fn artifact_filename_sanitizes_spaces_colons_slashes_and_other_non_word_characters() {
    let t = Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap();
    assert_eq!(
        artifact_filename_at("a b:c/d\\e?f*g.h", ".md", t),
        "a_b_c_d_e_f_g_h_20240102_030405.md"
    );
    assert_eq!(
        sanitize_artifact_name("keep-hyphens_and_underscores"),
        "keep-hyphens_and_underscores"
    );
    assert_eq!(
        sanitize_artifact_name("two  spaces"),
        "two__spaces",
        "not collapsed, as the seed"
    );
    assert_eq!(
        sanitize_artifact_name("café Ünïcode 42"),
        "café_Ünïcode_42",
        "Unicode word characters stay"
    );
    assert_eq!(sanitize_artifact_name("../../etc/passwd"), "etc_passwd");
}

#[test]
fn artifact_filename_strips_leading_and_trailing_underscores() {
    assert_eq!(sanitize_artifact_name("  /topic/  "), "topic");
    assert_eq!(sanitize_artifact_name("__x__"), "x");
    assert_eq!(
        sanitize_artifact_name("-x-"),
        "-x-",
        "only underscores are stripped"
    );
    let t = Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap();
    assert_eq!(
        artifact_filename_at(": topic :", ".md", t),
        "topic_20240102_030405.md"
    );
}

#[test]
fn artifact_filename_uses_the_given_suffix() {
    let t = Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap();
    assert_eq!(
        artifact_filename_at("name", ".json", t),
        "name_20240102_030405.json"
    );
    assert_eq!(artifact_filename_at("name", "", t), "name_20240102_030405");
}

#[test]
fn artifact_names_beyond_the_seed_empty_and_overlong() {
    assert_eq!(sanitize_artifact_name("///"), "artifact");
    let long = "é".repeat(300);
    let safe = sanitize_artifact_name(&long);
    assert!(
        safe.len() <= crate::MAX_ARTIFACT_NAME_BYTES,
        "{}",
        safe.len()
    );
    assert!(
        safe.chars().all(|c| c == 'é'),
        "cut on a character boundary"
    );
}

#[tokio::test]
async fn save_artifact_writes_under_artifacts_dir_tells_the_executor_and_never_overwrites() {
    let spy = Spy::new(|_| done("ok"));
    let (_dir, mut core) = core_on(&spy);
    core.begin_run("t");
    core.run_phase("p", PhaseRequest::new("x")).await;
    let a = core.save_artifact("my outline", ".md", "first").unwrap();
    let b = core.save_artifact("my outline", ".md", "second").unwrap();
    let dir = core.artifacts_dir().unwrap();
    assert_eq!(a.parent().unwrap(), dir);
    let name = a.file_name().unwrap().to_str().unwrap();
    assert!(is_artifact_name(name, "my_outline", ".md"), "{name}");
    assert_ne!(a, b);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "first");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "second");
    let noted: Vec<_> = spy
        .artifacts
        .lock()
        .unwrap()
        .iter()
        .map(|(_, p)| p.clone())
        .collect();
    assert_eq!(noted, [a.clone(), b.clone()]);
    assert_eq!(core.artifacts(), [a, b]);
}

// ---------- the agent log ----------

struct Collect(Mutex<Vec<String>>);

impl AgentLogSink for Collect {
    fn line(&self, agent: &str, message: &str) {
        self.0.lock().unwrap().push(format!("{agent}: {message}"));
    }
}

#[tokio::test]
async fn log_goes_to_the_runs_log_file_and_the_sink() {
    let spy = Spy::new(|_| done("the answer"));
    let sink = Arc::new(Collect(Mutex::new(Vec::new())));
    let (_dir, ctx) = context(&spy);
    let mut agent = super::spy::builtin("general", ctx.with_log_sink(sink.clone()));
    let out = agent.run("do the thing").await;
    let log = out.log_file.clone().unwrap();
    let name = log.file_name().unwrap().to_str().unwrap();
    assert!(is_artifact_name(name, "general", ".log"), "{name}");
    assert_eq!(log.parent().unwrap().file_name().unwrap(), "logs");
    let lines = log_lines(&out);
    assert!(
        lines.iter().any(|l| l.ends_with("Task: do the thing")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("Saved artifact:")),
        "{lines:?}"
    );
    let seen = sink.0.lock().unwrap();
    assert!(
        seen.iter().any(|l| l == "general: Task: do the thing"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn an_unwritable_workspace_fails_the_run_cleanly_and_finishes_the_executor() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "a file").unwrap();
    let spy = Spy::new(|_| done("an answer to save"));
    let mut agent =
        super::spy::builtin("general", crate::AgentContext::new(spy.factory(), &blocker));
    let out = agent.run("t").await;
    assert_eq!(out.outcome, RunOutcome::Failed);
    assert!(out.error.unwrap().contains("agent workspace"));
    assert_eq!(out.log_file, None, "the log could not be written either");
    assert_eq!(spy.finished(), [(0, RunOutcome::Failed)]);
}

#[tokio::test]
async fn runs_that_start_in_the_same_second_never_share_a_log_file() {
    // Another run of this agent already owns the log names of every second this run could
    // start in; this run must create a file of its own, not append to one of them.
    let spy = Spy::new(|_| done("the answer"));
    let (_dir, ctx) = context(&spy);
    let logs = ctx.agents_folder.join("general").join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let now = chrono::Utc::now();
    let taken: Vec<std::path::PathBuf> = (-2..30)
        .map(|s| {
            let at = now + chrono::Duration::seconds(s);
            let p = logs.join(artifact_filename_at("general", ".log", at));
            std::fs::write(&p, "another run's line\n").unwrap();
            p
        })
        .collect();
    let mut agent = super::spy::builtin("general", ctx);
    let out = agent.run("do the thing").await;
    let log = out.log_file.clone().unwrap();
    assert!(
        !taken.contains(&log),
        "{} belongs to another run",
        log.display()
    );
    let name = log.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("general_") && name.ends_with("_2.log"),
        "{name}"
    );
    let lines = log_lines(&out);
    assert!(
        lines.iter().all(|l| !l.contains("another run")),
        "{lines:?}"
    );
    for p in &taken {
        assert_eq!(std::fs::read_to_string(p).unwrap(), "another run's line\n");
    }
}
