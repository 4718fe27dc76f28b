//! A new turn on a finished run's conversation (`--continue`): the model sees the earlier
//! turns, the budget's ledger goes on from what they spent, and each journal keeps its own
//! totals.

use lsm_harness::RunSeams;
use lsm_harness::event::ConversationContinued;

use super::*;

fn turn(
    dir: &Path,
    answer: &str,
    continuation: Option<ConversationContinued>,
) -> (AgentHarness, Arc<ScriptedProvider>) {
    let (sandbox, _) = sandbox();
    let provider = Arc::new(ScriptedProvider::new(vec![
        ScriptedResponse::text(answer).with_usage(100, 10),
    ]));
    let h = AgentHarness::with_seams(
        identity(),
        "sys",
        HarnessConfig {
            max_tokens_budget: 1_000,
            ..config(dir)
        },
        provider.clone(),
        sandbox,
        RunSeams {
            continuation,
            ..RunSeams::default()
        },
    );
    (h, provider)
}

/// What a turn of `run_dir`'s conversation starts from (as `lsm` builds it).
fn continuation_of(run_dir: &Path) -> ConversationContinued {
    let journal = read_journal(&run_dir.join("transcript.jsonl")).unwrap();
    let state = lsm_harness::RunState::fold(&journal.events);
    assert!(state.finished.is_some());
    ConversationContinued {
        from_run_id: journal.events[0].run_id.clone(),
        contexts: serde_json::to_value(&state.contexts).unwrap(),
        usage: state.conversation_usage(),
    }
}

#[tokio::test]
async fn a_second_turn_sees_the_first_and_spends_from_the_same_ledger() {
    let base = tempfile::tempdir().unwrap();
    let (mut first, _) = turn(base.path(), "Paris.", None);
    let r = first
        .run_bounded(PhaseRequest::new("Capital of France?"))
        .await;
    assert_eq!(r.stop_reason, StopReason::Done);
    first.finish(RunOutcome::Completed).await;
    let first_dir = first.run_dir();
    drop(first);

    let (mut second, provider) = turn(
        base.path(),
        "About 2 million.",
        Some(continuation_of(&first_dir)),
    );
    let r = second
        .run_bounded(PhaseRequest::new("And its population?"))
        .await;
    assert_eq!(r.final_text, "About 2 million.");
    // The model saw the first turn, then the new question.
    let sent: Vec<String> = provider.requests()[0]
        .messages
        .iter()
        .map(|m| m.content.clone())
        .collect();
    let at = |text: &str| sent.iter().position(|m| m == text).unwrap_or(usize::MAX);
    assert!(at("Capital of France?") < at("Paris."), "{sent:?}");
    assert!(at("Paris.") < at("And its population?"), "{sent:?}");
    assert!(at("And its population?") < usize::MAX, "{sent:?}");
    // One ledger for the conversation; each run's totals its own.
    assert_eq!(second.usage().tokens_used, 220);
    second.finish(RunOutcome::Completed).await;
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(second.run_dir().join("run_summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["token_usage"]["tokens_used"], 110);
    let first_id = first_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(summary["continues"], first_id.as_str());
    let second_dir = second.run_dir();
    drop(second);

    // A third turn starts from both earlier turns' spending: 220 of 1000.
    let third = continuation_of(&second_dir);
    assert_eq!(third.usage.tokens_used, 220);
    assert_eq!(
        third.from_run_id,
        second_dir.file_name().unwrap().to_string_lossy()
    );
}
