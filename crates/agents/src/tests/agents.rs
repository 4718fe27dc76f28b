//! Seed 001 §6.3 layer 6 for every agent but research (see `research.rs`): the phases each
//! runs, what it forwards, and what it does with `final_text`, including malformed output.

use std::path::PathBuf;
use std::sync::Arc;

use lsm_phase::{PhaseResult, RunOutcome, StopReason, ToolCallRecord, ToolOutcome};
use serde_json::{Value, json};

use super::spy::{Spy, context, done, done_with_tool, is_artifact_name, phase_of, stopped};
use super::spy::{builtin, spec};
use crate::{Agent, AgentOutput, AssistantAgent, CuratorAgent, WritingAgent};

fn none() -> Option<Vec<String>> {
    Some(Vec::new())
}

fn tools(names: &[&str]) -> Option<Vec<String>> {
    Some(names.iter().map(|s| s.to_string()).collect())
}

/// The artifact of `out` whose name is `<stem>_<ts><suffix>`, read.
fn artifact(out: &AgentOutput, stem: &str, suffix: &str) -> (PathBuf, String) {
    let path = out
        .artifacts
        .iter()
        .find(|p| is_artifact_name(p.file_name().unwrap().to_str().unwrap(), stem, suffix))
        .unwrap_or_else(|| panic!("no {stem}_<ts>{suffix} in {:?}", out.artifacts))
        .clone();
    assert_eq!(path.parent().unwrap().file_name().unwrap(), "artifacts");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

// ---------- general, librarian, manuscript_editor: one long phase ----------

const SIMPLE: [(&str, &str); 3] = [
    ("general", "result"),
    ("librarian", "answer"),
    ("manuscript_editor", "edit_report"),
];

#[tokio::test]
async fn simple_agents_run_one_long_phase_with_their_prompt_and_save_the_answer() {
    for (name, stem) in SIMPLE {
        let spec = spec(name);
        let spy = Spy::new(|_| done("All done: summary.md written."));
        let (_dir, ctx) = context(&spy);
        let mut agent = builtin(name, ctx.with_max_iterations(7).with_ask_user(true));
        assert_eq!(agent.name(), spec.name);
        assert_eq!(agent.tier(), spec.tier);
        let out = agent.run("Summarize notes.md").await;

        let requests = spy.requests();
        assert_eq!(requests.len(), 1, "{}", spec.name);
        let r = &requests[0];
        assert_eq!(r.user_message, "Summarize notes.md");
        assert_eq!(r.tool_names, None, "every allowlisted tool");
        assert_eq!(r.max_iterations, 7);
        assert_eq!(r.context_label, None);
        assert!(r.continue_context);
        assert_eq!(r.direct_tool_calls, None);
        assert!(
            r.completes_task,
            "its one phase is judged by the completion checks"
        );
        let (identity, prompt) = spy.created.lock().unwrap()[0].clone();
        assert_eq!(prompt, spec.system_prompt);
        let mut expected: Vec<String> = spec.tools.clone();
        expected.push("ask_user".into());
        assert_eq!(identity.tool_allowlist, expected, "{}", spec.name);
        assert_eq!(agent.tool_allowlist(), expected);

        assert_eq!(out.outcome, RunOutcome::Completed);
        assert_eq!(out.text, "All done: summary.md written.");
        let (path, text) = artifact(&out, stem, ".md");
        assert!(
            path.to_string_lossy()
                .contains(&format!("/{}/artifacts/", spec.name))
        );
        assert!(
            text.contains("Task: Summarize notes.md") && text.contains("All done"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn simple_agents_save_nothing_for_an_empty_answer_or_an_error() {
    for (name, _) in SIMPLE {
        let spy = Spy::new(|_| done("   "));
        let (_dir, ctx) = context(&spy);
        let out = builtin(name, ctx).run("t").await;
        assert!(out.artifacts.is_empty());
        assert_eq!(out.outcome, RunOutcome::Completed);

        let spy = Spy::new(|_| PhaseResult {
            final_text: "LLM call failed: timeout".into(),
            ..stopped(StopReason::Error)
        });
        let (_dir, ctx) = context(&spy);
        let out = builtin(name, ctx).run("t").await;
        assert!(
            out.artifacts.is_empty(),
            "an error message is not an answer"
        );
        assert_eq!(out.outcome, RunOutcome::Stopped(StopReason::Error));
        assert_eq!(out.error.as_deref(), Some("LLM call failed: timeout"));
        assert_eq!(
            spy.finished(),
            [(0, RunOutcome::Stopped(StopReason::Error))]
        );
    }
}

#[tokio::test]
async fn a_simple_agent_at_its_iteration_limit_saves_what_it_said_and_reports_the_stop() {
    let spy = Spy::new(|_| PhaseResult {
        final_text: "partial progress".into(),
        ..stopped(StopReason::MaxIterations)
    });
    let (_dir, ctx) = context(&spy);
    let out = builtin("general", ctx).run("t").await;
    assert_eq!(out.outcome, RunOutcome::Stopped(StopReason::MaxIterations));
    let (_, text) = artifact(&out, "result", ".md");
    assert!(text.contains("partial progress"));
}

// ---------- synthesis ----------

fn synthesis_spy(write: &'static str, synth: &'static str) -> Arc<Spy> {
    Spy::new(move |r| match phase_of(r) {
        "GATHER" => done_with_tool("- claim A [notes.md]", "read_file", "contents of notes.md"),
        "SYNTHESIZE" => done_with_tool(synth, "source_map", "A -> notes.md"),
        "WRITE" => done(write),
        other => panic!("unexpected phase {other}"),
    })
}

#[tokio::test]
async fn synthesis_gathers_then_synthesizes_with_a_source_map_then_writes() {
    let spy = synthesis_spy("# Final document\n\nA [notes.md]", "synthesis draft");
    let (_dir, ctx) = context(&spy);
    let out = builtin("synthesis", ctx.with_max_iterations(9))
        .run("carbon capture")
        .await;
    assert_eq!(spy.phases(), ["GATHER", "SYNTHESIZE", "WRITE"]);
    let r = spy.requests();
    assert_eq!(
        r[0].tool_names,
        tools(&[
            "read_folder",
            "read_file",
            "query_and_synthesize",
            "extract_snippets"
        ])
    );
    assert_eq!(r[0].context_label.as_deref(), Some("gather"));
    assert_eq!(r[0].max_iterations, 9);
    assert_eq!(r[1].tool_names, tools(&["source_map"]));
    assert_eq!(r[1].context_label, None);
    assert!(
        r[1].user_message.contains("- claim A [notes.md]")
            && r[1].user_message.contains("contents of notes.md"),
        "SYNTHESIZE gets the gathered answer and tool results: {}",
        r[1].user_message
    );
    assert_eq!(r[2].tool_names, tools(&["write_file"]));
    assert_eq!(r[2].context_label, None);
    assert_eq!(spy.created_count(), 1);

    assert_eq!(out.outcome, RunOutcome::Completed);
    let (_, doc) = artifact(&out, "carbon_capture", ".md");
    assert_eq!(doc, "# Final document\n\nA [notes.md]");
    let (_, sources) = artifact(&out, "carbon_capture_sources", ".md");
    assert!(sources.contains("A -> notes.md"));
}

#[tokio::test]
async fn synthesis_falls_back_from_write_to_synthesize_to_the_evidence() {
    let spy = synthesis_spy("", "the synthesis itself");
    let (_dir, ctx) = context(&spy);
    let out = builtin("synthesis", ctx).run("t").await;
    let (_, doc) = artifact(&out, "t", ".md");
    assert!(
        doc.contains("No answer from phase write") && doc.ends_with("the synthesis itself"),
        "{doc}"
    );

    let spy = synthesis_spy("", "");
    let (_dir, ctx) = context(&spy);
    let out = builtin("synthesis", ctx).run("t").await;
    let (_, doc) = artifact(&out, "t", ".md");
    assert!(
        doc.contains("No answer from phase write") && doc.contains("claim A"),
        "{doc}"
    );
}

#[tokio::test]
async fn synthesis_after_an_exhausted_budget_still_synthesizes_and_saves_but_does_not_write() {
    let spy = Spy::new(|r| match phase_of(r) {
        "GATHER" => PhaseResult {
            final_text: "- partial evidence".into(),
            ..stopped(StopReason::BudgetExhausted)
        },
        "SYNTHESIZE" => stopped(StopReason::BudgetExhausted),
        other => panic!("{other} must not run"),
    });
    let (_dir, ctx) = context(&spy);
    let out = builtin("synthesis", ctx).run("t").await;
    assert_eq!(spy.phases(), ["GATHER", "SYNTHESIZE"]);
    assert_eq!(
        out.outcome,
        RunOutcome::Stopped(StopReason::BudgetExhausted)
    );
    assert!(artifact(&out, "t", ".md").1.contains("partial evidence"));
}

// ---------- curator ----------

fn curator_spy(find: String, report: &'static str) -> Arc<Spy> {
    Spy::new(move |r| match phase_of(r) {
        "SURVEY" => done_with_tool(
            "- notes/a.md 1 KB 2020\n- notes/b.md",
            "read_folder",
            "a.md b.md",
        ),
        "FIND" => done(&find),
        "REPORT" => done(report),
        other => panic!("unexpected phase {other}"),
    })
}

#[tokio::test]
async fn curator_surveys_finds_and_reports_with_json_findings() {
    let find = "Here is what I found:\n{\"duplicates\": [{\"files\": [\"notes/a.md\", \"notes/b.md\"], \"reason\": \"same hash\"}, {\"files\": [\"lonely.md\"]}], \"stale\": [{\"path\": \"old.md\", \"reason\": \"2012\"}, \"empty.md\"]}".to_string();
    let spy = curator_spy(find, "# Curation report\n\nMerge a and b.");
    let (_dir, ctx) = context(&spy);
    let out = CuratorAgent::new(ctx).run("curate notes/").await;
    assert_eq!(spy.phases(), ["SURVEY", "FIND", "REPORT"]);
    let r = spy.requests();
    let completing: Vec<bool> = r.iter().map(|q| q.completes_task).collect();
    assert_eq!(
        completing,
        [false, false, true],
        "only REPORT completes the task"
    );
    assert_eq!(
        r[0].tool_names,
        tools(&["read_folder", "file_metadata", "query_and_synthesize"])
    );
    assert_eq!(r[0].context_label.as_deref(), Some("survey"));
    assert_eq!(
        r[1].tool_names,
        tools(&[
            "hash_file",
            "similarity_search",
            "file_metadata",
            "read_folder"
        ])
    );
    assert_eq!(r[1].context_label.as_deref(), Some("findings"));
    assert!(
        r[1].user_message.contains("notes/a.md 1 KB"),
        "FIND sees the survey"
    );
    assert_eq!(r[2].tool_names, tools(&["write_file"]));
    assert_eq!(r[2].context_label, None);
    assert!(
        r[2].user_message.contains("same hash"),
        "REPORT sees the findings"
    );

    let (_, report) = artifact(&out, "curation_report", ".md");
    assert_eq!(report, "# Curation report\n\nMerge a and b.");
    let (_, findings) = artifact(&out, "curation_findings", ".json");
    let findings: Value = serde_json::from_str(&findings).unwrap();
    assert_eq!(
        findings,
        json!({
            "parsed": true,
            "duplicates": [{"files": ["notes/a.md", "notes/b.md"], "reason": "same hash"}],
            "stale": [{"path": "old.md", "reason": "2012"}, {"path": "empty.md", "reason": ""}],
            "dropped": 0
        }),
        "a one-file 'duplicate' group is not a duplicate"
    );
}

#[tokio::test]
async fn curator_keeps_prose_findings_and_assembles_a_report_when_the_model_writes_none() {
    let spy = curator_spy("a.md and b.md look alike; old.md is stale.".into(), "");
    let (_dir, ctx) = context(&spy);
    let out = CuratorAgent::new(ctx).run("curate").await;
    let r = spy.requests();
    assert!(
        r[2].user_message.contains("a.md and b.md look alike"),
        "REPORT gets the prose"
    );
    let (_, findings) = artifact(&out, "curation_findings", ".json");
    assert_eq!(
        serde_json::from_str::<Value>(&findings).unwrap()["parsed"],
        false
    );
    let (_, report) = artifact(&out, "curation_report", ".md");
    assert!(
        report.contains("## Findings as reported") && report.contains("old.md is stale"),
        "{report}"
    );
    assert!(report.contains("the model wrote no report"), "{report}");
}

#[tokio::test]
async fn curator_caps_huge_finding_lists() {
    let stale: Vec<Value> = (0..1000)
        .map(|i| json!({"path": format!("f{i}.md"), "reason": "old"}))
        .collect();
    let find = json!({"duplicates": [], "stale": stale}).to_string();
    let spy = curator_spy(find, "report");
    let (_dir, ctx) = context(&spy);
    let out = CuratorAgent::new(ctx).run("curate").await;
    let (_, findings) = artifact(&out, "curation_findings", ".json");
    let findings: Value = serde_json::from_str(&findings).unwrap();
    assert_eq!(
        findings["stale"].as_array().unwrap().len(),
        crate::agents::curator::MAX_FINDINGS
    );
    assert_eq!(findings["dropped"], 800);
}

#[tokio::test]
async fn curator_stops_after_an_early_stop_and_still_saves_a_report() {
    let spy = Spy::new(|r| match phase_of(r) {
        "SURVEY" => PhaseResult {
            final_text: "- a.md".into(),
            ..stopped(StopReason::StopRequested)
        },
        other => panic!("{other} must not run"),
    });
    let (_dir, ctx) = context(&spy);
    let out = CuratorAgent::new(ctx).run("curate").await;
    assert_eq!(spy.phases(), ["SURVEY"]);
    assert_eq!(out.outcome, RunOutcome::Stopped(StopReason::StopRequested));
    let (_, report) = artifact(&out, "curation_report", ".md");
    assert!(
        report.contains("stop_requested") && report.contains("- a.md"),
        "{report}"
    );
}

// ---------- writing ----------

fn writing_spy(outline: String, revise: &'static str) -> Arc<Spy> {
    Spy::new(move |r| match phase_of(r) {
        "OUTLINE" => done(&outline),
        "DRAFT" => {
            let title = r
                .context_label
                .as_deref()
                .unwrap()
                .strip_prefix("section:")
                .unwrap();
            done(&format!("text of {title}"))
        }
        "REVISE" => done(revise),
        other => panic!("unexpected phase {other}"),
    })
}

#[tokio::test]
async fn writing_outlines_drafts_each_section_in_its_own_context_then_revises() {
    let spy = writing_spy(
        "Outline below.\n[\"Introduction\", \"Methods\", \"Results\"]".into(),
        "# Paper\n\nrevised",
    );
    let (_dir, ctx) = context(&spy);
    let out = WritingAgent::new(ctx).run("wetland paper").await;
    assert_eq!(
        spy.phases(),
        ["OUTLINE", "DRAFT", "DRAFT", "DRAFT", "REVISE"]
    );
    let r = spy.requests();
    assert_eq!(
        r[0].tool_names,
        tools(&["query_and_synthesize", "read_file", "read_folder"])
    );
    assert_eq!(r[0].context_label, None);
    for (req, title) in r[1..4].iter().zip(["Introduction", "Methods", "Results"]) {
        assert_eq!(
            req.tool_names,
            tools(&["query_and_synthesize", "extract_snippets", "read_file"])
        );
        assert_eq!(
            req.context_label.as_deref(),
            Some(format!("section:{title}").as_str())
        );
        assert!(
            req.user_message
                .contains("1. Introduction\n2. Methods\n3. Results")
        );
    }
    assert_eq!(r[4].tool_names, tools(&["source_map", "write_file"]));
    assert_eq!(r[4].context_label, None);
    for t in ["text of Introduction", "text of Methods", "text of Results"] {
        assert!(r[4].user_message.contains(t), "REVISE sees every draft");
    }
    assert_eq!(
        artifact(&out, "wetland_paper", ".md").1,
        "# Paper\n\nrevised"
    );
}

#[tokio::test]
async fn writing_handles_prose_outlines_huge_outlines_and_an_empty_revision() {
    let spy = writing_spy("I'd write an essay in three parts.".into(), "");
    let (_dir, ctx) = context(&spy);
    let out = WritingAgent::new(ctx).run("wetlands").await;
    assert_eq!(spy.phases(), ["OUTLINE", "DRAFT", "REVISE"]);
    assert_eq!(
        spy.of_phase("DRAFT")[0].context_label.as_deref(),
        Some("section:wetlands")
    );
    let (_, doc) = artifact(&out, "wetlands", ".md");
    assert_eq!(
        doc, "# wetlands\n\n## wetlands\n\ntext of wetlands\n",
        "drafts assembled"
    );

    let many: Vec<String> = (0..100).map(|i| format!("Part {i}")).collect();
    let spy = writing_spy(serde_json::to_string(&many).unwrap(), "doc");
    let (_dir, ctx) = context(&spy);
    WritingAgent::new(ctx).run("big").await;
    assert_eq!(
        spy.of_phase("DRAFT").len(),
        crate::agents::writing::MAX_SECTIONS
    );
}

#[tokio::test]
async fn writing_stops_drafting_when_the_budget_runs_out_and_still_revises() {
    let spy = Spy::new(|r| match phase_of(r) {
        "OUTLINE" => done(r#"["A", "B", "C"]"#),
        "DRAFT" if r.context_label.as_deref() == Some("section:B") => {
            stopped(StopReason::BudgetExhausted)
        }
        "DRAFT" => done("text of A"),
        "REVISE" => stopped(StopReason::BudgetExhausted),
        other => panic!("{other}"),
    });
    let (_dir, ctx) = context(&spy);
    let out = WritingAgent::new(ctx).run("t").await;
    assert_eq!(spy.phases(), ["OUTLINE", "DRAFT", "DRAFT", "REVISE"]);
    assert_eq!(
        out.outcome,
        RunOutcome::Stopped(StopReason::BudgetExhausted)
    );
    assert!(artifact(&out, "t", ".md").1.contains("text of A"));
}

// ---------- assistant ----------

fn memory_call(outcome: ToolOutcome, key: &str) -> ToolCallRecord {
    ToolCallRecord {
        name: "memory_put".into(),
        arguments: json!({"key": key, "value": "v"}),
        outcome,
    }
}

#[tokio::test]
async fn assistant_recalls_responds_and_remembers_what_was_actually_stored() {
    let spy = Spy::new(|r| match phase_of(r) {
        "RECALL" => done_with_tool("You prefer metric units.", "memory_search", "pref: metric"),
        "RESPOND" => done("It is 20 °C."),
        "REMEMBER" => PhaseResult {
            final_text: "Stored two facts.".into(),
            tool_calls: vec![
                memory_call(ToolOutcome::Result("stored".into()), "city"),
                memory_call(ToolOutcome::Error("denied: nobody to ask".into()), "secret"),
            ],
            stop_reason: StopReason::Done,
        },
        other => panic!("unexpected phase {other}"),
    });
    let (_dir, ctx) = context(&spy);
    let out = AssistantAgent::new(ctx)
        .run("What's the weather in Oslo?")
        .await;
    assert_eq!(spy.phases(), ["RECALL", "RESPOND", "REMEMBER"]);
    let r = spy.requests();
    assert_eq!(r[0].tool_names, tools(&["memory_search"]));
    assert_eq!(r[0].context_label.as_deref(), Some("recall"));
    assert_eq!(r[1].tool_names, none());
    assert_eq!(r[1].context_label, None);
    assert!(r[1].user_message.contains("You prefer metric units."));
    assert_eq!(r[2].tool_names, tools(&["memory_put"]));
    assert_eq!(r[2].context_label.as_deref(), Some("remember"));
    assert!(r[2].user_message.contains("It is 20 °C."));

    assert_eq!(out.text, "It is 20 °C.");
    let (_, reply) = artifact(&out, "reply", ".md");
    assert!(reply.contains("It is 20 °C."));
    assert!(
        reply.contains("\"city\""),
        "the stored memory is listed: {reply}"
    );
    assert!(
        !reply.contains("secret"),
        "a refused memory_put is not listed: {reply}"
    );
}

#[tokio::test]
async fn assistant_with_no_answer_or_an_early_stop_still_saves_a_reply() {
    let spy = Spy::new(|r| match phase_of(r) {
        "RECALL" => done("nothing relevant"),
        "RESPOND" => done(""),
        "REMEMBER" => done("NONE"),
        other => panic!("{other}"),
    });
    let (_dir, ctx) = context(&spy);
    let out = AssistantAgent::new(ctx).run("hi").await;
    assert!(
        artifact(&out, "reply", ".md")
            .1
            .contains("(no answer was produced)")
    );

    let spy = Spy::new(|r| match phase_of(r) {
        "RECALL" => stopped(StopReason::BudgetExhausted),
        other => panic!("{other} must not run"),
    });
    let (_dir, ctx) = context(&spy);
    let out = AssistantAgent::new(ctx).run("hi").await;
    assert_eq!(spy.phases(), ["RECALL"]);
    assert_eq!(
        out.outcome,
        RunOutcome::Stopped(StopReason::BudgetExhausted)
    );
    assert_eq!(out.artifacts.len(), 1);
}

// ---------- every agent ----------

#[tokio::test]
async fn every_builtin_agent_uses_one_executor_per_run_and_a_fresh_one_per_run() {
    for def in crate::definition::builtin() {
        let spec = &def.spec;
        let spy = Spy::new(|r| match phase_of(r) {
            "DECOMPOSE" | "OUTLINE" => done(r#"["x"]"#),
            "REVIEW" => done(r#"{"sufficient": true}"#),
            "FIND" => done(r#"{"duplicates": [], "stale": []}"#),
            _ => done("text"),
        });
        let (_dir, ctx) = context(&spy);
        let mut agent = crate::create(&spec.name, ctx).unwrap();
        assert_eq!(agent.name(), spec.name);
        assert_eq!(agent.description(), spec.description);
        let first = agent.run("subject").await;
        assert_eq!(spy.created_count(), 1, "{}", spec.name);
        let phases = spy.requests().len();
        assert!(phases >= 1);
        agent.run("subject").await;
        assert_eq!(spy.created_count(), 2, "{}", spec.name);
        assert_eq!(spy.finished().len(), 2);
        let runs: Vec<usize> = spy
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(|(i, _)| *i)
            .collect();
        assert!(runs[..phases].iter().all(|i| *i == 0) && runs[phases..].iter().all(|i| *i == 1));
        assert_eq!(first.outcome, RunOutcome::Completed, "{}", spec.name);
        assert!(!first.artifacts.is_empty(), "{} saved nothing", spec.name);
        for a in &first.artifacts {
            assert!(
                a.starts_with(
                    _dir.path()
                        .join("Agents")
                        .join(&spec.name)
                        .join("artifacts")
                )
            );
        }
    }
    assert!(crate::create("nope", context(&Spy::new(|_| done(""))).1).is_none());
}

#[tokio::test]
async fn extra_tools_from_the_context_join_the_allowlist_once() {
    let spy = Spy::new(|_| done("ok"));
    let (_dir, ctx) = context(&spy);
    let ctx = ctx.with_extra_tools(["bash".to_string(), "read_file".to_string()]);
    let mut agent = builtin("general", ctx);
    agent.run("t").await;
    let (identity, _) = spy.created.lock().unwrap()[0].clone();
    let mut expected: Vec<String> = spec("general").tools;
    expected.push("bash".into()); // read_file is on the card already: not repeated
    assert_eq!(identity.tool_allowlist, expected);
    assert_eq!(agent.tool_allowlist(), expected);
}
