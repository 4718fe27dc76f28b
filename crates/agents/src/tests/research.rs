//! Seed 001 §6.3 layer 6, "ResearchAgent phase flow", and §4 (its logging), on the spy.

use std::sync::Arc;

use lsm_phase::{PhaseRequest, PhaseResult, RunOutcome, StopReason};

use super::spy::{
    Spy, context, done, done_with_tool, is_artifact_name, log_lines, phase_of, stopped,
};
use crate::{Agent, AgentOutput};

/// The research definition's `max_items`.
const MAX_SUBTOPICS: usize = 8;

const TOPIC: &str = "soil carbon";

/// The label's subtopic (`subtopic:<name>` → `name`).
fn subtopic_of(r: &PhaseRequest) -> String {
    r.context_label
        .as_deref()
        .and_then(|l| l.strip_prefix("subtopic:"))
        .unwrap_or("")
        .to_string()
}

/// A responder for the four phases: `decompose` and `review` answers, findings named after
/// the subtopic, and a fixed outline.
fn research_spy(decompose: &'static str, review: &'static str) -> Arc<Spy> {
    Spy::new(move |r| match phase_of(r) {
        "DECOMPOSE" => done(decompose),
        "RESEARCH" => {
            let st = subtopic_of(r);
            done_with_tool(
                &format!("findings on {st} [S1]"),
                "query_and_synthesize",
                "kb answer",
            )
        }
        "SYNTHESIZE" => done("# Outline of soil carbon\n\n- point [S1]"),
        "REVIEW" => done(review),
        other => panic!("unexpected phase {other}"),
    })
}

async fn run(spy: &Arc<Spy>, max_rounds: u32) -> (tempfile::TempDir, AgentOutput) {
    let (dir, ctx) = context(spy);
    let mut agent = super::spy::builtin("research", ctx.with_max_rounds(max_rounds));
    let out = agent.run(TOPIC).await;
    (dir, out)
}

#[tokio::test]
async fn phases_run_in_order_with_the_right_tools_labels_and_limits() {
    let spy = research_spy(
        "Sure! The subtopics are:\n```json\n[\"measurement\", \"sequestration\", \"policy\"]\n```\nGood luck.",
        r#"{"sufficient": true, "suggestions": []}"#,
    );
    let (_dir, out) = run(&spy, 2).await;
    assert_eq!(
        spy.phases(),
        [
            "DECOMPOSE",
            "RESEARCH",
            "RESEARCH",
            "RESEARCH",
            "SYNTHESIZE",
            "REVIEW"
        ]
    );
    assert_eq!(spy.created_count(), 1, "one executor for the whole run");
    let requests = spy.requests();
    let none: Option<Vec<String>> = Some(Vec::new());

    let decompose = &requests[0];
    assert_eq!(decompose.tool_names, none);
    assert_eq!(decompose.max_iterations, 1);
    assert_eq!(decompose.context_label, None);
    assert!(decompose.user_message.contains(TOPIC));

    for (r, st) in requests[1..4]
        .iter()
        .zip(["measurement", "sequestration", "policy"])
    {
        assert_eq!(r.tool_names, Some(vec!["query_and_synthesize".to_string()]));
        assert!(r.max_iterations <= 3);
        assert_eq!(
            r.context_label.as_deref(),
            Some(format!("subtopic:{st}").as_str())
        );
        assert!(r.user_message.contains(st));
    }
    for r in &requests[4..] {
        assert_eq!(r.tool_names, none, "{}", phase_of(r));
        assert_eq!(r.context_label, None, "primary context");
    }
    let synthesize = &requests[4];
    for st in ["measurement", "sequestration", "policy"] {
        assert!(
            synthesize
                .user_message
                .contains(&format!("findings on {st}")),
            "SYNTHESIZE sees every finding"
        );
    }

    assert_eq!(out.outcome, RunOutcome::Completed);
    assert_eq!(out.artifacts.len(), 1);
    let path = &out.artifacts[0];
    assert_eq!(path.parent().unwrap().file_name().unwrap(), "artifacts");
    assert_eq!(
        path.parent()
            .unwrap()
            .parent()
            .unwrap()
            .file_name()
            .unwrap(),
        "research"
    );
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(is_artifact_name(name, "soil_carbon", ".md"), "{name}");
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        "# Outline of soil carbon\n\n- point [S1]"
    );
    assert_eq!(out.text, "# Outline of soil carbon\n\n- point [S1]");
    let noted: Vec<_> = spy
        .artifacts
        .lock()
        .unwrap()
        .iter()
        .map(|(_, p)| p.clone())
        .collect();
    assert_eq!(
        &noted, &out.artifacts,
        "the executor was told about the outline"
    );
}

#[tokio::test]
async fn every_subtopic_name_is_logged() {
    let spy = research_spy(
        r#"["measurement methods", "sequestration: rates", "policy/economics"]"#,
        r#"{"sufficient": true}"#,
    );
    let (_dir, out) = run(&spy, 2).await;
    let lines = log_lines(&out);
    let text = lines.join("\n");
    assert!(
        text.contains("Phase research (round 1) — 3 item(s):"),
        "{text}"
    );
    for (i, st) in [
        "measurement methods",
        "sequestration: rates",
        "policy/economics",
    ]
    .iter()
    .enumerate()
    {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("Phase research, item '{st}': done"))),
            "no collection line for {st}:\n{text}"
        );
        assert!(
            lines.iter().any(|l| l == &format!("  [{}] {st}", i + 1)),
            "{st} not listed:\n{text}"
        );
    }
}

fn budget_spy(stop_at: &'static str, reason: StopReason, synth_answers: bool) -> Arc<Spy> {
    Spy::new(move |r| match phase_of(r) {
        "DECOMPOSE" => done(r#"["a", "b", "c", "d"]"#),
        "RESEARCH" if subtopic_of(r) == stop_at => stopped(reason),
        "RESEARCH" => done(&format!("findings on {}", subtopic_of(r))),
        "SYNTHESIZE" if synth_answers => done("# outline from what was found"),
        "SYNTHESIZE" => stopped(reason),
        other => panic!("{other} must not run after {reason}"),
    })
}

#[tokio::test]
async fn budget_exhausted_stops_collecting_and_synthesize_still_runs() {
    let spy = budget_spy("b", StopReason::BudgetExhausted, true);
    let (_dir, out) = run(&spy, 2).await;
    assert_eq!(
        spy.phases(),
        ["DECOMPOSE", "RESEARCH", "RESEARCH", "SYNTHESIZE"],
        "c and d are never researched, REVIEW never runs"
    );
    let synth = &spy.of_phase("SYNTHESIZE")[0];
    assert!(synth.user_message.contains("findings on a"));
    assert_eq!(out.artifacts.len(), 1);
    assert_eq!(
        std::fs::read_to_string(&out.artifacts[0]).unwrap(),
        "# outline from what was found"
    );
    let text = log_lines(&out).join("\n");
    assert!(
        text.contains("The run stopped early (budget_exhausted)"),
        "{text}"
    );
}

#[tokio::test]
async fn when_synthesize_cannot_run_the_findings_are_saved_anyway() {
    for reason in [StopReason::BudgetExhausted, StopReason::StopRequested] {
        let spy = budget_spy("c", reason, false);
        let (_dir, out) = run(&spy, 2).await;
        assert_eq!(
            spy.phases(),
            [
                "DECOMPOSE",
                "RESEARCH",
                "RESEARCH",
                "RESEARCH",
                "SYNTHESIZE"
            ]
        );
        assert_eq!(out.outcome, RunOutcome::Stopped(reason));
        assert_eq!(out.stop_reason, Some(reason));
        let saved = std::fs::read_to_string(&out.artifacts[0]).unwrap();
        assert!(saved.starts_with("# soil carbon"), "{saved}");
        assert!(
            saved.contains("findings on a") && saved.contains("findings on b"),
            "{saved}"
        );
        assert!(saved.contains(reason.as_str()), "says why: {saved}");
    }
}

#[tokio::test]
async fn review_suggestions_drive_refinement_rounds_up_to_max_rounds() {
    let spy = research_spy(
        r#"["a", "b"]"#,
        r#"{"sufficient": false, "suggestions": ["deeper on x", "deeper on y"]}"#,
    );
    let (_dir, out) = run(&spy, 1).await;
    assert_eq!(
        spy.phases(),
        [
            "DECOMPOSE",
            "RESEARCH",
            "RESEARCH",
            "SYNTHESIZE",
            "REVIEW", // round 1
            "RESEARCH",
            "RESEARCH",
            "SYNTHESIZE",
            "REVIEW", // one refinement round
        ]
    );
    let labels: Vec<String> = spy.of_phase("RESEARCH").iter().map(subtopic_of).collect();
    assert_eq!(labels, ["a", "b", "deeper on x", "deeper on y"]);
    let second_synth = &spy.of_phase("SYNTHESIZE")[1];
    assert!(
        second_synth
            .user_message
            .contains("findings on deeper on x")
    );
    assert!(
        !second_synth.user_message.contains("findings on a"),
        "only the new findings"
    );

    let text = log_lines(&out).join("\n");
    assert!(
        text.contains("Phase review: repeating from research with 2 item(s)."),
        "{text}"
    );
    for s in ["deeper on x", "deeper on y"] {
        assert!(
            text.contains(&format!("[1] {s}")) || text.contains(&format!("[2] {s}")),
            "{text}"
        );
    }
    assert!(text.contains("Round limit reached"), "{text}");
    let saved = std::fs::read_to_string(&out.artifacts[0]).unwrap();
    assert!(
        saved.contains("## Further research suggested\n\n- deeper on x\n- deeper on y"),
        "{saved}"
    );
}

#[tokio::test]
async fn zero_rounds_still_reviews_but_never_refines() {
    let spy = research_spy(r#"["a"]"#, r#"{"sufficient": false, "suggestions": ["z"]}"#);
    let (_dir, _out) = run(&spy, 0).await;
    assert_eq!(
        spy.phases(),
        ["DECOMPOSE", "RESEARCH", "SYNTHESIZE", "REVIEW"]
    );
}

#[tokio::test]
async fn an_empty_list_researches_the_topic_itself_and_plain_lines_are_items() {
    for answer in ["[]", "", "  \n "] {
        let spy = research_spy(answer, r#"{"sufficient": true}"#);
        let (_dir, out) = run(&spy, 2).await;
        let labels: Vec<String> = spy.of_phase("RESEARCH").iter().map(subtopic_of).collect();
        assert_eq!(labels, [TOPIC], "for {answer:?}");
        let text = log_lines(&out).join("\n");
        assert!(text.contains("running it on the topic itself"), "{text}");
        assert_eq!(out.outcome, RunOutcome::Completed);
    }
    // Neither JSON nor a Markdown list: one item per line.
    let spy = research_spy(
        "history of soil carbon\n\nmeasurement methods\n",
        r#"{"sufficient": true}"#,
    );
    let (_dir, _out) = run(&spy, 2).await;
    let labels: Vec<String> = spy.of_phase("RESEARCH").iter().map(subtopic_of).collect();
    assert_eq!(labels, ["history of soil carbon", "measurement methods"]);
}

#[tokio::test]
async fn a_huge_subtopic_list_is_cut_and_the_cut_is_logged() {
    let many: Vec<String> = (0..500).map(|i| format!("subtopic {i}")).collect();
    let answer: &'static str = Box::leak(serde_json::to_string(&many).unwrap().into_boxed_str());
    let spy = research_spy(answer, r#"{"sufficient": true}"#);
    let (_dir, out) = run(&spy, 2).await;
    let labels: Vec<String> = spy.of_phase("RESEARCH").iter().map(subtopic_of).collect();
    assert_eq!(labels.len(), MAX_SUBTOPICS);
    assert_eq!(labels[0], "subtopic 0");
    let text = log_lines(&out).join("\n");
    assert!(
        text.contains("decompose listed 500 items; running the first 8"),
        "{text}"
    );
}

#[tokio::test]
async fn a_review_that_is_not_json_ends_refinement_and_keeps_the_outline() {
    let spy = research_spy(r#"["a"]"#, "Looks decent overall, maybe add more sources.");
    let (_dir, out) = run(&spy, 3).await;
    assert_eq!(
        spy.phases(),
        ["DECOMPOSE", "RESEARCH", "SYNTHESIZE", "REVIEW"]
    );
    assert_eq!(out.outcome, RunOutcome::Completed);
    assert!(
        log_lines(&out)
            .join("\n")
            .contains("Phase review: no JSON verdict")
    );
    assert_eq!(
        std::fs::read_to_string(&out.artifacts[0]).unwrap(),
        "# Outline of soil carbon\n\n- point [S1]"
    );
}

#[tokio::test]
async fn review_flags_and_suggestions_are_read_leniently() {
    // "no" as a string, one suggestion as a bare string, wrapped in prose.
    let spy = research_spy(
        r#"["a"]"#,
        r#"Verdict: {"sufficient": "no", "suggestions": "one more angle"} — thanks"#,
    );
    let (_dir, _out) = run(&spy, 1).await;
    let labels: Vec<String> = spy.of_phase("RESEARCH").iter().map(subtopic_of).collect();
    assert_eq!(labels, ["a", "one more angle"]);
}

#[tokio::test]
async fn an_empty_synthesis_falls_back_to_the_findings() {
    let spy = Spy::new(|r| match phase_of(r) {
        "DECOMPOSE" => done(r#"["a"]"#),
        "RESEARCH" => PhaseResult {
            // No text: the findings come from the tool's result.
            final_text: String::new(),
            ..done_with_tool("", "query_and_synthesize", "kb says a is 42")
        },
        "SYNTHESIZE" => done("   "),
        _ => done(r#"{"sufficient": true}"#),
    });
    let (_dir, out) = run(&spy, 1).await;
    let saved = std::fs::read_to_string(&out.artifacts[0]).unwrap();
    assert!(saved.contains("kb says a is 42"), "{saved}");
    assert!(saved.contains("the model wrote no answer"), "{saved}");
}

#[tokio::test]
async fn a_failed_decompose_still_saves_and_reports_the_error() {
    let spy = Spy::new(|r| match phase_of(r) {
        "DECOMPOSE" => PhaseResult {
            final_text: "LLM call failed: connection refused".into(),
            ..stopped(StopReason::Error)
        },
        "SYNTHESIZE" => PhaseResult {
            final_text: "LLM call failed: connection refused".into(),
            ..stopped(StopReason::Error)
        },
        other => panic!("{other} must not run"),
    });
    let (_dir, out) = run(&spy, 1).await;
    assert_eq!(spy.phases(), ["DECOMPOSE", "SYNTHESIZE"]);
    assert_eq!(out.outcome, RunOutcome::Stopped(StopReason::Error));
    assert!(out.error.unwrap().contains("connection refused"));
    let saved = std::fs::read_to_string(&out.artifacts[0]).unwrap();
    assert!(saved.contains("nothing was collected"), "{saved}");
    assert!(
        !saved.contains("connection refused"),
        "an error is not an outline"
    );
}
