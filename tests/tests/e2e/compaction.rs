//! Context compaction through `lsm agent run`: a run whose tool results overflow a small
//! window (`[agents.compaction] context_window`, or `[llm] context_window`) compacts its
//! context, records it, and completes.

use lsm_e2e::{lsm, run};
use serde_json::{Value, json};

use super::{call, stderr, stdout_json, text};

/// Ten 3 KB files, a script reading each, and `lsm.toml` with `config`.
fn workspace(config: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..10 {
        std::fs::write(
            dir.path().join(format!("part{i}.md")),
            format!("# Part {i}\n{}", "The soil holds carbon. ".repeat(130)),
        )
        .unwrap();
    }
    let mut lines: Vec<Value> = (0..10)
        .map(|i| call("read_file", json!({"path": format!("part{i}.md")})))
        .collect();
    lines.push(text("I read all ten parts."));
    let script = dir.path().join("script.jsonl");
    std::fs::write(
        &script,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        format!("[agents]\nagents_folder = \"Agents\"\n\n{config}"),
    )
    .unwrap();
    (dir, script)
}

fn run_general(dir: &std::path::Path, script: &std::path::Path) -> std::process::Output {
    let mut cmd = lsm(dir);
    cmd.args(["agent", "run", "general", "--task", "read the ten parts"])
        .arg("--provider")
        .arg(format!("scripted:{}", script.display()))
        .args(["--config", "lsm.toml", "--json"]);
    run(&mut cmd)
}

/// The run's transcript, one JSON object per line.
fn transcript(dir: &std::path::Path, summary: &Value) -> Vec<Value> {
    super::transcript_of(dir, summary)
}

#[test]
fn a_run_whose_results_overflow_a_small_window_compacts_and_completes() {
    for config in [
        "[agents.compaction]\ncontext_window = 8192\n",
        "[llm]\ncontext_window = 8192\n",
    ] {
        let (dir, script) = workspace(config);
        let out = run_general(dir.path(), &script);
        assert_eq!(out.status.code(), Some(0), "{config}: {}", stderr(&out));
        let summary = stdout_json(&out);
        let compactions = summary["context_tracking"]["per_label"]["__default__"]["compactions"]
            .as_u64()
            .unwrap();
        assert!(compactions >= 1, "{config}: {summary:#}");
        let lines = transcript(dir.path(), &summary);
        let finished: Vec<&Value> = lines
            .iter()
            .filter(|l| l["event"] == "compaction_finished")
            .collect();
        assert_eq!(finished.len() as u64, compactions);
        assert_eq!(finished[0]["steps"][0], "elide_tool_results");
        for l in lines.iter().filter(|l| l["event"] == "llm_request") {
            let estimate = l["prompt_tokens_estimate"].as_u64().unwrap();
            let cap = l["max_output_tokens"].as_u64().unwrap();
            assert!(estimate + cap <= 8192, "{config}: {l}");
        }
        assert_eq!(summary["final_text"], "I read all ten parts.");
    }
}

#[test]
fn the_full_strategy_never_compacts_and_bad_settings_are_usage_errors() {
    let (dir, script) = workspace(
        "context_window_strategy = \"full\"\n[agents.compaction]\ncontext_window = 4096\n",
    );
    // The strategy belongs to [agents]: put it there.
    let toml = std::fs::read_to_string(dir.path().join("lsm.toml"))
        .unwrap()
        .replace(
            "agents_folder = \"Agents\"\n\ncontext_window_strategy = \"full\"\n",
            "agents_folder = \"Agents\"\ncontext_window_strategy = \"full\"\n",
        );
    std::fs::write(dir.path().join("lsm.toml"), toml).unwrap();
    let out = run_general(dir.path(), &script);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    assert_eq!(
        summary["context_tracking"]["per_label"]["__default__"]["compactions"],
        0
    );
    let (dir, script) = workspace("[agents.compaction]\ntarget_fraction = 1.5\n");
    let out = run_general(dir.path(), &script);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("target_fraction"), "{}", stderr(&out));
}
