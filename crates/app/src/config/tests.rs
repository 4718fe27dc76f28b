//! The configuration's tests: the environment's overrides, the `[llm]` tiers, the layers.

use super::*;
use env::settings_env;
use lsm_phase::LlmTier;
use std::time::Duration;

mod env_tests {
    use super::*;

    /// `env` applied to `table`, no tier in any file.
    pub(super) fn env_table(table: &mut toml::Table, env: &[(String, String)]) -> Result<()> {
        apply_env_overrides(table, env, &[], &mut |_, _| {})
    }

    #[test]
    fn llm_tiers_tables_are_another_spelling_of_the_tier_tables() {
        let mut t: toml::Table =
            "[llm.tiers.normal]\nprovider = \"local\"\nmodel_path = \"m.gguf\"\n"
                .parse()
                .unwrap();
        lift_llm_tiers(&mut t).unwrap();
        assert_eq!(t["llm"]["normal"]["provider"].as_str(), Some("local"));
        assert!(t["llm"].get("tiers").is_none());
        let mut both: toml::Table =
            "[llm.normal]\nprovider = \"openai\"\n[llm.tiers.normal]\nprovider = \"local\"\n"
                .parse()
                .unwrap();
        assert!(
            lift_llm_tiers(&mut both)
                .unwrap_err()
                .to_string()
                .contains("given twice")
        );
        let mut bad: toml::Table = "[llm.tiers.huge]\nprovider = \"local\"\n".parse().unwrap();
        assert!(
            lift_llm_tiers(&mut bad)
                .unwrap_err()
                .to_string()
                .contains("not a tier")
        );
    }

    #[test]
    fn a_bad_hook_entry_is_an_error_when_the_file_loads() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("lsm.toml");
        std::fs::write(
            &f,
            "[[hooks.pre_tool]]\ncommand = [\"/bin/true\"]\n[[hooks.pre_tool]]\ncommand = []\n",
        )
        .unwrap();
        let e = load(Some(&f), &[]).unwrap_err().to_string();
        assert!(
            e.contains("lsm.toml") && e.contains("[[hooks.pre_tool]] entry 2"),
            "{e}"
        );
        std::fs::write(
            &f,
            "[[hooks.agent_stop]]\ncommand = [\"x\"]\ntimeout_seconds = 0\n",
        )
        .unwrap();
        let e = load(Some(&f), &[]).unwrap_err().to_string();
        assert!(e.contains("timeout_seconds"), "{e}");
    }

    #[test]
    fn env_overrides_set_typed_values() {
        let mut t = toml::Table::new();
        env_table(
            &mut t,
            &[
                ("LSM_AGENTS_MAX_TOKENS_BUDGET".into(), "5000".into()),
                ("LSM_SANDBOX_ALLOW_URL_ACCESS".into(), "true".into()),
                ("LSM_LLM_PROVIDER".into(), "scripted:x.jsonl".into()),
                ("LSM_AGENTS_MAX_CONCURRENT".into(), "2".into()),
                ("LSM_AGENTS_INTERACTION_TIMEOUT_SECONDS".into(), "60".into()),
                (
                    "LSM_AGENTS_INTERACTION_TIMEOUT_ACTION".into(),
                    "approve".into(),
                ),
            ],
        )
        .unwrap();
        let c: Config = toml::Value::Table(t).try_into().unwrap();
        assert_eq!(c.agents.max_concurrent, 2);
        assert_eq!(c.agents.interaction.timeout_seconds, 60);
        assert_eq!(
            c.agents.interaction.timeout_action,
            lsm_interaction::TimeoutAction::Approve
        );
        assert_eq!(c.agents.max_tokens_budget, 5000);
        assert!(c.sandbox.allow_url_access);
        assert_eq!(c.llm.provider.as_deref(), Some("scripted:x.jsonl"));
    }

    #[test]
    fn context_settings_come_from_their_table_nested_env_names_and_show() {
        let c = llm_tests::load_text(
            "[agents.context]\nproject_instructions = false\nmax_instruction_bytes = 100\n",
            &[
                ("LSM_AGENTS_CONTEXT_ENVIRONMENT", "false"),
                ("LSM_AGENTS_CONTEXT_NESTED_INSTRUCTIONS", "false"),
            ],
        )
        .unwrap();
        let ctx = c.agents.context;
        assert!(!ctx.project_instructions && !ctx.environment && !ctx.nested_instructions);
        assert_eq!(ctx.max_instruction_bytes, 100);
        assert!(
            c.origin("agents.context.max_instruction_bytes")
                .to_string()
                .ends_with("lsm.toml:3"),
            "{}",
            c.origin("agents.context.max_instruction_bytes")
        );
        let rows = show::settings(&c);
        let row = |key: &str| {
            rows.iter()
                .find(|r| r.key == key)
                .unwrap_or_else(|| panic!("{key} is not shown"))
        };
        assert_eq!(
            row("agents.context.environment").source,
            "environment variable LSM_AGENTS_CONTEXT_ENVIRONMENT"
        );
        assert_eq!(
            row("agents.context.max_instruction_bytes").value,
            serde_json::json!(100)
        );
        // The defaults: every provider on, 32 KiB.
        let d = llm_tests::load_text("", &[]).unwrap().agents.context;
        assert!(d.project_instructions && d.environment && d.nested_instructions);
        assert_eq!(d.max_instruction_bytes, 32 * 1024);
        for (text, needle) in [
            (
                "[agents.context]\nmax_instruction_bytes = 0\n",
                "at least 1",
            ),
            ("[agents.context]\nnested = true\n", "nested"),
        ] {
            let e = format!("{:#}", llm_tests::load_text(text, &[]).unwrap_err());
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn memory_settings_come_from_the_nested_table_and_nested_env_names() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("lsm.toml");
        std::fs::write(
            &f,
            "[agents]\nmax_iterations = 7\n[agents.memory]\nlimit = 3\nglobal_db = \"g/global.db\"\n",
        )
        .unwrap();
        let c = load(
            Some(&f),
            &[
                ("LSM_AGENTS_MEMORY_ENABLED".into(), "true".into()),
                ("LSM_AGENTS_MAX_TOKENS_BUDGET".into(), "900".into()),
            ],
        )
        .unwrap();
        assert!(c.memory.enabled);
        assert_eq!(c.memory.limit, 3);
        assert_eq!(c.memory.global_db, Some(dir.path().join("g/global.db")));
        assert_eq!(c.agents.max_iterations, 7);
        assert_eq!(c.agents.max_tokens_budget, 900);
        // Without a file, the environment alone turns memory on.
        let c = load(None, &[("LSM_AGENTS_MEMORY_LIMIT".into(), "2".into())]).unwrap();
        assert_eq!(c.memory.limit, 2);
        assert!(!c.memory.enabled);

        std::fs::write(&f, "[agents.memory]\nenabled = true\nlimt = 3\n").unwrap();
        let e = load(Some(&f), &[]).unwrap_err().to_string();
        assert!(e.contains("limt") && e.contains("lsm.toml"), "{e}");
        let e = load(None, &[("LSM_AGENTS_MEMORY_COLOUR".into(), "red".into())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("colour"), "{e}");
    }

    #[test]
    fn unknown_env_section_is_a_clear_error() {
        let e = env_table(
            &mut toml::Table::new(),
            &[("LSM_FOO_BAR".into(), "1".into())],
        )
        .unwrap_err();
        assert!(e.to_string().contains("LSM_FOO_BAR"));
    }

    #[test]
    fn unknown_key_names_the_key_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("lsm.toml");
        std::fs::write(&f, "[agents]\nmax_token_budget = 3\n").unwrap();
        let e = load(Some(&f), &[]).unwrap_err().to_string();
        assert!(
            e.contains("max_token_budget") && e.contains("lsm.toml"),
            "{e}"
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_config_folder() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("lsm.toml");
        std::fs::write(
            &f,
            "[agents]\nagents_folder = \"out\"\n[sandbox]\nallowed_read_paths = [\"ws\"]\n[llm]\nprovider = \"scripted:s.jsonl\"\n",
        )
        .unwrap();
        let c = load(Some(&f), &[]).unwrap();
        assert_eq!(c.agents.agents_folder, dir.path().join("out"));
        assert_eq!(c.sandbox.allowed_read_paths, [dir.path().join("ws")]);
        assert_eq!(
            c.llm.provider.clone().unwrap(),
            format!("scripted:{}", dir.path().join("s.jsonl").display())
        );
    }
}

mod llm_tests {
    use super::*;

    const FILE: &str = r#"
[llm]
provider = "openai"
model = "gpt-4o-mini"
max_retries = 2

[llm.pricing]
"gpt-4o-mini" = { input = 0.15, output = 0.6, cached_input = 0.075 }
"gpt-4.1" = { input = 2.0, output = 8.0 }

[llm.quick]
model = "gpt-4.1-nano"
pricing = { input = 0.1, output = 0.4 }

[llm.complex]
provider = "anthropic"
model = "claude-sonnet-4-5"
stream = true
read_timeout_seconds = 600
"#;

    pub(super) fn load_text(text: &str, env: &[(&str, &str)]) -> Result<Config> {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("lsm.toml");
        std::fs::write(&f, text).unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        load(Some(&f), &env)
    }

    #[test]
    fn tiers_override_the_llm_defaults() {
        let c = load_text(FILE, &[]).unwrap();
        let normal = c.llm.resolve(LlmTier::Normal).unwrap();
        assert_eq!(normal.section, "[llm]");
        assert_eq!(normal.provider.as_deref(), Some("openai"));
        assert_eq!(normal.model.as_deref(), Some("gpt-4o-mini"));
        assert_eq!(normal.http.max_retries, 2);
        assert!(!normal.stream && normal.function_calling);
        assert_eq!(normal.pricing_for("gpt-4o-mini").unwrap().input, 0.15);

        let quick = c.llm.resolve(LlmTier::Quick).unwrap();
        assert_eq!(quick.provider.as_deref(), Some("openai"));
        assert_eq!(quick.model.as_deref(), Some("gpt-4.1-nano"));
        assert_eq!(quick.pricing_for("gpt-4.1-nano").unwrap().input, 0.1);
        assert_eq!(
            quick.pricing_for("gpt-4.1").unwrap().input,
            2.0,
            "another model's price comes from the table"
        );

        let complex = c.llm.resolve(LlmTier::Complex).unwrap();
        assert_eq!(complex.section, "[llm.complex]");
        assert_eq!(complex.provider.as_deref(), Some("anthropic"));
        assert!(complex.stream);
        assert_eq!(complex.http.read_timeout, Duration::from_secs(600));
        assert_eq!(complex.pricing_for("claude-sonnet-4-5"), None);
    }

    #[test]
    fn direct_http_is_on_by_default_and_a_tier_or_the_environment_turns_it_off() {
        let c = load_text(FILE, &[]).unwrap();
        for tier in [LlmTier::Quick, LlmTier::Normal, LlmTier::Complex] {
            assert!(c.llm.resolve(tier).unwrap().http.direct, "{tier:?}");
        }
        let text = format!("{FILE}\n[llm.normal]\ndirect_http = false\n");
        let c = load_text(&text, &[]).unwrap();
        assert!(!c.llm.resolve(LlmTier::Normal).unwrap().http.direct);
        assert!(c.llm.resolve(LlmTier::Quick).unwrap().http.direct);
        let c = load_text(FILE, &[("LSM_LLM_DIRECT_HTTP", "false")]).unwrap();
        assert!(!c.llm.resolve(LlmTier::Quick).unwrap().http.direct);
        let e = load_text("[llm]\ndirect_http = \"no\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("direct_http"), "{e}");
    }

    #[test]
    fn env_overrides_beat_the_tiers() {
        let c = load_text(
            FILE,
            &[
                ("LSM_LLM_MODEL", "gpt-5"),
                ("LSM_LLM_BASE_URL", "http://127.0.0.1:9/v1"),
                ("LSM_LLM_QUICK_STREAM", "true"),
            ],
        )
        .unwrap();
        for tier in [LlmTier::Quick, LlmTier::Normal, LlmTier::Complex] {
            let r = c.llm.resolve(tier).unwrap();
            assert_eq!(r.model.as_deref(), Some("gpt-5"), "{tier:?}");
            assert_eq!(r.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        }
        assert!(c.llm.resolve(LlmTier::Quick).unwrap().stream);
        let c = load_text(FILE, &[("LSM_LLM_PROVIDER", "compatible")]).unwrap();
        assert_eq!(
            c.llm.resolve(LlmTier::Complex).unwrap().provider.as_deref(),
            Some("compatible")
        );
    }

    #[test]
    fn every_example_in_config_md_loads() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/CONFIG.md"),
        )
        .unwrap();
        let blocks: Vec<&str> = doc
            .split("```toml\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap())
            .collect();
        assert!(blocks.len() >= 4, "{}", blocks.len());
        let mut providers = Vec::new();
        for block in blocks {
            let c = load_text(block, &[]).unwrap_or_else(|e| panic!("{e}\n{block}"));
            for tier in [LlmTier::Quick, LlmTier::Normal, LlmTier::Complex] {
                let r = c.llm.resolve(tier).unwrap();
                if let Some(p) = r.provider.clone() {
                    providers.push(p.clone());
                    if p == "local" {
                        assert!(
                            r.model_path.is_some(),
                            "a local example names its model file"
                        );
                    } else if !p.starts_with("scripted:") {
                        let model = r.model.clone().unwrap();
                        assert!(lsm_providers::ProviderKind::parse(&p).is_some(), "{p}");
                        if p != "compatible" {
                            assert!(r.pricing_for(&model).is_some(), "{p} {model}: no price");
                        }
                    }
                }
            }
        }
        for p in ["openai", "anthropic", "compatible", "local"] {
            assert!(providers.iter().any(|x| x == p), "no example for {p}");
        }
    }

    #[test]
    fn local_settings_resolve_per_tier_and_model_paths_against_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("lsm.toml");
        std::fs::write(
            &f,
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\n[llm.quick]\nprovider = \"local\"\nmodel_path = \"models/small.gguf\"\ncontext_size = 2048\n",
        )
        .unwrap();
        let c = load(Some(&f), &[]).unwrap();
        let quick = c.llm.resolve(LlmTier::Quick).unwrap();
        assert_eq!(quick.provider.as_deref(), Some("local"));
        assert_eq!(quick.model_path, Some(dir.path().join("models/small.gguf")));
        assert_eq!(quick.context_size, Some(2048));
        let normal = c.llm.resolve(LlmTier::Normal).unwrap();
        assert_eq!(normal.provider.as_deref(), Some("openai"));
        assert_eq!(normal.model_path, None);
        // LSM_LLM_MODEL_PATH sets [llm] and every tier in the file.
        let c = load(
            Some(&f),
            &[("LSM_LLM_MODEL_PATH".into(), "/m/other.gguf".into())],
        )
        .unwrap();
        for tier in [LlmTier::Quick, LlmTier::Normal] {
            assert_eq!(
                c.llm.resolve(tier).unwrap().model_path,
                Some(PathBuf::from("/m/other.gguf"))
            );
        }
    }

    #[test]
    fn the_model_cache_and_log_variables_are_not_settings() {
        let env = settings_env(
            [
                ("LSM_MODEL_CACHE".to_string(), "/tmp/models".to_string()),
                ("LSM_LOG".to_string(), "lsm_harness=debug".to_string()),
                ("LSM_LLM_PROVIDER".to_string(), "local".to_string()),
                ("HOME".to_string(), "/root".to_string()),
            ]
            .into_iter(),
        );
        assert_eq!(env, [("LSM_LLM_PROVIDER".to_string(), "local".to_string())]);
        let mut t = toml::Table::new();
        super::env_tests::env_table(&mut t, &env).unwrap();
        let c: Config = toml::Value::Table(t).try_into().unwrap();
        assert_eq!(c.llm.provider.as_deref(), Some("local"));
    }

    #[test]
    fn llm_config_errors_name_the_key_and_the_file() {
        let e = load_text("[llm.normal]\nmodle = \"x\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("modle") && e.contains("lsm.toml"), "{e}");
        let e = load_text(
            "[llm.pricing]\nm = { input = 1, output = 2, cached = 3 }\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cached") && e.contains("lsm.toml"), "{e}");
        let e = load_text("[llm]\nread_timeout_seconds = -1\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("lsm.toml:2") && e.contains("llm.read_timeout_seconds"),
            "{e}"
        );
        let e = load_text("", &[("LSM_LLM_QUICK_CONNECT_TIMEOUT_SECONDS", "0")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("environment variable LSM_LLM_QUICK_CONNECT_TIMEOUT_SECONDS"),
            "{e}"
        );
    }

    #[test]
    fn runs_protect_the_config_file_and_agents_folder_which_configuration_cannot_lift() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("custom.toml");
        std::fs::write(&f, "[agents]\nagents_folder = \"out\"\n").unwrap();
        let c = load(Some(&f), &[]).unwrap();
        let sandbox = c.run_sandbox();
        assert!(sandbox.protected_paths.contains(&f), "{sandbox:?}");
        assert!(
            sandbox.protected_paths.contains(&dir.path().join("out")),
            "{sandbox:?}"
        );
        let cwd = std::env::current_dir().unwrap();
        assert!(sandbox.protected_paths.contains(&cwd.join("lsm.toml")));
        // The agent definitions the next run loads are lsm's own files too.
        assert!(sandbox.protected_paths.contains(&cwd.join("lsm-agents")));
        // Neither the file nor the environment can set the list.
        std::fs::write(&f, "[sandbox]\nprotected_paths = []\n").unwrap();
        let e = load(Some(&f), &[]).unwrap_err().to_string();
        assert!(e.contains("protected_paths"), "{e}");
        std::fs::write(&f, "").unwrap();
        let env = [("LSM_SANDBOX_PROTECTED_PATHS".to_string(), "[]".to_string())];
        assert!(load(Some(&f), &env).is_err());
    }
}

mod layer_tests {
    use super::*;
    use std::path::Path;

    /// A user file, a project file two folders above the working directory, an explicit
    /// file, and the working directory itself.
    struct Setup {
        _dir: tempfile::TempDir,
        user: PathBuf,
        project: PathBuf,
        explicit: PathBuf,
        cwd: PathBuf,
    }

    fn setup() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proj");
        let cwd = root.join("src/deep");
        std::fs::create_dir_all(&cwd).unwrap();
        let user = dir.path().join("xdg/lsm/config.toml");
        std::fs::create_dir_all(user.parent().unwrap()).unwrap();
        Setup {
            user,
            project: root.join("lsm.toml"),
            explicit: dir.path().join("explicit.toml"),
            cwd,
            _dir: dir,
        }
    }

    fn write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    fn inputs(s: &Setup, explicit: bool, env: &[(&str, &str)], flags: &[&str]) -> Inputs {
        Inputs {
            cwd: s.cwd.clone(),
            user_file: Some(s.user.clone()),
            explicit: explicit.then(|| s.explicit.clone()),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            overrides: flags.iter().map(|f| f.to_string()).collect(),
        }
    }

    /// Each row: which layers set `agents.max_tokens_budget` (user, project, explicit, env,
    /// flag), the value that wins and the source it is blamed on.
    #[test]
    fn precedence_is_user_then_project_then_config_then_env_then_flags() {
        let rows: &[(&[&str], u64, &str)] = &[
            (&[], 200_000, "default"),
            (&["user"], 1, "config.toml:2"),
            (&["user", "project"], 2, "proj/lsm.toml:2"),
            (&["project"], 2, "proj/lsm.toml:2"),
            (&["user", "project", "explicit"], 3, "explicit.toml:2"),
            (&["user", "explicit"], 3, "explicit.toml:2"),
            (
                &["user", "project", "explicit", "env"],
                4,
                "environment variable LSM_AGENTS_MAX_TOKENS_BUDGET",
            ),
            (
                &["project", "env"],
                4,
                "environment variable LSM_AGENTS_MAX_TOKENS_BUDGET",
            ),
            (
                &["user", "project", "explicit", "env", "flag"],
                5,
                "flag -c agents.max_tokens_budget=5",
            ),
            (&["user", "flag"], 5, "flag -c agents.max_tokens_budget=5"),
        ];
        for (layers, want, source) in rows {
            let s = setup();
            let has = |l: &str| layers.contains(&l);
            // Every file sets another key too, so a file that does not set the budget is
            // still read.
            let file = |budget: Option<u64>| match budget {
                Some(b) => format!("[agents]\nmax_tokens_budget = {b}\nmax_iterations = 9\n"),
                None => "[agents]\nmax_iterations = 9\n".to_string(),
            };
            write(&s.user, &file(has("user").then_some(1)));
            write(&s.project, &file(has("project").then_some(2)));
            write(&s.explicit, &file(has("explicit").then_some(3)));
            let env: &[(&str, &str)] = if has("env") {
                &[("LSM_AGENTS_MAX_TOKENS_BUDGET", "4")]
            } else {
                &[]
            };
            let flags: &[&str] = if has("flag") {
                &["agents.max_tokens_budget=5"]
            } else {
                &[]
            };
            let c = layers::load(&inputs(&s, has("explicit"), env, flags)).unwrap();
            assert_eq!(c.agents.max_tokens_budget, *want, "{layers:?}");
            let got = c.origin("agents.max_tokens_budget").to_string();
            assert!(got.ends_with(source), "{layers:?}: {got} (want …{source})");
            assert_eq!(c.agents.max_iterations, 9, "{layers:?}");
        }
    }

    #[test]
    fn the_project_file_is_found_upward_and_its_paths_and_defaults_resolve_against_its_folder() {
        let s = setup();
        write(
            &s.project,
            "[sandbox]\nallowed_read_paths = [\"docs\"]\n[llm]\nprovider = \"scripted:s.jsonl\"\n",
        );
        write(&s.user, "[kb]\nindex_dir = \"kb-index\"\n");
        let c = layers::load(&inputs(
            &s,
            false,
            &[("LSM_SANDBOX_WORKING_DIR", "here")],
            &[],
        ))
        .unwrap();
        let root = s.project.parent().unwrap();
        assert_eq!(c.root, root);
        assert_eq!(c.source.as_deref(), Some(s.project.as_path()));
        assert_eq!(c.files, [s.user.clone(), s.project.clone()]);
        assert_eq!(c.sandbox.allowed_read_paths, [root.join("docs")]);
        assert_eq!(
            c.llm.provider.as_deref(),
            Some(format!("scripted:{}", root.join("s.jsonl").display()).as_str())
        );
        // The user file's paths are its own folder's; the environment's, the working
        // directory's.
        assert_eq!(c.kb.index_dir, s.user.parent().unwrap().join("kb-index"));
        assert_eq!(c.sandbox.working_dir, Some(s.cwd.join("here")));
        // Records go under the project's .lsm/, not the working directory.
        assert_eq!(c.agents.agents_folder, root.join(".lsm/agents"));
        assert!(!c.protected_paths().is_empty());
        assert!(c.protected_paths().contains(&s.project));
        assert!(c.protected_paths().contains(&s.user));
    }

    #[test]
    fn an_existing_agents_folder_keeps_being_used_and_says_why() {
        let s = setup();
        write(&s.project, "");
        let root = s.project.parent().unwrap();
        std::fs::create_dir_all(root.join("Agents/general/logs")).unwrap();
        let c = layers::load(&inputs(&s, false, &[], &[])).unwrap();
        assert_eq!(c.agents.agents_folder, root.join("Agents"));
        let origin = c.origin("agents.agents_folder").to_string();
        assert!(origin.contains("old default"), "{origin}");
        // Once .lsm/agents exists, it wins.
        std::fs::create_dir_all(root.join(".lsm/agents")).unwrap();
        let c = layers::load(&inputs(&s, false, &[], &[])).unwrap();
        assert_eq!(c.agents.agents_folder, root.join(".lsm/agents"));
        assert_eq!(c.origin("agents.agents_folder"), Source::DEFAULT);
    }

    #[test]
    fn every_error_names_its_file_and_line_its_variable_or_its_flag() {
        let s = setup();
        write(
            &s.user,
            "[agents]\nmax_iterations = 3\n\n[agents.memory]\nlimt = 3\n",
        );
        let e = layers::load(&inputs(&s, false, &[], &[])).unwrap_err();
        assert!(crate::error::is_usage(&e));
        let e = e.to_string();
        assert!(e.contains("config.toml:5") && e.contains("limt"), "{e}");

        write(&s.user, "");
        write(&s.project, "[sandbox]\nallow_url_access = \"yes\"\n");
        let e = layers::load(&inputs(&s, false, &[], &[]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("proj/lsm.toml:2") && e.contains("allow_url_access"),
            "{e}"
        );

        write(&s.project, "[agents\nmax_iterations = 3\n");
        let e = layers::load(&inputs(&s, false, &[], &[]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("lsm.toml:1") && e.contains("not valid TOML"),
            "{e}"
        );

        write(&s.project, "");
        let e = layers::load(&inputs(
            &s,
            false,
            &[("LSM_AGENTS_MAX_TOKEN_BUDGET", "5")],
            &[],
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("environment variable LSM_AGENTS_MAX_TOKEN_BUDGET")
                && !e.contains("built-in defaults"),
            "{e}"
        );
        let e = layers::load(&inputs(&s, false, &[], &["agents.max_iterations=lots"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("flag -c agents.max_iterations=lots"), "{e}");
        let e = layers::load(&inputs(&s, false, &[], &["nokey"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("-c nokey") && e.contains("KEY=VALUE"), "{e}");
        let e = layers::load(&inputs(&s, false, &[], &["toplevel=1"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("SECTION.KEY"), "{e}");
    }

    #[test]
    fn a_sandbox_setting_the_sandbox_refuses_is_blamed_on_its_line() {
        let s = setup();
        write(&s.project, "[sandbox]\n\ntimeout_seconds = 0\n");
        let c = layers::load(&inputs(&s, false, &[], &[])).unwrap();
        let e =
            lsm_sandbox::Sandbox::new(c.sandbox.clone(), lsm_sandbox::ToolRegistry::new(), None)
                .unwrap_err();
        let shown = c.sandbox_error(&e);
        assert!(
            shown.contains("proj/lsm.toml:3") && shown.contains("timeout_seconds"),
            "{shown}"
        );
    }

    #[test]
    fn config_show_lists_every_setting_with_its_source() {
        let s = setup();
        write(&s.project, "# budget\n[agents]\nmax_tokens_budget = 7\n");
        let c = layers::load(&inputs(
            &s,
            false,
            &[("LSM_LLM_MODEL", "gpt-test")],
            &["stall.threshold=4"],
        ))
        .unwrap();
        let rows = show::settings(&c);
        let row = |key: &str| {
            rows.iter()
                .find(|r| r.key == key)
                .unwrap_or_else(|| panic!("{key} missing"))
                .clone()
        };
        assert!(
            row("agents.max_tokens_budget")
                .source
                .ends_with("proj/lsm.toml:3")
        );
        assert_eq!(row("agents.max_tokens_budget").value, serde_json::json!(7));
        assert_eq!(
            row("llm.model").source,
            "environment variable LSM_LLM_MODEL"
        );
        assert_eq!(row("stall.threshold").source, "flag -c stall.threshold=4");
        assert_eq!(row("stall.threshold").value, serde_json::json!(4));
        assert_eq!(row("agents.max_iterations").source, "default");
        assert_eq!(row("llm.provider").value, serde_json::Value::Null);
        // Every section is there, down to nested tables.
        for key in [
            "agents.memory.enabled",
            "agents.interaction.timeout_seconds",
            "sandbox.timeout_seconds",
            "kb.index_dir",
            "kb.embedder.kind",
            "hooks.agent_stop_max_blocks",
        ] {
            row(key);
        }
        let text = show::text(&c);
        assert!(text.contains("agents.max_tokens_budget = 7"), "{text}");
        assert!(
            text.contains("# environment variable LSM_LLM_MODEL"),
            "{text}"
        );
        let json = show::json(&c);
        assert_eq!(json["files"][0], s.project.display().to_string());
        assert!(
            json["settings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["origin"]["kind"] == "file" && r["origin"]["line"] == 3)
        );
    }
}
