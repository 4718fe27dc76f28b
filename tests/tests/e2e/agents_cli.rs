//! `lsm agent list`, and all eight agents run from `lsm agent run` against a scripted
//! provider, leaving their artifacts where docs/AGENTS.md says.
//!
//! Without an index or memory these runs have only the built-in tools, so the scripts call
//! built-in tools (and, for the librarian, one tool the run does not have, to show the run
//! survives it). The agents' own tools are exercised in `agents_harness.rs`.

use std::path::{Path, PathBuf};

use lsm_e2e::{lsm, run};
use serde_json::{Value, json};

use super::{call, stderr, stdout_json, text};

/// A workspace with `notes.md` and a script.
fn workspace(lines: &[Value]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.md"), "Soil holds carbon.\n").unwrap();
    let script = dir.path().join("script.jsonl");
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&script, body).unwrap();
    (dir, script)
}

fn agent_run(cwd: &Path, script: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = lsm(cwd);
    cmd.args(["agent", "run"])
        .args(args)
        .arg("--provider")
        .arg(format!("scripted:{}", script.display()))
        .args(["--agents-folder", "Agents"]);
    run(&mut cmd)
}

/// `true` when `name` is `<stem>_<YYYYMMDD_HHMMSS><suffix>`.
fn is_artifact_name(name: &str, stem: &str, suffix: &str) -> bool {
    name.strip_prefix(stem)
        .and_then(|r| r.strip_prefix('_'))
        .and_then(|r| r.strip_suffix(suffix))
        .is_some_and(|ts| {
            ts.len() == 15
                && ts
                    .char_indices()
                    .all(|(i, c)| if i == 8 { c == '_' } else { c.is_ascii_digit() })
        })
}

#[test]
fn agent_list_shows_every_agent_with_its_tier_input_and_tools() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(lsm(dir.path()).args(["agent", "list"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    for name in [
        "general",
        "research",
        "synthesis",
        "curator",
        "writing",
        "librarian",
        "manuscript_editor",
        "assistant",
        "conductor",
        "researcher",
        "terminal",
    ] {
        assert!(table.contains(name), "{name} missing:\n{table}");
    }
    assert!(
        table.contains("tools: query_and_synthesize, query_remote_chain"),
        "{table}"
    );

    let out = run(lsm(dir.path()).args(["agent", "list", "--json"]));
    let rows = stdout_json(&out);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 11);
    let research = rows.iter().find(|r| r["name"] == "research").unwrap();
    assert_eq!(research["tier"], "complex");
    assert_eq!(research["input"], "topic");
    assert_eq!(
        research["tools"],
        json!(["query_and_synthesize", "query_remote_chain"])
    );
    let assistant = rows.iter().find(|r| r["name"] == "assistant").unwrap();
    assert_eq!(assistant["tools"], json!(["memory_put", "memory_search"]));
    assert_eq!(assistant["input"], "task");
    assert!(
        rows.iter()
            .all(|r| !r["description"].as_str().unwrap().is_empty())
    );
}

#[test]
fn a_missing_or_wrong_task_or_topic_is_a_usage_error_naming_the_flag() {
    let (dir, script) = workspace(&[text("x")]);
    for (args, needle) in [
        (vec!["research"], "needs a topic: pass --topic"),
        (vec!["writing", "--task", "x"], "takes --topic, not --task"),
        (vec!["curator", "--topic", "x"], "takes --task, not --topic"),
        (vec!["assistant"], "needs a task: pass --task"),
        (
            vec!["general", "--task", "x", "--max-rounds", "2"],
            "--max-rounds applies to agents with a phase that repeats",
        ),
    ] {
        let out = agent_run(dir.path(), &script, &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert!(!dir.path().join("Agents").exists(), "nothing ran");
    }
}

/// One scripted run of an agent from the command line.
struct Case {
    agent: &'static str,
    args: Vec<&'static str>,
    script: Vec<Value>,
    /// The artifacts it must leave under `Agents/<agent>/artifacts/`: `(stem, suffix)`.
    artifacts: Vec<(&'static str, &'static str)>,
}

fn case(
    agent: &'static str,
    args: Vec<&'static str>,
    script: Vec<Value>,
    artifacts: Vec<(&'static str, &'static str)>,
) -> Case {
    Case {
        agent,
        args,
        script,
        artifacts,
    }
}

fn cases() -> Vec<Case> {
    vec![
        case(
            "general",
            vec!["--task", "Summarize notes.md"],
            vec![
                call("read_file", json!({"path": "notes.md"})),
                text("Soil holds carbon."),
            ],
            vec![("result", ".md")],
        ),
        case(
            "librarian",
            vec!["--task", "What does soil hold?"],
            vec![
                call("query_and_synthesize", json!({"query": "soil"})),
                text("Soil holds carbon [notes.md]."),
            ],
            vec![("answer", ".md")],
        ),
        case(
            "manuscript_editor",
            vec!["--task", "Tighten notes.md"],
            vec![
                call("read_file", json!({"path": "notes.md"})),
                text("Edit report: nothing to tighten."),
            ],
            vec![("edit_report", ".md")],
        ),
        case(
            "research",
            vec!["--topic", "soil carbon", "--max-rounds", "1"],
            vec![
                text(r#"Subtopics: ["storage", "loss"]"#),
                text("Soil stores carbon."),
                text("Tillage loses carbon."),
                text("# Soil carbon\n\n## Storage\n## Loss"),
                text(r#"{"sufficient": true, "suggestions": []}"#),
            ],
            vec![("soil_carbon", ".md")],
        ),
        case(
            "synthesis",
            vec!["--topic", "soil carbon"],
            vec![
                call("read_file", json!({"path": "notes.md"})),
                text("- Soil holds carbon [notes.md]"),
                text("Soil holds carbon [notes.md]."),
                text("# Soil carbon\n\nSoil holds carbon.\n\n## Sources\n- notes.md"),
            ],
            vec![("soil_carbon", ".md")],
        ),
        case(
            "curator",
            vec!["--task", "Curate this folder"],
            vec![
                call("read_folder", json!({"path": "."})),
                text("- notes.md"),
                call("hash_file", json!({"path": "notes.md"})),
                text(r#"{"duplicates": [], "stale": [{"path": "notes.md", "reason": "short"}]}"#),
                text("# Curation report\n\nnotes.md is short."),
            ],
            vec![("curation_report", ".md"), ("curation_findings", ".json")],
        ),
        case(
            "writing",
            vec!["--topic", "soil carbon"],
            vec![
                text(r#"["Introduction"]"#),
                text("Soil holds carbon."),
                text("# Soil carbon\n\n## Introduction\n\nSoil holds carbon."),
            ],
            vec![("soil_carbon", ".md")],
        ),
        case(
            "assistant",
            vec!["--task", "Say hello"],
            vec![text("nothing relevant"), text("Hello!"), text("NONE")],
            vec![("reply", ".md")],
        ),
    ]
}

#[test]
fn all_eight_agents_run_from_the_cli_and_leave_their_artifacts() {
    for Case {
        agent,
        args,
        script,
        artifacts: expected,
    } in cases()
    {
        let (dir, script) = workspace(&script);
        let mut full = vec![agent];
        full.extend(args);
        full.push("--json");
        let out = agent_run(dir.path(), &script, &full);
        assert_eq!(out.status.code(), Some(0), "{agent}: {}", stderr(&out));
        let s = stdout_json(&out);
        assert_eq!(s["agent_name"], agent);
        assert_eq!(s["status"], "completed", "{agent}: {s}");
        let artifacts_dir = dir.path().join("Agents").join(agent).join("artifacts");
        let listed: Vec<PathBuf> = s["artifacts_created"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| PathBuf::from(a.as_str().unwrap()))
            .filter(|p| p.starts_with(&artifacts_dir))
            .collect();
        assert_eq!(listed.len(), expected.len(), "{agent}: {listed:?}");
        for (stem, suffix) in expected {
            let found = listed
                .iter()
                .find(|p| is_artifact_name(p.file_name().unwrap().to_str().unwrap(), stem, suffix));
            let path =
                found.unwrap_or_else(|| panic!("{agent}: no {stem}_<ts>{suffix} in {listed:?}"));
            assert!(
                path.is_file(),
                "{agent}: {} was listed but not written",
                path.display()
            );
        }
        // One harness per run: one run folder, beside the agent's own log file.
        let logs: Vec<PathBuf> =
            std::fs::read_dir(dir.path().join("Agents").join(agent).join("logs"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
        assert_eq!(
            logs.iter().filter(|p| p.is_dir()).count(),
            1,
            "{agent}: {logs:?}"
        );
        assert_eq!(
            logs.iter()
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
                .count(),
            1,
            "{agent}: {logs:?}"
        );
    }
}

#[test]
fn research_in_human_mode_logs_its_subtopics_and_prints_the_artifact_paths() {
    let (dir, script) = workspace(&[
        text(r#"["storage", "loss"]"#),
        text("Soil stores carbon."),
        text("Tillage loses carbon."),
        text("# Soil carbon outline"),
        text(r#"{"sufficient": true}"#),
    ]);
    let out = agent_run(dir.path(), &script, &["research", "--topic", "soil carbon"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    for st in ["storage", "loss"] {
        assert!(
            err.contains(&format!("[research] Phase research, item '{st}': done")),
            "{err}"
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("# Soil carbon outline"), "{stdout}");
    let artifact = stdout
        .lines()
        .find_map(|l| l.strip_prefix("artifact: "))
        .unwrap_or_else(|| panic!("no artifact line:\n{stdout}"));
    assert!(
        artifact.contains("Agents/research/artifacts/soil_carbon_"),
        "{artifact}"
    );
    assert_eq!(
        std::fs::read_to_string(artifact).unwrap(),
        "# Soil carbon outline"
    );
    let log = stdout
        .lines()
        .find_map(|l| l.strip_prefix("log: "))
        .unwrap_or_else(|| panic!("no log line:\n{stdout}"));
    assert!(
        std::fs::read_to_string(log)
            .unwrap()
            .contains("Phase research, item 'loss': done")
    );
}

#[test]
fn research_out_of_budget_still_saves_an_outline_and_exits_3() {
    // The first subtopic's phase spends the whole budget: the second is never researched,
    // SYNTHESIZE makes no call, and the findings are saved as the outline.
    let (dir, script) = workspace(&[
        json!({"text": r#"["storage", "loss"]"#, "usage": {"input_tokens": 10, "output_tokens": 5}}),
        json!({"text": "Soil stores carbon.", "usage": {"input_tokens": 900, "output_tokens": 100}}),
        text("never reached"),
    ]);
    let out = agent_run(
        dir.path(),
        &script,
        &[
            "research",
            "--topic",
            "soil carbon",
            "--max-tokens-budget",
            "1000",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let s = stdout_json(&out);
    assert_eq!(s["run_outcome"], "budget_exhausted");
    assert_eq!(
        s["token_usage"]["iterations"], 2,
        "no call after the budget ran out"
    );
    let outline = s["artifacts_created"].as_array().unwrap()[0]
        .as_str()
        .unwrap()
        .to_string();
    let saved = std::fs::read_to_string(&outline).unwrap();
    assert!(
        saved.contains("Soil stores carbon.") && saved.contains("budget_exhausted"),
        "{saved}"
    );
}
