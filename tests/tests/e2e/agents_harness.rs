//! Every agent in process on the real harness (`HarnessFactory` → `AgentHarness` → sandbox)
//! with a scripted provider: one end-to-end test per agent, plus the security invariant that
//! an agent's tool-only phase goes through the same allowlist and sandbox as the model's.
//!
//! The tools are the real ones: the built-ins, the memory tools over a memory store in the
//! test's folder, and the knowledge-base tools over an index of the test's workspace (no LLM
//! for the pipeline, so its answers are the fallback excerpts and the script's order holds).

use std::path::PathBuf;
use std::sync::Arc;

use lsm_agents::{AgentContext, AgentCore, AgentOutput, DirectToolCall, PhaseRequest};
use lsm_harness::{HarnessConfig, HarnessFactory, RunSummary};
use lsm_phase::{RunOutcome, StopReason, ToolOutcome};
use lsm_providers::{Provider, ScriptedProvider, ScriptedResponse};
use lsm_sandbox::{PermissionAsker, Sandbox, SandboxConfig, ToolRegistry};
use lsm_test_support::Asker;
use lsm_test_support::script::{text_response as text, tool_response as tool};
use serde_json::{Value, json};

// ---------- the rig ----------

struct Rig {
    dir: tempfile::TempDir,
    provider: Arc<ScriptedProvider>,
    ctx: AgentContext,
}

impl Rig {
    fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn agent_dir(&self, agent: &str) -> PathBuf {
        self.dir.path().join("Agents").join(agent)
    }

    /// The one run folder of `agent` (one harness per run) and its summary.
    fn summary(&self, agent: &str) -> (PathBuf, RunSummary) {
        let runs: Vec<PathBuf> = std::fs::read_dir(self.agent_dir(agent).join("logs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(runs.len(), 1, "one harness, one run folder: {runs:?}");
        let s = serde_json::from_slice(&std::fs::read(runs[0].join("run_summary.json")).unwrap())
            .unwrap();
        (runs[0].clone(), s)
    }

    async fn run(&self, agent: &str, task: &str) -> AgentOutput {
        let mut agent = lsm_agents::create(agent, self.ctx.clone()).unwrap();
        agent.run(task).await
    }
}

/// The built-ins, the memory tools (a store in `root`, no global scope) and the
/// knowledge-base tools over an index of `ws` (lexical, no LLM).
fn real_tools(root: &std::path::Path, ws: &std::path::Path) -> ToolRegistry {
    let layout = lsm_memory::StoreLayout::new(root.join("Agents")).with_global_db(None);
    let store = Arc::new(lsm_memory::MemoryStore::new(layout));
    let mut registry = lsm_sandbox::builtin::registry();
    for tool in lsm_memory::tools(store) {
        registry = registry.with(tool);
    }
    let mut config = lsm_tools_kb::KbConfig {
        index_dir: root.join("kb"),
        ..Default::default()
    };
    config.embedder.kind = lsm_tools_kb::EmbedderKind::None;
    let kb = lsm_tools_kb::KnowledgeBase::open_or_create(&config, false, None).unwrap();
    kb.ingest(
        &[ws.to_path_buf()],
        &lsm_tools_kb::IngestOptions::default(),
        &lsm_tools_kb::NoProgress,
    )
    .unwrap();
    let policy = lsm_tools_kb::ModePolicy::new(&config.allowed_profiles, false);
    let pipeline = lsm_tools_kb::Pipeline::new(Arc::new(kb), None, policy);
    lsm_tools_kb::tools::registry_with(registry, Some(Arc::new(pipeline)))
}

fn rig(script: Vec<ScriptedResponse>, budget: u64) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("notes.md"), "# Notes\n\nSoil holds carbon.\n").unwrap();
    std::fs::write(ws.join("copy.md"), "# Notes\n\nSoil holds carbon.\n").unwrap();
    let registry = real_tools(dir.path(), &ws);
    let policy = SandboxConfig::confined_to(&ws);
    let asker: Arc<dyn PermissionAsker> = Arc::new(Asker::approve_all());
    let sandbox = Sandbox::new(policy, registry, Some(asker)).unwrap();
    let provider = Arc::new(ScriptedProvider::new(script));
    let config = HarnessConfig {
        agents_folder: dir.path().join("Agents"),
        max_tokens_budget: budget,
        ..HarnessConfig::default()
    };
    let factory = HarnessFactory::new(
        config,
        Arc::clone(&provider) as Arc<dyn Provider>,
        Arc::new(sandbox),
    );
    let ctx =
        AgentContext::new(Arc::new(factory), dir.path().join("Agents")).with_max_iterations(6);
    Rig { dir, provider, ctx }
}

/// The artifact `<stem>_<ts><suffix>` of `out`, checked to be listed in the run summary and
/// to live in the agent's artifacts folder; its text.
fn artifact(
    rig: &Rig,
    agent: &str,
    out: &AgentOutput,
    summary: &RunSummary,
    stem: &str,
    suffix: &str,
) -> String {
    let dir = rig.agent_dir(agent).join("artifacts");
    let path = out
        .artifacts
        .iter()
        .find(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.strip_prefix(&format!("{stem}_"))
                .and_then(|r| r.strip_suffix(suffix))
                .is_some_and(|ts| ts.len() == 15 && ts.as_bytes()[8] == b'_')
        })
        .unwrap_or_else(|| panic!("{agent}: no {stem}_<ts>{suffix} in {:?}", out.artifacts));
    assert_eq!(path.parent().unwrap(), dir);
    assert!(
        summary
            .artifacts_created
            .contains(&path.display().to_string()),
        "{agent}: the run summary lists {}",
        path.display()
    );
    std::fs::read_to_string(path).unwrap()
}

fn tool_count(s: &RunSummary, name: &str) -> u64 {
    s.tools_used.get(name).copied().unwrap_or(0)
}

fn labels(s: &RunSummary) -> Vec<String> {
    s.context_tracking.context_labels_seen.clone()
}

fn log_text(out: &AgentOutput) -> String {
    std::fs::read_to_string(out.log_file.as_ref().unwrap()).unwrap()
}

// ---------- one end-to-end test per agent ----------

#[tokio::test]
async fn general_runs_one_phase_on_the_real_harness() {
    let rig = rig(
        vec![
            tool(
                "find_section",
                json!({"path": "notes.md", "heading": "Notes"}),
            ),
            tool("read_file", json!({"path": "notes.md"})),
            text("The notes say soil holds carbon."),
        ],
        100_000,
    );
    let out = rig.run("general", "What do the notes say?").await;
    assert_eq!(out.outcome, RunOutcome::Completed, "{out:?}");
    let (_, s) = rig.summary("general");
    assert_eq!(s.status, "completed");
    assert_eq!(s.topic, "What do the notes say?");
    assert_eq!(s.tool_sequence, ["find_section", "read_file"]);
    let saved = artifact(&rig, "general", &out, &s, "result", ".md");
    assert!(saved.contains("soil holds carbon"));
    assert!(log_text(&out).contains("Task: What do the notes say?"));
}

#[tokio::test]
async fn librarian_uses_its_knowledge_base_and_memory_tools() {
    let rig = rig(
        vec![
            tool("memory_search", json!({"query": "soil"})),
            tool(
                "query_and_synthesize",
                json!({"query": "what does soil hold"}),
            ),
            tool("extract_snippets", json!({"query": "carbon"})),
            tool("source_map", json!({"query": "soil carbon"})),
            tool("memory_put", json!({"text": "Soil holds carbon."})),
            text("Soil holds carbon [notes.md]."),
        ],
        100_000,
    );
    let out = rig.run("librarian", "What does soil hold?").await;
    assert_eq!(out.outcome, RunOutcome::Completed, "{out:?}");
    let (_, s) = rig.summary("librarian");
    for t in [
        "memory_search",
        "query_and_synthesize",
        "extract_snippets",
        "source_map",
        "memory_put",
    ] {
        assert_eq!(tool_count(&s, t), 1, "{t}");
    }
    assert_eq!(
        s.approvals_denials.approvals, 1,
        "memory_put needed a person's permission"
    );
    assert!(artifact(&rig, "librarian", &out, &s, "answer", ".md").contains("[notes.md]"));
    // The real tools ran: the knowledge-base tools answered from the index (their results
    // name the indexed file by its absolute path), and the fact reached the memory store.
    let (run_dir, _) = rig.summary("librarian");
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    let indexed = rig.workspace().canonicalize().unwrap().join("notes.md");
    assert!(
        transcript.contains(&indexed.display().to_string()),
        "{transcript}"
    );
    let db = rig.agent_dir("librarian").join("memory").join("memory.db");
    assert!(db.is_file(), "memory_put wrote {}", db.display());
}

#[tokio::test]
async fn manuscript_editor_finds_and_rewrites_a_section() {
    let rig = rig(
        vec![
            tool(
                "find_section",
                json!({"path": "notes.md", "heading": "Notes"}),
            ),
            tool(
                "write_file",
                json!({"path": "notes.md", "content": "# Notes\n\nSoil stores carbon.\n"}),
            ),
            text("Edit report: 'holds' → 'stores' in # Notes."),
        ],
        100_000,
    );
    let out = rig
        .run("manuscript_editor", "Use 'stores' in the notes")
        .await;
    assert_eq!(out.outcome, RunOutcome::Completed, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(rig.workspace().join("notes.md")).unwrap(),
        "# Notes\n\nSoil stores carbon.\n"
    );
    let (_, s) = rig.summary("manuscript_editor");
    let report = artifact(&rig, "manuscript_editor", &out, &s, "edit_report", ".md");
    assert!(report.contains("'stores'"));
    assert!(
        s.artifacts_created
            .iter()
            .any(|a| a.ends_with("ws/notes.md")),
        "the edited file is listed too: {:?}",
        s.artifacts_created
    );
}

#[tokio::test]
async fn research_runs_its_phases_in_named_contexts_on_one_harness() {
    let rig = rig(
        vec![
            text(r#"Here: ["storage", "loss"]"#),
            // RESEARCH storage: a tool outside tool_names is refused, then the KB tool runs.
            tool("query_remote_chain", json!({"query": "x"})),
            tool(
                "query_and_synthesize",
                json!({"query": "soil carbon storage"}),
            ),
            text("Soil stores carbon [S1]."),
            // RESEARCH loss.
            text("Tillage loses carbon [S2]."),
            text("# Soil carbon\n\n## Storage\n## Loss"),
            text(r#"{"sufficient": true, "suggestions": []}"#),
        ],
        100_000,
    );
    let out = rig.run("research", "soil carbon").await;
    assert_eq!(out.outcome, RunOutcome::Completed, "{out:?}");
    let (run_dir, s) = rig.summary("research");
    assert_eq!(tool_count(&s, "query_and_synthesize"), 1);
    assert_eq!(
        s.approvals_denials.denials, 1,
        "query_remote_chain was not in tool_names"
    );
    let seen = labels(&s);
    for l in ["subtopic:storage", "subtopic:loss"] {
        assert!(seen.contains(&l.to_string()), "{seen:?}");
    }
    assert_eq!(
        s.context_tracking.per_label["subtopic:storage"].iterations,
        3
    );
    assert_eq!(s.context_tracking.per_label["subtopic:loss"].iterations, 1);
    let outline = artifact(&rig, "research", &out, &s, "soil_carbon", ".md");
    assert_eq!(outline, "# Soil carbon\n\n## Storage\n## Loss");
    let log = log_text(&out);
    for st in ["storage", "loss"] {
        assert!(
            log.contains(&format!("Phase research, item '{st}': done")),
            "{log}"
        );
    }
    // The DECOMPOSE call offered no tool but the control tools; RESEARCH only the KB tool.
    let requests = rig.provider.requests();
    let offered =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|t| t.name.clone()).collect() };
    assert_eq!(offered(0), ["complete", "block"]);
    assert_eq!(offered(1), ["query_and_synthesize", "complete", "block"]);
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    assert!(transcript.contains("\"event\":\"artifact\""));
}

#[tokio::test]
async fn research_out_of_budget_synthesizes_nothing_more_and_saves_its_findings() {
    let rig = rig(
        vec![
            text(r#"["storage", "loss", "policy"]"#),
            ScriptedResponse::text("Soil stores carbon.").with_usage(900, 100),
            text("never reached"),
        ],
        1000,
    );
    let out = rig.run("research", "soil carbon").await;
    assert_eq!(
        out.outcome,
        RunOutcome::Stopped(StopReason::BudgetExhausted)
    );
    assert_eq!(
        rig.provider.requests().len(),
        2,
        "no call once the budget is gone"
    );
    let (_, s) = rig.summary("research");
    assert_eq!(s.run_outcome, "budget_exhausted");
    let outline = artifact(&rig, "research", &out, &s, "soil_carbon", ".md");
    assert!(outline.contains("Soil stores carbon."), "{outline}");
    assert!(log_text(&out).contains("The run stopped early (budget_exhausted)"));
}

#[tokio::test]
async fn synthesis_gathers_maps_sources_and_writes() {
    let rig = rig(
        vec![
            tool("read_file", json!({"path": "notes.md"})),
            tool("extract_snippets", json!({"query": "carbon"})),
            text("- Soil holds carbon [notes.md]"),
            tool("source_map", json!({"query": "soil carbon"})),
            text("Soil holds carbon [notes.md]."),
            tool(
                "write_file",
                json!({"path": "synthesis.md", "content": "# Soil\n"}),
            ),
            text("# Soil carbon\n\nSoil holds carbon.\n\n## Sources\n- notes.md"),
        ],
        100_000,
    );
    let out = rig
        .run("synthesis", "soil carbon, written to synthesis.md")
        .await;
    assert_eq!(out.outcome, RunOutcome::Completed, "{out:?}");
    let (_, s) = rig.summary("synthesis");
    assert!(labels(&s).contains(&"gather".to_string()));
    assert!(rig.workspace().join("synthesis.md").is_file());
    let doc = artifact(
        &rig,
        "synthesis",
        &out,
        &s,
        "soil_carbon__written_to_synthesis_md",
        ".md",
    );
    assert!(doc.contains("## Sources"));
    let sources = artifact(
        &rig,
        "synthesis",
        &out,
        &s,
        "soil_carbon__written_to_synthesis_md_sources",
        ".md",
    );
    // The real source_map's map of the indexed file.
    assert!(
        sources.contains("\"files\"") && sources.contains("chunk_id"),
        "{sources}"
    );
}

#[tokio::test]
async fn curator_surveys_finds_duplicates_and_reports() {
    let rig = rig(
        vec![
            tool("read_folder", json!({"path": "."})),
            text("- notes.md\n- copy.md"),
            tool("hash_file", json!({"path": "notes.md"})),
            tool("hash_file", json!({"path": "copy.md"})),
            tool("similarity_search", json!({"threshold": 0.9})),
            text(
                r#"{"duplicates": [{"files": ["notes.md", "copy.md"], "reason": "same hash"}], "stale": []}"#,
            ),
            text("# Curation report\n\ncopy.md duplicates notes.md: remove it."),
        ],
        100_000,
    );
    let out = rig.run("curator", "Curate the workspace").await;
    assert_eq!(out.outcome, RunOutcome::Completed, "{out:?}");
    let (_, s) = rig.summary("curator");
    assert_eq!(tool_count(&s, "hash_file"), 2);
    assert_eq!(tool_count(&s, "similarity_search"), 1);
    // The real similarity_search found the copy: one pair, notes.md and copy.md.
    let (run_dir, _) = rig.summary("curator");
    let transcript = std::fs::read_to_string(run_dir.join("transcript.jsonl")).unwrap();
    assert!(
        transcript.contains("pairs_found\\\":1") || transcript.contains("\"pairs_found\":1"),
        "{transcript}"
    );
    for l in ["survey", "findings"] {
        assert!(labels(&s).contains(&l.to_string()));
    }
    let report = artifact(&rig, "curator", &out, &s, "curation_report", ".md");
    assert!(report.contains("remove it"));
    let findings: Value = serde_json::from_str(&artifact(
        &rig,
        "curator",
        &out,
        &s,
        "curation_findings",
        ".json",
    ))
    .unwrap();
    assert_eq!(
        findings["duplicates"][0]["files"],
        json!(["notes.md", "copy.md"])
    );
    assert!(
        rig.workspace().join("copy.md").is_file(),
        "the curator never deletes"
    );
}

#[tokio::test]
async fn writing_outlines_drafts_sections_and_revises() {
    let rig = rig(
        vec![
            tool("query_and_synthesize", json!({"query": "soil carbon"})),
            text(r#"["Introduction", "Evidence"]"#),
            tool("extract_snippets", json!({"query": "soil"})),
            text("Soil matters."),
            text("Soil holds carbon [notes.md]."),
            tool("source_map", json!({"query": "soil carbon"})),
            text(
                "# Soil carbon\n\n## Introduction\n\nSoil matters.\n\n## Evidence\n\nSoil holds carbon.",
            ),
        ],
        100_000,
    );
    let out = rig.run("writing", "soil carbon").await;
    assert_eq!(out.outcome, RunOutcome::Completed, "{out:?}");
    let (_, s) = rig.summary("writing");
    for l in ["section:Introduction", "section:Evidence"] {
        assert!(labels(&s).contains(&l.to_string()), "{:?}", labels(&s));
    }
    let doc = artifact(&rig, "writing", &out, &s, "soil_carbon", ".md");
    assert!(doc.contains("## Evidence"));
}

#[tokio::test]
async fn assistant_recalls_answers_and_remembers_with_memory_tools() {
    let rig = rig(
        vec![
            tool("memory_search", json!({"query": "units"})),
            text("The user prefers metric units."),
            text("It is 20 °C in Oslo."),
            tool("memory_put", json!({"text": "The user lives in Oslo."})),
            text("Stored the city."),
        ],
        100_000,
    );
    let out = rig.run("assistant", "Weather in Oslo?").await;
    assert_eq!(out.outcome, RunOutcome::Completed, "{out:?}");
    assert_eq!(out.text, "It is 20 °C in Oslo.");
    let (_, s) = rig.summary("assistant");
    for l in ["recall", "remember"] {
        assert!(labels(&s).contains(&l.to_string()));
    }
    let reply = artifact(&rig, "assistant", &out, &s, "reply", ".md");
    assert!(
        reply.contains("It is 20 °C in Oslo.") && reply.contains("The user lives in Oslo."),
        "{reply}"
    );
    // The real memory_put stored it in the assistant's own memory.
    let db = rig.agent_dir("assistant").join("memory").join("memory.db");
    assert!(db.is_file(), "memory_put wrote {}", db.display());
}

// ---------- security: tool-only mode goes through the same checks ----------

#[tokio::test]
async fn an_agents_tool_only_phase_goes_through_the_allowlist_and_the_sandbox() {
    let rig = rig(vec![], 100_000);
    let general = lsm_agents::find("general").unwrap().spec.clone();
    let mut core = AgentCore::new(general.clone(), rig.ctx.clone());
    core.begin_run("tool-only");
    let calls = vec![
        DirectToolCall {
            name: "read_file".into(),
            arguments: json!({"path": "notes.md"}),
        },
        // Registered, but not in general's allowlist.
        DirectToolCall {
            name: "memory_put".into(),
            arguments: json!({"text": "v"}),
        },
        // Allowlisted, but outside the sandbox.
        DirectToolCall {
            name: "read_file".into(),
            arguments: json!({"path": "../../etc/passwd"}),
        },
        DirectToolCall {
            name: "bash".into(),
            arguments: json!({"command": "ls"}),
        },
    ];
    let result = core
        .run_phase(&general.system_prompt, PhaseRequest::direct(calls))
        .await;
    assert_eq!(result.stop_reason, StopReason::Done);
    let outcomes: Vec<&ToolOutcome> = result.tool_calls.iter().map(|c| &c.outcome).collect();
    assert!(matches!(outcomes[0], ToolOutcome::Result(t) if t.contains("Soil holds carbon")));
    assert!(
        matches!(outcomes[1], ToolOutcome::Error(e) if e.contains("not allowed for this harness run")),
        "{:?}",
        outcomes[1]
    );
    assert!(outcomes[2].is_error(), "{:?}", outcomes[2]);
    assert!(
        matches!(outcomes[3], ToolOutcome::Error(e) if e.contains("not allowed for this harness run")),
        "{:?}",
        outcomes[3]
    );
    assert!(
        rig.provider.requests().is_empty(),
        "tool-only mode makes no LLM call"
    );
    let out = core.end_run(Ok(String::new())).await;
    assert_eq!(out.outcome, RunOutcome::Completed);
    let (_, s) = rig.summary("general");
    assert_eq!(
        s.tool_sequence,
        ["read_file", "memory_put", "read_file", "bash"]
    );
    assert_eq!(s.approvals_denials.denials, 3);
}
