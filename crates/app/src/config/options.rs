//! The options of a command that starts a run (`--max-tokens-budget 5000`, `--agents-folder
//! DIR`) that are settings: the top layer of the configuration, over `-c` — applied last, and
//! each named by its option as the setting's source in `lsm config show` and in errors.

use std::path::{Path, PathBuf};

use crate::error::Result;
use lsm_harness::StopMode;

use super::{Config, Source, config_error};

/// A setting a command's option can make.
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    /// `agents.agents_folder` (relative to the run's folder).
    AgentsFolder(PathBuf),
    /// `agents.max_iterations`.
    MaxIterations(u32),
    /// `agents.max_tokens_budget`.
    MaxTokensBudget(u64),
    /// `agents.max_cost_usd`.
    MaxCostUsd(f64),
    /// `agents.max_wall_seconds`.
    MaxWallSeconds(u64),
    /// `agents.stop_mode`.
    StopMode(StopMode),
    /// `conductor.max_workers`.
    MaxWorkers(usize),
}

impl Setting {
    /// Its key (`agents.max_tokens_budget`).
    pub fn key(&self) -> &'static str {
        match self {
            Setting::AgentsFolder(_) => "agents.agents_folder",
            Setting::MaxIterations(_) => "agents.max_iterations",
            Setting::MaxTokensBudget(_) => "agents.max_tokens_budget",
            Setting::MaxCostUsd(_) => "agents.max_cost_usd",
            Setting::MaxWallSeconds(_) => "agents.max_wall_seconds",
            Setting::StopMode(_) => "agents.stop_mode",
            Setting::MaxWorkers(_) => "conductor.max_workers",
        }
    }
}

/// The settings a command's options make, each with its option's name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    settings: Vec<(Setting, String)>,
}

impl Options {
    /// No option.
    pub fn new() -> Self {
        Self::default()
    }

    /// `setting`, given by the option `flag` (`--max-tokens-budget`); a later one of the same
    /// key wins.
    pub fn set(&mut self, setting: Setting, flag: &str) {
        self.settings.retain(|(s, _)| s.key() != setting.key());
        self.settings.push((setting, flag.to_string()));
    }

    /// Whether no option is set.
    pub fn is_empty(&self) -> bool {
        self.settings.is_empty()
    }
}

impl Config {
    /// This configuration with `options` on top (a relative agents folder against `cwd`).
    ///
    /// # Errors
    /// A [`super::ConfigError`] naming the option, for a value no setting takes (a limit of
    /// zero).
    pub fn with_options(&self, options: &Options, cwd: &Path) -> Result<Config> {
        let mut config = self.clone();
        for (setting, flag) in &options.settings {
            let at_least_one = |n: u64| {
                if n == 0 {
                    Err(config_error(format!(
                        "{flag}: {} must be at least 1",
                        setting.key()
                    )))
                } else {
                    Ok(())
                }
            };
            match setting {
                Setting::AgentsFolder(dir) => config.agents.agents_folder = cwd.join(dir),
                Setting::MaxIterations(n) => {
                    at_least_one(u64::from(*n))?;
                    config.agents.max_iterations = *n;
                }
                Setting::MaxTokensBudget(n) => {
                    at_least_one(*n)?;
                    config.agents.max_tokens_budget = *n;
                }
                Setting::MaxCostUsd(usd) => config.agents.max_cost_usd = Some(*usd),
                Setting::MaxWallSeconds(n) => {
                    at_least_one(*n)?;
                    config.agents.max_wall_seconds = Some(*n);
                }
                Setting::StopMode(mode) => config.agents.stop_mode = *mode,
                Setting::MaxWorkers(n) => {
                    at_least_one(u64::try_from(*n).unwrap_or(u64::MAX))?;
                    config.conductor.max_workers = *n;
                }
            }
            config.origins.set(
                setting.key().split('.').map(str::to_string).collect(),
                Source::Option { flag: flag.clone() },
            );
        }
        Ok(config)
    }
}
