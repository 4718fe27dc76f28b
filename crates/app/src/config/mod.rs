//! The configuration: its types, and loading it from its layers ([`layers`]: defaults, the
//! user file, the project's `lsm.toml`, `--config`, `LSM_*` variables, `-c key=value`).

use std::path::PathBuf;

use crate::error::{Context, Result};
use lsm_memory::MemoryConfig;
use lsm_sandbox::SandboxConfig;
use lsm_tools_kb::KbConfig;
use serde::Deserialize;

mod agents;
mod capability;
mod env;
pub mod layers;
mod llm;
mod options;
mod origins;
mod paths;
mod sections;
pub mod show;

pub use agents::{AgentsConfig, read_contract};
pub use capability::Capability;
pub use env::{LOG_ENV, lsm_env};
use env::{TIERS, apply_env_overrides, lift_llm_tiers, parse_value};
pub use layers::Inputs;
pub use llm::{LlmConfig, ResolvedLlm, tier_name};
#[cfg(test)]
pub use llm::{LlmSettings, TierConfig};
pub use options::{Options, Setting};
pub use origins::{Origins, Source};
pub use sections::{ConductorConfig, StoreConfig};

/// The name looked for in the working directory when `--config` is not given.
pub const DEFAULT_CONFIG_FILE: &str = "lsm.toml";

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[agents]`: harness, runtime and interaction settings.
    pub agents: AgentsConfig,
    /// `[sandbox]`: tool policy.
    pub sandbox: SandboxConfig,
    /// `[llm]`: the provider.
    pub llm: LlmConfig,
    /// `[kb]`: the knowledge base.
    pub kb: KbConfig,
    /// `[mcp]`: MCP servers whose tools runs may use.
    pub mcp: lsm_mcp::McpConfig,
    /// `[stall]`: stall detection (a phase repeating the same iteration).
    pub stall: lsm_harness::StallConfig,
    /// `[hooks]`: external commands told of a run's moments.
    pub hooks: lsm_harness::HooksConfig,
    /// `[conductor]`: how the conductor delegates to workers.
    pub conductor: ConductorConfig,
    /// `[store]`: where run journals and memory live (files unless a PostgreSQL URL is set).
    pub store: StoreConfig,
    /// `[agents.memory]`: persistent memory. Split off the `[agents]` table by [`load`]
    /// (the harness's settings refuse keys they do not know).
    #[serde(skip)]
    pub memory: MemoryConfig,
    /// The most specific file read: `--config`, else the project's `lsm.toml` (`None`: only
    /// the user file, or none).
    #[serde(skip)]
    pub source: Option<PathBuf>,
    /// Every file read, lowest precedence first.
    #[serde(skip)]
    pub files: Vec<PathBuf>,
    /// The project's root: the folder of `--config`'s file or of the project's `lsm.toml`,
    /// else the working directory. Default paths (`.lsm/…`) are under it.
    #[serde(skip)]
    pub root: PathBuf,
    /// Where each setting came from.
    #[serde(skip)]
    pub origins: Origins,
}

impl Config {
    /// With no sandbox policy configured, confine tools to `cwd` (read and write): what every
    /// command that runs an agent does (`lsm agent run`, `run-many`, the TUI).
    pub fn confine_to_working_dir_by_default(&mut self, cwd: &std::path::Path) {
        if self.sandbox.allowed_read_paths.is_empty() && self.sandbox.allowed_write_paths.is_empty()
        {
            self.sandbox.allowed_read_paths = vec![cwd.to_path_buf()];
            self.sandbox.allowed_write_paths = vec![cwd.to_path_buf()];
        }
    }

    /// The file a setting should be written to, for messages: the project's `lsm.toml`, or
    /// where one would be (`lsm init` writes it).
    pub fn source_name(&self) -> String {
        match &self.source {
            Some(p) => p.display().to_string(),
            None => format!(
                "{} (there is none yet: `lsm init` writes one)",
                self.root.join(DEFAULT_CONFIG_FILE).display()
            ),
        }
    }

    /// Where the setting named `dotted` (`agents.max_tokens_budget`) came from.
    pub fn origin(&self, dotted: &str) -> Source {
        self.origins.of_key(dotted)
    }

    /// A `[sandbox]` setting the sandbox refused, with the setting's source (file and line,
    /// variable, flag) when it can tell which setting it was.
    pub fn sandbox_error(&self, e: &lsm_sandbox::SandboxConfigError) -> String {
        let key = match e {
            lsm_sandbox::SandboxConfigError::BadLimit { key, .. } => Some((*key).to_string()),
            lsm_sandbox::SandboxConfigError::BadAllowlistPath { path, .. } => {
                if self.sandbox.allowed_write_paths.contains(path) {
                    Some("allowed_write_paths".to_string())
                } else if self.sandbox.allowed_read_paths.contains(path) {
                    Some("allowed_read_paths".to_string())
                } else {
                    None
                }
            }
            _ => None,
        };
        match key.map(|k| self.origin(&format!("sandbox.{k}"))) {
            Some(
                source @ (Source::File { .. }
                | Source::Env { .. }
                | Source::Flag { .. }
                | Source::Option { .. }),
            ) => {
                format!("{source}: invalid [sandbox] configuration: {e}")
            }
            _ => format!("invalid [sandbox] configuration: {e}"),
        }
    }

    /// lsm's own files, which no tool may change whatever the sandbox's allowlists say: every
    /// configuration file read, `./lsm.toml` and the project's `lsm.toml`, the project's agent
    /// definitions (`lsm-agents/`: the files the next run would load, which a command could
    /// otherwise rewrite to change what later runs do), and the agents folder (transcripts,
    /// run summaries, memory databases, logs). Absolute, so they do not depend on the
    /// sandbox's working directory.
    pub fn protected_paths(&self) -> Vec<PathBuf> {
        let cwd = std::env::current_dir().unwrap_or_default();
        let mut paths = vec![cwd.join(DEFAULT_CONFIG_FILE)];
        paths.push(cwd.join(&self.root).join(DEFAULT_CONFIG_FILE));
        paths.push(cwd.join(crate::agent_files::PROJECT_FOLDER));
        paths.push(
            cwd.join(&self.root)
                .join(crate::agent_files::PROJECT_FOLDER),
        );
        paths.extend(self.files.iter().map(|f| cwd.join(f)));
        if let Some(source) = &self.source {
            paths.push(cwd.join(source));
        }
        paths.push(cwd.join(&self.agents.agents_folder));
        let mut unique = Vec::new();
        for p in paths {
            if !unique.contains(&p) {
                unique.push(p);
            }
        }
        unique
    }

    /// The key variables this configuration names: `[llm] api_key_env`, each tier's, the
    /// embedder's.
    pub fn key_vars(&self) -> Vec<&str> {
        let llm = &self.llm;
        [
            llm.quick.as_ref(),
            llm.normal.as_ref(),
            llm.complex.as_ref(),
        ]
        .into_iter()
        .flatten()
        .filter_map(|t| t.api_key_env.as_deref())
        .chain(llm.api_key_env.as_deref())
        .chain(self.kb.embedder.api_key_env.as_deref())
        .collect()
    }

    /// The sandbox policy of an agent run: `[sandbox]` plus [`Config::protected_paths`],
    /// which only this code sets (configuration cannot lift it).
    pub fn run_sandbox(&self) -> SandboxConfig {
        let mut sandbox = self.sandbox.clone();
        sandbox.protected_paths = self.protected_paths();
        sandbox
    }
}

use crate::error::usage as config_error;

/// How the command line chose the configuration: `--config FILE` and `-c key=value` flags.
#[derive(Debug, Clone, Default)]
pub struct ConfigArgs {
    /// `--config FILE`.
    pub file: Option<PathBuf>,
    /// `-c key=value`, in order.
    pub overrides: Vec<String>,
}

impl ConfigArgs {
    /// The effective configuration: every layer, from the built-in defaults to the `-c` flags
    /// (see [`layers`]); the keys it names are registered as secrets, the working folder and
    /// the agents folder as the person's own.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the file and line, the variable or the flag at fault.
    pub fn load(&self) -> Result<Config> {
        let inputs = Inputs {
            cwd: std::env::current_dir().context("cannot read the current directory")?,
            user_file: layers::user_file(),
            explicit: self.file.clone(),
            env: lsm_env(),
            overrides: self.overrides.clone(),
        };
        let config = layers::load(&inputs)?;
        // The keys it names are secrets from now on, wherever they would be printed or recorded.
        crate::secrets::register_vars(config.key_vars(), &|name| std::env::var(name).ok());
        // The paths it prints are made from these: their names are not secrets.
        crate::secrets::register_own_folders([
            inputs.cwd.as_path(),
            config.agents.agents_folder.as_path(),
        ]);
        Ok(config)
    }
}

/// `explicit` (or the project's `lsm.toml`) with `env`, no user file and no flags: the
/// configuration tests load.
///
/// # Errors
/// As [`ConfigArgs::load`].
pub fn load(explicit: Option<&std::path::Path>, env: &[(String, String)]) -> Result<Config> {
    layers::load(&Inputs {
        cwd: std::env::current_dir()?,
        user_file: None,
        explicit: explicit.map(std::path::Path::to_path_buf),
        env: env.to_vec(),
        overrides: Vec::new(),
    })
}

#[cfg(test)]
mod tests;
