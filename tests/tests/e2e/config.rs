//! Configuration from the outside: the layers and `lsm config show`, records under the
//! project's `.lsm/` from any subfolder, `lsm init`, errors that name their source.

use lsm_e2e::{lsm, run};
use serde_json::Value;

use super::{stderr, stdout_json, text, workspace_with_script};

/// The setting `key` of `lsm config show --json`.
fn setting(shown: &Value, key: &str) -> Value {
    shown["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("{key} missing"))
        .clone()
}

#[test]
fn config_show_names_the_source_of_every_layer() {
    let dir = tempfile::tempdir().unwrap();
    let xdg = dir.path().join("xdg");
    std::fs::create_dir_all(xdg.join("lsm")).unwrap();
    std::fs::write(
        xdg.join("lsm/config.toml"),
        "[llm]\nprovider = \"openai\"\nmodel = \"from-user\"\n",
    )
    .unwrap();
    let project = dir.path().join("proj");
    std::fs::create_dir_all(project.join("a/b")).unwrap();
    std::fs::write(
        project.join("lsm.toml"),
        "[agents]\nmax_iterations = 11\n\n[llm]\nmodel = \"from-project\"\n",
    )
    .unwrap();
    let out = run(lsm(&project.join("a/b"))
        .env("XDG_CONFIG_HOME", &xdg)
        .env("LSM_AGENTS_MAX_TOKENS_BUDGET", "777")
        .args(["-c", "stall.threshold=5", "config", "show", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = stdout_json(&out);
    let provider = setting(&shown, "llm.provider");
    assert_eq!(provider["value"], "openai");
    assert_eq!(provider["origin"]["kind"], "file");
    assert_eq!(provider["origin"]["line"], 2);
    assert!(
        provider["source"]
            .as_str()
            .unwrap()
            .ends_with("xdg/lsm/config.toml:2")
    );
    let model = setting(&shown, "llm.model");
    assert_eq!(model["value"], "from-project");
    assert!(
        model["source"]
            .as_str()
            .unwrap()
            .ends_with("proj/lsm.toml:5")
    );
    assert!(
        setting(&shown, "agents.max_iterations")["source"]
            .as_str()
            .unwrap()
            .ends_with("proj/lsm.toml:2")
    );
    let budget = setting(&shown, "agents.max_tokens_budget");
    assert_eq!(budget["value"], 777);
    assert_eq!(budget["origin"]["var"], "LSM_AGENTS_MAX_TOKENS_BUDGET");
    let threshold = setting(&shown, "stall.threshold");
    assert_eq!(threshold["value"], 5);
    assert_eq!(threshold["origin"]["kind"], "flag");
    assert_eq!(
        setting(&shown, "agents.max_output_tokens")["source"],
        "default"
    );
    // Records and the index are the project's, whatever the working directory.
    let folder = setting(&shown, "agents.agents_folder");
    assert_eq!(
        folder["value"],
        project.join(".lsm/agents").display().to_string()
    );
    assert_eq!(shown["files"].as_array().unwrap().len(), 2);

    // The text form says the same, one line per setting.
    let out = run(lsm(&project.join("a/b"))
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["config", "show"]));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("llm.model = "))
        .unwrap();
    assert!(
        line.contains("\"from-project\"") && line.contains("proj/lsm.toml:5"),
        "{line}"
    );
}

#[test]
fn a_runs_options_are_the_top_layer_and_config_show_names_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents]\nmax_tokens_budget = 100\nstop_mode = \"interactive\"\n",
    )
    .unwrap();
    // Over the file and `-c`: the option wins and is named as the source.
    let out = run(lsm(dir.path()).args([
        "-c",
        "agents.max_tokens_budget=200",
        "config",
        "show",
        "--json",
        "--max-tokens-budget",
        "300",
        "--stop-mode",
        "strict_automation",
        "--agents-folder",
        "records",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = stdout_json(&out);
    let budget = setting(&shown, "agents.max_tokens_budget");
    assert_eq!(budget["value"], 300);
    assert_eq!(budget["source"], "--max-tokens-budget");
    assert_eq!(budget["origin"]["kind"], "option");
    assert_eq!(budget["origin"]["flag"], "--max-tokens-budget");
    assert_eq!(
        setting(&shown, "agents.stop_mode")["value"],
        "strict_automation"
    );
    let folder = setting(&shown, "agents.agents_folder");
    assert_eq!(folder["source"], "--agents-folder");
    assert!(
        folder["value"].as_str().unwrap().ends_with("/records"),
        "{folder}"
    );
    // The text form says it on the setting's line; a zero limit names the option.
    let out = run(lsm(dir.path()).args(["config", "show", "--max-iterations", "7"]));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("agents.max_iterations = "))
        .unwrap();
    assert!(
        line.contains("= 7") && line.ends_with("# --max-iterations"),
        "{line}"
    );
    let out = run(lsm(dir.path()).args(["config", "show", "--max-workers", "0"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--max-workers: conductor.max_workers must be at least 1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_run_from_a_subfolder_records_under_the_project_and_bad_settings_name_their_source() {
    let (dir, script) = workspace_with_script(&[text("done")]);
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents]\nmax_iterations = 4\n",
    )
    .unwrap();
    let sub = dir.path().join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    let out = run(lsm(&sub)
        .args([
            "agent",
            "run",
            "general",
            "--task",
            "t",
            "--json",
            "--provider",
        ])
        .arg(format!("scripted:{}", script.display())));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let summary = stdout_json(&out);
    let run_dir = dir
        .path()
        .join(".lsm/agents/general/logs")
        .join(summary["run_id"].as_str().unwrap());
    assert!(
        run_dir.join("run_summary.json").is_file(),
        "{}",
        run_dir.display()
    );
    assert!(!sub.join(".lsm").exists() && !sub.join("Agents").exists());

    // A mistyped variable is named, not blamed on the defaults; a file error has its line.
    let out = run(lsm(&sub)
        .env("LSM_AGENTS_MAX_TOKEN_BUDGET", "5")
        .args(["config", "show"]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("environment variable LSM_AGENTS_MAX_TOKEN_BUDGET")
            && !err.contains("built-in defaults"),
        "{err}"
    );
    std::fs::write(
        dir.path().join("lsm.toml"),
        "[agents]\n\nmax_iteration = 4\n",
    )
    .unwrap();
    let out = run(lsm(&sub).args(["tools", "list"]));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("lsm.toml:3") && err.contains("max_iteration"),
        "{err}"
    );
}

#[test]
fn init_writes_a_commented_file_pings_the_model_and_keeps_an_existing_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.jsonl"),
        "{\"text\": \"pong\", \"usage\": {\"input_tokens\": 3, \"output_tokens\": 1}}\n",
    )
    .unwrap();
    let out = run(lsm(dir.path()).args(["init", "--provider", "scripted:s.jsonl"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("pong"));
    let written = std::fs::read_to_string(dir.path().join("lsm.toml")).unwrap();
    assert!(
        written.contains("provider = \"scripted:s.jsonl\""),
        "{written}"
    );
    assert!(written.lines().filter(|l| l.starts_with('#')).count() > 5);
    // It is the project's file now.
    let out = run(lsm(dir.path()).args(["config", "show", "--json"]));
    let provider = setting(&stdout_json(&out), "llm.provider");
    assert!(provider["source"].as_str().unwrap().contains("lsm.toml:"));
    // A second init keeps it.
    let out = run(lsm(dir.path()).args(["init", "--provider", "openai"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    // Without a terminal, flags say everything: the usual model and key variable.
    let out = run(lsm(dir.path()).args(["init", "--provider", "openai", "--force", "--no-ping"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let written = std::fs::read_to_string(dir.path().join("lsm.toml")).unwrap();
    assert!(
        written.contains("model = \"gpt-4o-mini\"")
            && written.contains("api_key_env = \"OPENAI_API_KEY\""),
        "{written}"
    );
    let out = run(lsm(dir.path()).args(["init", "--force"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--provider"));
}
