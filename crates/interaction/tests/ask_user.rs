//! The `ask_user` tool and the channel as the sandbox's permission asker, through a real
//! `Sandbox`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use lsm_interaction::{AskUserTool, Decision, InteractionChannel, InteractionConfig, RequestType};
use lsm_sandbox::{ExecError, Sandbox, SandboxConfig, Tool, ToolRegistry, builtin};
use serde_json::json;

async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

fn sandbox(dir: &std::path::Path, channel: &Arc<InteractionChannel>) -> Arc<Sandbox> {
    let mut config = SandboxConfig::confined_to(dir);
    config.timeout_seconds = 1.0;
    let registry: ToolRegistry =
        builtin::registry().with(Arc::new(AskUserTool::new(Arc::clone(channel))));
    Arc::new(Sandbox::new(config, registry, Some(channel.clone())).unwrap())
}

#[test]
fn ask_user_is_read_only_and_waits_for_a_person() {
    let ch = Arc::new(InteractionChannel::new(&InteractionConfig::default()).unwrap());
    let tool = AskUserTool::new(ch);
    assert_eq!(tool.name(), "ask_user");
    assert_eq!(tool.risk(), lsm_sandbox::RiskLevel::ReadOnly);
    assert!(!tool.needs_permission());
    assert!(tool.waits_for_person());
}

#[tokio::test(start_paused = true)]
async fn ask_user_returns_the_reply_even_after_the_sandbox_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let ch = Arc::new(InteractionChannel::new(&InteractionConfig::default()).unwrap());
    let sb = sandbox(dir.path(), &ch);
    let call = {
        let sb = Arc::clone(&sb);
        tokio::spawn(async move {
            sb.execute("ask_user", &json!({"question": "Which file?"}))
                .await
        })
    };
    settle().await;
    let pending = ch.pending().unwrap().request;
    assert_eq!(pending.request_type, RequestType::Clarification);
    assert!(pending.request_id.starts_with("clarify-"));
    // Longer than the sandbox's 1 s limit: the person is bounded by the channel only.
    tokio::time::advance(Duration::from_secs(120)).await;
    settle().await;
    ch.respond(&pending.request_id, Decision::Reply, "notes.md")
        .unwrap();
    let exec = call.await.unwrap();
    assert_eq!(exec.outcome.unwrap(), "notes.md");
}

#[tokio::test(start_paused = true)]
async fn ask_user_denied_or_timed_out_is_an_error_the_model_sees() {
    let dir = tempfile::tempdir().unwrap();
    let ch = Arc::new(InteractionChannel::new(&InteractionConfig::default()).unwrap());
    let sb = sandbox(dir.path(), &ch);
    let call = {
        let sb = Arc::clone(&sb);
        tokio::spawn(async move { sb.execute("ask_user", &json!({"question": "Q?"})).await })
    };
    settle().await;
    tokio::time::advance(Duration::from_secs(300)).await;
    settle().await;
    let e = call.await.unwrap().outcome.unwrap_err();
    assert!(matches!(e, ExecError::Failed { .. }), "{e}");
    assert!(e.to_string().contains("timed out"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn ask_user_with_auto_continue_does_not_wait() {
    let dir = tempfile::tempdir().unwrap();
    let ch = Arc::new(
        InteractionChannel::new(&InteractionConfig {
            auto_continue: true,
            ..InteractionConfig::default()
        })
        .unwrap(),
    );
    let sb = sandbox(dir.path(), &ch);
    let exec = sb.execute("ask_user", &json!({"question": "Q?"})).await;
    assert_eq!(exec.outcome.unwrap(), "Continue with your best judgment.");
}

#[tokio::test(start_paused = true)]
async fn a_write_waits_on_the_channel_and_runs_once_approved() {
    let dir = tempfile::tempdir().unwrap();
    let ch = Arc::new(InteractionChannel::new(&InteractionConfig::default()).unwrap());
    let sb = sandbox(dir.path(), &ch);
    let mut posted = ch.subscribe();
    let call = {
        let sb = Arc::clone(&sb);
        tokio::spawn(async move {
            sb.execute("write_file", &json!({"path": "out.md", "content": "hi"}))
                .await
        })
    };
    // The request is posted once the diff it shows is computed (on the blocking pool).
    posted.wait_for(Option::is_some).await.unwrap();
    let p = ch.pending().unwrap().request;
    assert_eq!(
        p.preview.as_deref(),
        Some("--- a/out.md\n+++ b/out.md\n@@ -0,0 +1 @@\n+hi\n\\ No newline at end of file\n")
    );
    assert_eq!(p.tool_name, "write_file");
    assert_eq!(p.args_summary, r#"{"content":"hi","path":"out.md"}"#);
    assert!(!dir.path().join("out.md").exists(), "ran before the answer");
    ch.respond(&p.request_id, Decision::Approve, "").unwrap();
    let exec = call.await.unwrap();
    assert!(exec.outcome.is_ok());
    assert!(exec.permission.unwrap().allowed);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.md")).unwrap(),
        "hi"
    );
}
