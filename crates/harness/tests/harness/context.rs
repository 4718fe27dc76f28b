//! The context providers on the real driver: the project instructions and the environment
//! block in every request, a nested `AGENTS.md` read through the sandbox's read roots and
//! given once, and a resumed run that keeps the texts it started with.

use std::path::{Path, PathBuf};

use lsm_harness::{ResumePoint, read_journal};

use super::*;

/// `root/AGENTS.md`, `root/a/AGENTS.md` (outside the read roots) and `root/a/b/AGENTS.md`
/// with two notes beside it; the read roots are `root/a/b` only.
fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("proj");
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("AGENTS.md"), "Rule one: be brief.\n").unwrap();
    std::fs::write(root.join("a/AGENTS.md"), "Outer rule, unreadable.\n").unwrap();
    std::fs::write(root.join("a/b/AGENTS.md"), "Inner rule: cite lines.\n").unwrap();
    std::fs::write(root.join("a/b/x.md"), "x text\n").unwrap();
    std::fs::write(root.join("a/b/y.md"), "y text\n").unwrap();
    (dir, root)
}

fn script(root: &Path) -> Vec<ScriptedResponse> {
    let path = |name: &str| root.join("a/b").join(name).display().to_string();
    vec![
        ScriptedResponse::tool("read_file", json!({"path": path("x.md")})),
        ScriptedResponse::tool("read_file", json!({"path": path("y.md")})),
        ScriptedResponse::text("done"),
    ]
}

fn harness(root: &Path, provider: Arc<ScriptedProvider>) -> AgentHarness {
    let (identity, config, sandbox) = parts(root);
    AgentHarness::new(identity, "sys", config, provider, sandbox).with_project_root(root)
}

fn parts(root: &Path) -> (AgentIdentity, HarnessConfig, Arc<Sandbox>) {
    let sandbox = Sandbox::new(
        SandboxConfig {
            allowed_read_paths: vec![root.join("a/b")],
            working_dir: Some(root.join("a/b")),
            ..SandboxConfig::default()
        },
        lsm_sandbox::builtin::registry(),
        None,
    )
    .unwrap();
    let identity = AgentIdentity {
        name: "agent".into(),
        tool_allowlist: vec!["read_file".into()],
        tier: lsm_phase::LlmTier::Normal,
        topic: "t".into(),
    };
    let config = HarnessConfig {
        agents_folder: root.parent().unwrap().join("agents"),
        ..HarnessConfig::default()
    };
    (identity, config, Arc::new(sandbox))
}

fn events(run_dir: &Path, name: &str) -> Vec<Value> {
    read_journal(&run_dir.join("transcript.jsonl"))
        .unwrap()
        .events
        .iter()
        .filter(|e| e.event.name() == name)
        .map(|e| serde_json::to_value(&e.event).unwrap())
        .collect()
}

fn tool_messages(request: &LlmRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.clone())
        .collect()
}

#[tokio::test]
async fn instructions_and_environment_reach_every_call_and_nested_guidance_comes_once() {
    let (_dir, root) = project();
    let provider = Arc::new(ScriptedProvider::new(script(&root)));
    let mut h = harness(&root, Arc::clone(&provider));
    let report = h.run("read the notes").await;
    assert_eq!(report.result.stop_reason, StopReason::Done);
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        let standing = &r.messages[1];
        assert_eq!(standing.role, Role::System);
        assert!(
            standing.content.contains("Rule one: be brief."),
            "{standing:?}"
        );
        assert!(
            standing.content.contains("- tools: read_file"),
            "{standing:?}"
        );
        assert!(
            standing.content.contains(&format!(
                "- file tools read under: {}",
                root.join("a/b").display()
            )),
            "{standing:?}"
        );
    }
    let after_both = tool_messages(&requests[2]);
    assert!(after_both[0].starts_with("x text"), "{after_both:?}");
    assert!(
        after_both[0].contains("Inner rule: cite lines."),
        "{after_both:?}"
    );
    assert!(
        !after_both.concat().contains("Outer rule"),
        "a file outside the read roots is never read: {after_both:?}"
    );
    assert!(
        !after_both[1].contains("Inner rule"),
        "once per run: {after_both:?}"
    );
    let run_dir = h.run_dir();
    let added = events(&run_dir, "guidance_added");
    assert_eq!(added.len(), 1, "{added:?}");
    assert_eq!(
        added[0]["path"],
        root.join("a/b/AGENTS.md").display().to_string()
    );
    assert_eq!(added[0]["bytes"], 24);
    assert_eq!(added[0]["tool"], "read_file");
    let instructions = events(&run_dir, "project_instructions");
    assert_eq!(instructions.len(), 1);
    assert_eq!(instructions[0]["files"][0]["name"], "AGENTS.md");
    assert_eq!(events(&run_dir, "environment_context").len(), 1);
}

#[tokio::test]
async fn a_resumed_run_keeps_its_texts_and_gives_no_guidance_twice() {
    let (_dir, root) = project();
    let provider = Arc::new(ScriptedProvider::new(script(&root)));
    let mut h = harness(&root, Arc::clone(&provider));
    h.run("read the notes").await;
    let run_dir = h.run_dir();
    drop(h);
    // Cut the journal right after the guidance was recorded, as a crash would.
    let path = run_dir.join("transcript.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let n = lines
        .iter()
        .position(|l| l.contains("\"guidance_added\""))
        .unwrap()
        + 1;
    std::fs::write(
        &path,
        lines[..n]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let _ = std::fs::remove_file(run_dir.join("run_summary.json"));
    // The files change before the resume: the run must not see it.
    std::fs::write(root.join("AGENTS.md"), "Changed rule.\n").unwrap();
    std::fs::write(root.join("a/b/AGENTS.md"), "Changed inner rule.\n").unwrap();

    let point = ResumePoint::open(&run_dir).unwrap();
    let served = point.model_calls_made() as usize;
    let provider = Arc::new(ScriptedProvider::new(script(&root)).starting_at(served));
    let (identity, config, sandbox) = parts(&root);
    let mut h = AgentHarness::resumed(point, identity, "sys", config, provider.clone(), sandbox)
        .with_project_root(&root);
    let report = h.run("read the notes").await;
    assert_eq!(report.result.stop_reason, StopReason::Done);
    let requests = provider.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        let all: String = r.messages.iter().map(|m| m.content.as_str()).collect();
        assert!(all.contains("Rule one: be brief."), "{all}");
        assert!(all.contains("Inner rule: cite lines."), "{all}");
        assert!(!all.contains("Changed"), "{all}");
    }
    assert_eq!(events(&run_dir, "guidance_added").len(), 1);
    assert_eq!(events(&run_dir, "project_instructions").len(), 1);
    assert_eq!(
        lsm_harness::RunState::fold(&read_journal(&path).unwrap().events),
        *h.state()
    );
}

#[tokio::test]
async fn nested_files_are_cut_to_the_cap_like_the_project_instructions() {
    let (_dir, root) = project();
    let provider = Arc::new(ScriptedProvider::new(script(&root)));
    let (identity, mut config, sandbox) = parts(&root);
    config.context.max_instruction_bytes = 6;
    let mut h =
        AgentHarness::new(identity, "sys", config, provider, sandbox).with_project_root(&root);
    h.run("read the notes").await;
    let added = events(&h.run_dir(), "guidance_added");
    assert_eq!(added[0]["truncated"], true);
    assert_eq!(added[0]["bytes"], 24);
    let text = added[0]["text"].as_str().unwrap();
    let note = format!(
        "Inner \n\n[cut: this file is 24 bytes; only its first 6 are given here. The full \
         file is {}.]",
        root.join("a/b/AGENTS.md").display()
    );
    assert_eq!(text, note);
    let files = &events(&h.run_dir(), "project_instructions")[0]["files"];
    assert_eq!(files[0]["truncated"], true);
    assert!(
        files[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Rule o\n\n[cut: ")
    );
}
