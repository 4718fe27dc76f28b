//! [`RunRequest`]: what starting one agent run asks for, in one type — the options of
//! `lsm agent run` and `run-many` (a clap argument group), a queued run's row and what the
//! TUI starts (serde) — and its [`RunSettings`], the configuration's top layer.

use std::path::{Path, PathBuf};

use lsm_harness::RunLaunch;
use serde::{Deserialize, Serialize};

use crate::config::{Options, Setting};
use crate::wiring::ProviderFlags;

/// One run to start. How it is shown (`--json`, `--output-format`) is the front end's, not
/// the run's.
#[derive(Debug, Clone, Default, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(default)]
pub struct RunRequest {
    /// The agent to run (see `lsm agent list`).
    #[serde(rename = "agent")]
    pub name: String,

    /// What the agent should do (agents that take a task).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,

    /// What the agent should work on (agents that take a topic: research, synthesis, writing).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,

    /// Refinement rounds of the research agent (default 2).
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,

    /// `--provider`, `--model`, `--base-url`.
    #[command(flatten)]
    #[serde(flatten)]
    pub llm: ProviderFlags,

    /// The options that are settings (the configuration's top layer).
    #[command(flatten)]
    #[serde(flatten)]
    pub settings: RunSettings,

    /// Continue the interrupted run RUN_ID instead of starting one (see `lsm runs list`);
    /// the task, provider and limits come from the run's records.
    #[arg(long, value_name = "RUN_ID")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,

    /// Start a new turn on the finished run RUN_ID's conversation: the same contexts (the
    /// model sees the earlier turns), its budget's ledger going on from what they spent.
    #[arg(long = "continue", value_name = "RUN_ID", conflicts_with = "resume")]
    #[serde(default, rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_run: Option<String>,

    /// With `resume`: results of deferred calls, `(call id, file)` (`lsm runs resume
    /// --tool-result ID=FILE`); the file's text is the call's result.
    #[arg(skip)]
    #[serde(skip)]
    pub tool_results: Vec<(String, PathBuf)>,

    /// Approve every permission request automatically (recorded as such in the transcript
    /// and the summary). Without it, a request is asked on the terminal, or denied at once
    /// when nobody can answer (stdin is not a terminal, `run-many`, a worker).
    #[arg(long)]
    pub yes: bool,

    /// Offer the agent this tool too, beyond its allowlist (repeatable; e.g. `bash`). Same as
    /// `[agents.extra_tools] <agent> = [...]`; the tool must exist (`lsm tools list`).
    #[arg(long = "allow-tool", value_name = "TOOL")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow_tools: Vec<String>,

    /// The task contract the run is held to: a TOML file of `[[require]]` predicates and
    /// `required_outputs` (see docs/CONFIG.md). Replaces [agents.contracts.<agent>].
    #[arg(long, value_name = "FILE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contract: Option<PathBuf>,

    /// The folder relative paths are resolved against (set by [`RunRequest::anchored`]: a
    /// queued run's worker works there when its machine has it).
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<PathBuf>,
}

/// The options of a run that are settings: the configuration's top layer
/// ([`RunSettings::options`]), each named by its option as the setting's source. `lsm config
/// show` takes them too, to show the configuration a run with them gets.
#[derive(Debug, Clone, Default, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(default)]
pub struct RunSettings {
    /// Root of the agents' workspaces and run records (default: [agents] agents_folder).
    // Not stored with a queued run: its worker keeps the runs in its own folder.
    #[arg(long, value_name = "DIR")]
    #[serde(skip)]
    pub agents_folder: Option<PathBuf>,

    /// Iteration limit of the run (default: [agents] max_iterations).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,

    /// Token ceiling of the run (default: [agents] max_tokens_budget).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens_budget: Option<u64>,

    /// Cost ceiling of the run in US dollars (default: [agents] max_cost_usd); needs the
    /// model's prices in [llm] pricing.
    #[arg(long, value_name = "USD")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<f64>,

    /// Wall-clock limit of the run in seconds (default: [agents] max_wall_seconds, none).
    /// Reached, the run pauses (exit code 9); `lsm runs resume` with a higher limit goes on,
    /// counting the time already spent.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wall_seconds: Option<u64>,

    /// How strictly the run must prove its task complete before it stops:
    /// `interactive` (after the retries a stop is accepted, the summary lists what was unmet)
    /// or `strict_automation` (`done` only with `work_complete` called and the contract and
    /// work items satisfied; otherwise exit code 8). Default: [agents] stop_mode.
    #[arg(long, value_name = "MODE", value_enum)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_mode: Option<StopModeArg>,

    /// Worker runs the conductor runs at once (default: [conductor] max_workers, 3).
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_workers: Option<usize>,
}

/// `--stop-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[value(rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum StopModeArg {
    /// Liveness first (the default).
    Interactive,
    /// For automation: done only when every completion check is met.
    #[value(alias = "strict-automation")]
    StrictAutomation,
}

impl From<StopModeArg> for lsm_harness::StopMode {
    fn from(m: StopModeArg) -> Self {
        match m {
            StopModeArg::Interactive => lsm_harness::StopMode::Interactive,
            StopModeArg::StrictAutomation => lsm_harness::StopMode::StrictAutomation,
        }
    }
}

impl RunSettings {
    /// The configuration's top layer they make (each named by its option in `lsm config
    /// show` and in errors).
    pub fn options(&self) -> Options {
        let mut options = Options::new();
        if let Some(dir) = &self.agents_folder {
            options.set(Setting::AgentsFolder(dir.clone()), "--agents-folder");
        }
        if let Some(n) = self.max_iterations {
            options.set(Setting::MaxIterations(n), "--max-iterations");
        }
        if let Some(n) = self.max_tokens_budget {
            options.set(Setting::MaxTokensBudget(n), "--max-tokens-budget");
        }
        if let Some(usd) = self.max_cost_usd {
            options.set(Setting::MaxCostUsd(usd), "--max-cost-usd");
        }
        if let Some(n) = self.max_wall_seconds {
            options.set(Setting::MaxWallSeconds(n), "--max-wall-seconds");
        }
        if let Some(mode) = self.stop_mode {
            options.set(Setting::StopMode(mode.into()), "--stop-mode");
        }
        if let Some(n) = self.max_workers {
            options.set(Setting::MaxWorkers(n), "--max-workers");
        }
        options
    }
}

/// `path` against `cwd`.
fn absolute(cwd: &Path, path: &Path) -> PathBuf {
    cwd.join(path)
}

impl RunRequest {
    /// A run of `agent` on `objective`, as its `task` or its `topic` (`input`, as
    /// `lsm_agents::TaskInput::as_str` says), with the rest of `self`.
    #[must_use]
    pub fn of_agent(mut self, agent: &str, input: &str, objective: &str) -> RunRequest {
        self.name = agent.to_string();
        let text = Some(objective.to_string());
        (self.task, self.topic) = if input == "topic" {
            (None, text)
        } else {
            (text, None)
        };
        self
    }

    /// Its task or topic, whichever it has.
    pub fn objective(&self) -> &str {
        self.task
            .as_deref()
            .or(self.topic.as_deref())
            .unwrap_or_default()
    }

    /// The request with what names a file made absolute against `cwd` (a `scripted:`
    /// provider, the contract) and `cwd` recorded as its working directory: how it is
    /// stored for a worker on another machine, or another process.
    #[must_use]
    pub fn anchored(mut self, cwd: &Path) -> RunRequest {
        self.llm.provider = self.scripted_against(cwd);
        self.contract = self.contract.map(|c| absolute(cwd, &c));
        self.working_dir = Some(cwd.to_path_buf());
        self
    }

    /// `--provider` with a `scripted:` file made absolute against `cwd`.
    fn scripted_against(&self, cwd: &Path) -> Option<String> {
        self.llm
            .provider
            .as_ref()
            .map(|spec| match spec.strip_prefix("scripted:") {
                Some(file) => format!("scripted:{}", absolute(cwd, Path::new(file)).display()),
                None => spec.clone(),
            })
    }

    /// Its options that are settings, as the configuration's top layer.
    pub fn options(&self) -> Options {
        self.settings.options()
    }

    /// What the run's records keep to start it again (`lsm runs resume`), in `cwd`.
    pub(super) fn launch(&self, cwd: &Path) -> RunLaunch {
        RunLaunch {
            provider_spec: self.scripted_against(cwd),
            model: self.llm.model.clone(),
            base_url: self.llm.base_url.clone(),
            working_dir: Some(cwd.display().to_string()),
            max_iterations: self.settings.max_iterations,
            max_rounds: self.max_rounds,
            extra_tools: self.allow_tools.clone(),
            max_wall_seconds: self.settings.max_wall_seconds,
            continues: self.continue_run.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_and_reads_a_queued_row_of_before() {
        let request = RunRequest {
            name: "general".into(),
            task: Some("t".into()),
            llm: ProviderFlags {
                provider: Some("scripted:run.jsonl".into()),
                ..ProviderFlags::default()
            },
            settings: RunSettings {
                max_tokens_budget: Some(500),
                stop_mode: Some(StopModeArg::StrictAutomation),
                ..RunSettings::default()
            },
            allow_tools: vec!["bash".into()],
            yes: true,
            ..RunRequest::default()
        }
        .anchored(Path::new("/w"));
        let value = serde_json::to_value(&request).unwrap();
        assert_eq!(value["agent"], "general");
        assert_eq!(value["provider"], "scripted:/w/run.jsonl");
        assert_eq!(value["stop_mode"], "strict_automation");
        assert_eq!(value["working_dir"], "/w");
        assert_eq!(
            serde_json::from_value::<RunRequest>(value).unwrap(),
            request
        );
        // A row a worker of the previous version stored (`QueuedRequest`).
        let row = serde_json::json!({
            "agent": "research", "topic": "soil", "max_rounds": 1, "provider": "openai",
            "model": "m", "max_iterations": 3, "allow_tools": ["bash"],
            "stop_mode": "interactive", "yes": false, "working_dir": "/w"
        });
        let read: RunRequest = serde_json::from_value(row).unwrap();
        assert_eq!(read.name, "research");
        assert_eq!(read.topic.as_deref(), Some("soil"));
        assert_eq!(read.llm.model.as_deref(), Some("m"));
        assert_eq!(read.settings.stop_mode, Some(StopModeArg::Interactive));
        assert_eq!(read.working_dir, Some(PathBuf::from("/w")));
    }

    #[test]
    fn the_options_that_are_settings_make_the_top_layer_with_their_names() {
        let request = RunRequest {
            settings: RunSettings {
                max_tokens_budget: Some(5000),
                max_cost_usd: Some(0.5),
                stop_mode: Some(StopModeArg::StrictAutomation),
                max_workers: Some(2),
                ..RunSettings::default()
            },
            ..RunRequest::default()
        };
        let config = crate::config::load(None, &[])
            .unwrap()
            .with_options(&request.options(), Path::new("/w"))
            .unwrap();
        assert_eq!(config.agents.max_tokens_budget, 5000);
        assert_eq!(config.agents.max_cost_usd, Some(0.5));
        assert_eq!(
            config.agents.stop_mode,
            lsm_harness::StopMode::StrictAutomation
        );
        assert_eq!(config.conductor.max_workers, 2);
        let shown = crate::config::show::settings(&config);
        let source = |key: &str| {
            shown
                .iter()
                .find(|s| s.key == key)
                .map(|s| s.source.clone())
                .unwrap_or_default()
        };
        assert_eq!(source("agents.max_tokens_budget"), "--max-tokens-budget");
        assert_eq!(source("agents.stop_mode"), "--stop-mode");
        assert_eq!(source("agents.max_iterations"), "default");
        let json = crate::config::show::json(&config);
        let row = json["settings"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["key"] == "agents.max_cost_usd"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            row["origin"],
            serde_json::json!({"kind": "option", "flag": "--max-cost-usd"})
        );
    }
}
