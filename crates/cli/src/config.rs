//! `lsm.toml`: finding it, reading it, `LSM_*` environment overrides, resolving its paths.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use lsm_phase::LlmTier;
use lsm_providers::{HttpSettings, Pricing};
use lsm_sandbox::SandboxConfig;
use lsm_tools_kb::KbConfig;
use serde::Deserialize;

use crate::agents_config::AgentsConfig;
use crate::memory_wiring::MemoryConfig;

/// The name looked for in the working directory when `--config` is not given.
pub const DEFAULT_CONFIG_FILE: &str = "lsm.toml";

/// `[llm]`: the defaults of every tier, the pricing table, and the tiers.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// `openai`, `openai-responses`, `anthropic`, `compatible`, `local`, or
    /// `scripted:<file.jsonl>`.
    pub provider: Option<String>,
    /// The model name, as the server knows it.
    pub model: Option<String>,
    /// The GGUF file the `local` provider loads.
    pub model_path: Option<PathBuf>,
    /// The `local` provider's context window in tokens.
    pub context_size: Option<u32>,
    /// The API base URL.
    pub base_url: Option<String>,
    /// The environment variable holding the key.
    pub api_key_env: Option<String>,
    /// Native tool calling (default) or the strict-JSON protocol.
    pub function_calling: Option<bool>,
    /// Stream answers (SSE).
    pub stream: Option<bool>,
    /// OpenAI `prompt_cache_retention` (`"in_memory"`, `"24h"`).
    pub prompt_cache_retention: Option<String>,
    /// Connect timeout.
    pub connect_timeout_seconds: Option<f64>,
    /// Read timeout (silence between two reads).
    pub read_timeout_seconds: Option<f64>,
    /// Retries after the first attempt.
    pub max_retries: Option<u32>,
    /// First backoff delay.
    pub retry_base_delay_ms: Option<u64>,
    /// Longest single wait, also for `Retry-After`.
    pub retry_max_delay_seconds: Option<f64>,
    /// Prices per model name.
    pub pricing: BTreeMap<String, Pricing>,
    /// The model's context window in tokens (compaction measures prompts against it).
    pub context_window: Option<u64>,
    /// `[llm.context_windows]`: context windows per model name, over the built-in table.
    pub context_windows: BTreeMap<String, u64>,
    /// `[llm.quick]`.
    pub quick: Option<TierConfig>,
    /// `[llm.normal]`.
    pub normal: Option<TierConfig>,
    /// `[llm.complex]`.
    pub complex: Option<TierConfig>,
}

/// `[llm.quick]`, `[llm.normal]`, `[llm.complex]`: what a tier changes from `[llm]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TierConfig {
    /// As `[llm] provider`.
    pub provider: Option<String>,
    /// As `[llm] model`.
    pub model: Option<String>,
    /// As `[llm] model_path`.
    pub model_path: Option<PathBuf>,
    /// As `[llm] context_size`.
    pub context_size: Option<u32>,
    /// As `[llm] base_url`.
    pub base_url: Option<String>,
    /// As `[llm] api_key_env`.
    pub api_key_env: Option<String>,
    /// As `[llm] function_calling`.
    pub function_calling: Option<bool>,
    /// As `[llm] stream`.
    pub stream: Option<bool>,
    /// As `[llm] prompt_cache_retention`.
    pub prompt_cache_retention: Option<String>,
    /// As `[llm] connect_timeout_seconds`.
    pub connect_timeout_seconds: Option<f64>,
    /// As `[llm] read_timeout_seconds`.
    pub read_timeout_seconds: Option<f64>,
    /// As `[llm] max_retries`.
    pub max_retries: Option<u32>,
    /// As `[llm] retry_base_delay_ms`.
    pub retry_base_delay_ms: Option<u64>,
    /// As `[llm] retry_max_delay_seconds`.
    pub retry_max_delay_seconds: Option<f64>,
    /// The prices of this tier's model.
    pub pricing: Option<Pricing>,
    /// As `[llm] context_window`.
    pub context_window: Option<u64>,
}

/// The LLM settings one run uses: `[llm]`, overridden by the agent's tier.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedLlm {
    /// Where these settings came from, for messages (`[llm.normal]`, `[llm]`).
    pub section: String,
    /// The provider spec.
    pub provider: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// The local provider's GGUF file.
    pub model_path: Option<PathBuf>,
    /// The local provider's context window.
    pub context_size: Option<u32>,
    /// The base URL.
    pub base_url: Option<String>,
    /// The key's variable.
    pub api_key_env: Option<String>,
    /// Native tool calling.
    pub function_calling: bool,
    /// Streaming.
    pub stream: bool,
    /// Prompt cache retention.
    pub prompt_cache_retention: Option<String>,
    /// Timeouts and retries.
    pub http: HttpSettings,
    /// The tier's own price, for its own model.
    tier_pricing: Option<(Option<String>, Pricing)>,
    /// The `[llm.pricing]` table.
    table: BTreeMap<String, Pricing>,
    /// The tier's (or `[llm]`'s) context window.
    context_window: Option<u64>,
    /// The `[llm.context_windows]` table.
    windows: BTreeMap<String, u64>,
}

impl ResolvedLlm {
    /// The prices of `model`: the tier's `pricing` when `model` is the tier's model, else the
    /// `[llm.pricing]` entry for it.
    pub fn pricing_for(&self, model: &str) -> Option<Pricing> {
        if let Some((tier_model, p)) = &self.tier_pricing
            && tier_model.as_deref().is_none_or(|m| m == model)
        {
            return Some(*p);
        }
        self.table.get(model).copied()
    }

    /// The context window configured for `model`: the tier's (or `[llm]`'s)
    /// `context_window`, else the local provider's `context_size`, else its
    /// `[llm.context_windows]` entry. `None`: the provider's own table decides.
    pub fn context_window_for(&self, model: &str) -> Option<u64> {
        self.context_window
            .or(self.context_size.map(u64::from))
            .or_else(|| self.windows.get(model).copied())
    }
}

fn seconds(value: Option<f64>, default: Duration, key: &str, section: &str) -> Result<Duration> {
    match value {
        None => Ok(default),
        Some(v) if v.is_finite() && v > 0.0 => Ok(Duration::from_secs_f64(v)),
        Some(v) => bail!(config_error(format!(
            "{section} {key} = {v} must be a positive number of seconds"
        ))),
    }
}

impl LlmConfig {
    /// The tier's table, if configured.
    pub fn tier(&self, tier: LlmTier) -> Option<&TierConfig> {
        match tier {
            LlmTier::Quick => self.quick.as_ref(),
            LlmTier::Normal => self.normal.as_ref(),
            LlmTier::Complex => self.complex.as_ref(),
        }
    }

    /// `[llm]` with the tier's settings on top.
    pub fn resolve(&self, tier: LlmTier) -> Result<ResolvedLlm> {
        let empty = TierConfig::default();
        let t = self.tier(tier).unwrap_or(&empty);
        let section = if self.tier(tier).is_some() {
            format!("[llm.{}]", tier_name(tier))
        } else {
            "[llm]".to_string()
        };
        let d = HttpSettings::default();
        let http = HttpSettings {
            connect_timeout: seconds(
                t.connect_timeout_seconds.or(self.connect_timeout_seconds),
                d.connect_timeout,
                "connect_timeout_seconds",
                &section,
            )?,
            read_timeout: seconds(
                t.read_timeout_seconds.or(self.read_timeout_seconds),
                d.read_timeout,
                "read_timeout_seconds",
                &section,
            )?,
            max_retries: t.max_retries.or(self.max_retries).unwrap_or(d.max_retries),
            retry_base_delay: t
                .retry_base_delay_ms
                .or(self.retry_base_delay_ms)
                .map_or(d.retry_base_delay, Duration::from_millis),
            retry_max_delay: seconds(
                t.retry_max_delay_seconds.or(self.retry_max_delay_seconds),
                d.retry_max_delay,
                "retry_max_delay_seconds",
                &section,
            )?,
        };
        let model = t.model.clone().or_else(|| self.model.clone());
        Ok(ResolvedLlm {
            section,
            provider: t.provider.clone().or_else(|| self.provider.clone()),
            model_path: t.model_path.clone().or_else(|| self.model_path.clone()),
            context_size: t.context_size.or(self.context_size),
            base_url: t.base_url.clone().or_else(|| self.base_url.clone()),
            api_key_env: t.api_key_env.clone().or_else(|| self.api_key_env.clone()),
            function_calling: t.function_calling.or(self.function_calling).unwrap_or(true),
            stream: t.stream.or(self.stream).unwrap_or(false),
            prompt_cache_retention: t
                .prompt_cache_retention
                .clone()
                .or_else(|| self.prompt_cache_retention.clone()),
            http,
            tier_pricing: t.pricing.map(|p| (model.clone(), p)),
            model,
            table: self.pricing.clone(),
            context_window: t.context_window.or(self.context_window),
            windows: self.context_windows.clone(),
        })
    }
}

/// The configuration name of a tier.
pub fn tier_name(tier: LlmTier) -> &'static str {
    match tier {
        LlmTier::Quick => "quick",
        LlmTier::Normal => "normal",
        LlmTier::Complex => "complex",
    }
}

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
    /// `[agents.memory]`: persistent memory. Split off the `[agents]` table by [`load`]
    /// (the harness's settings refuse keys they do not know).
    #[serde(skip)]
    pub memory: MemoryConfig,
    /// The file this came from (`None`: built-in defaults).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

impl Config {
    /// The file this came from, for messages.
    pub fn source_name(&self) -> String {
        self.source.as_ref().map_or_else(
            || "the built-in defaults (no lsm.toml)".to_string(),
            |p| p.display().to_string(),
        )
    }

    /// lsm's own files, which no tool may change whatever the sandbox's allowlists say: the
    /// configuration file in use, `./lsm.toml` (the file the next run would load), and the
    /// agents folder (transcripts, run summaries, memory databases, logs). Absolute, so they
    /// do not depend on the sandbox's working directory.
    pub fn protected_paths(&self) -> Vec<PathBuf> {
        let cwd = std::env::current_dir().unwrap_or_default();
        let mut paths = vec![cwd.join(DEFAULT_CONFIG_FILE)];
        if let Some(source) = &self.source {
            paths.push(cwd.join(source));
        }
        paths.push(cwd.join(&self.agents.agents_folder));
        paths.dedup();
        paths
    }

    /// The sandbox policy of an agent run: `[sandbox]` plus [`Config::protected_paths`],
    /// which only this code sets (configuration cannot lift it).
    pub fn run_sandbox(&self) -> SandboxConfig {
        let mut sandbox = self.sandbox.clone();
        sandbox.protected_paths = self.protected_paths();
        sandbox
    }
}

/// A configuration error: exit code 2.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn config_error(msg: impl Into<String>) -> anyhow::Error {
    ConfigError(msg.into()).into()
}

/// Load `explicit`, or `./lsm.toml` if it exists, or the defaults; then apply `LSM_*`
/// overrides from `env`; then resolve relative paths against the file's folder (or the
/// working directory for defaults).
pub fn load(explicit: Option<&Path>, env: &[(String, String)]) -> Result<Config> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let path = match explicit {
        Some(p) => {
            if !p.is_file() {
                bail!(config_error(format!(
                    "config file {} does not exist; check the path given to --config",
                    p.display()
                )));
            }
            Some(p.to_path_buf())
        }
        None => {
            let p = cwd.join(DEFAULT_CONFIG_FILE);
            p.is_file().then_some(p)
        }
    };
    let mut table = match &path {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| config_error(format!("cannot read {}: {e}", p.display())))?;
            text.parse::<toml::Table>()
                .map_err(|e| config_error(format!("{} is not valid TOML: {e}", p.display())))?
        }
        None => toml::Table::new(),
    };
    lift_llm_tiers(&mut table)?;
    apply_env_overrides(&mut table, env)?;
    let memory = MemoryConfig::split_from(&mut table).map_err(|e| {
        let name = path.as_ref().map_or_else(
            || "the environment".to_string(),
            |p| p.display().to_string(),
        );
        config_error(format!("{name}: {e}"))
    })?;
    let name = path.as_ref().map_or_else(
        || "the built-in defaults".to_string(),
        |p| p.display().to_string(),
    );
    let mut config: Config = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| config_error(format!("{name}: {e}")))?;
    let base = path
        .as_ref()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .map(|p| {
            if p.as_os_str().is_empty() {
                cwd.clone()
            } else {
                p
            }
        })
        .unwrap_or(cwd);
    config.memory = memory;
    config
        .mcp
        .validate()
        .map_err(|e| config_error(format!("{name}: {e}")))?;
    config
        .hooks
        .validate()
        .map_err(|e| config_error(format!("{name}: {e}")))?;
    config
        .agents
        .compaction
        .validate()
        .map_err(|e| config_error(format!("{name}: {e}")))?;
    resolve_paths(&mut config, &base);
    config.source = path;
    // The keys it names are secrets from now on, wherever they would be printed or recorded.
    crate::secrets::register_configured(&config, &|name| std::env::var(name).ok());
    Ok(config)
}

/// The sections an `LSM_<SECTION>_<KEY>` variable can address.
const SECTIONS: &[&str] = &["agents", "sandbox", "llm", "kb", "stall"];

/// Tables nested in a section, addressed as `LSM_<SECTION>_<TABLE>_<KEY>`
/// (`LSM_AGENTS_MEMORY_ENABLED` sets `[agents.memory] enabled`,
/// `LSM_AGENTS_INTERACTION_TIMEOUT_SECONDS=60` sets `[agents.interaction] timeout_seconds`).
const NESTED: &[(&str, &str)] = &[
    ("agents", "memory"),
    ("agents", "interaction"),
    ("agents", "compaction"),
];

/// `[llm.tiers.<tier>]` is another spelling of `[llm.<tier>]`: move such tables into place.
/// A tier given both ways is an error naming it.
fn lift_llm_tiers(table: &mut toml::Table) -> Result<()> {
    let Some(toml::Value::Table(llm)) = table.get_mut("llm") else {
        return Ok(());
    };
    let Some(tiers) = llm.remove("tiers") else {
        return Ok(());
    };
    let toml::Value::Table(tiers) = tiers else {
        bail!(config_error(
            "[llm.tiers] must be a table of tiers (quick, normal, complex)"
        ));
    };
    for (name, value) in tiers {
        if !TIERS.contains(&name.as_str()) {
            bail!(config_error(format!(
                "[llm.tiers.{name}] is not a tier: use quick, normal or complex"
            )));
        }
        if llm.contains_key(&name) {
            bail!(config_error(format!(
                "the tier {name} is given twice, as [llm.{name}] and [llm.tiers.{name}]: keep one"
            )));
        }
        llm.insert(name, value);
    }
    Ok(())
}

/// The `[llm]` tiers an `LSM_LLM_<TIER>_<KEY>` variable can address.
const TIERS: &[&str] = &["quick", "normal", "complex"];

/// The `[llm]` keys whose environment override also overrides every tier: the variable says
/// which provider, model and server to use, whatever the file's tiers say.
const LLM_KEYS_OVER_TIERS: &[&str] = &["provider", "model", "model_path", "base_url"];

fn subtable<'a>(table: &'a mut toml::Table, key: &str, name: &str) -> Result<&'a mut toml::Table> {
    let entry = table
        .entry(key.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    match entry {
        toml::Value::Table(t) => Ok(t),
        _ => bail!(config_error(format!("{name} is not a table"))),
    }
}

/// `LSM_AGENTS_MAX_TOKENS_BUDGET=5000` sets `[agents] max_tokens_budget = 5000`. Values are
/// read as TOML (numbers, booleans, arrays) and fall back to a plain string.
/// `LSM_LLM_NORMAL_MODEL` sets `[llm.normal] model`; `LSM_LLM_PROVIDER`, `LSM_LLM_MODEL` and
/// `LSM_LLM_BASE_URL` set `[llm]` and every tier present in the file.
fn apply_env_overrides(table: &mut toml::Table, env: &[(String, String)]) -> Result<()> {
    for (name, value) in env {
        let Some(rest) = name.strip_prefix("LSM_") else {
            continue;
        };
        let lower = rest.to_ascii_lowercase();
        let Some((section, key)) = SECTIONS.iter().find_map(|s| {
            lower
                .strip_prefix(s)
                .and_then(|k| k.strip_prefix('_'))
                .map(|k| (*s, k.to_string()))
        }) else {
            bail!(config_error(format!(
                "environment variable {name} does not name a setting: use LSM_<SECTION>_<KEY> with a section among {}",
                SECTIONS.join(", ")
            )));
        };
        let parsed = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.clone()));
        let section_table = subtable(table, section, &format!("[{section}]"))?;
        if let Some((_, sub)) = NESTED.iter().find(|(s, sub)| {
            *s == section && key.strip_prefix(sub).is_some_and(|k| k.starts_with('_'))
        }) {
            let inner_key = key[sub.len() + 1..].to_string();
            subtable(section_table, sub, &format!("[{section}.{sub}]"))?.insert(inner_key, parsed);
            continue;
        }
        if section == "llm" {
            if let Some((tier, tier_key)) = TIERS.iter().find_map(|t| {
                key.strip_prefix(t)
                    .and_then(|k| k.strip_prefix('_'))
                    .map(|k| (*t, k.to_string()))
            }) {
                subtable(section_table, tier, &format!("[llm.{tier}]"))?.insert(tier_key, parsed);
                continue;
            }
            if LLM_KEYS_OVER_TIERS.contains(&key.as_str()) {
                for tier in TIERS {
                    if let Some(toml::Value::Table(t)) = section_table.get_mut(*tier) {
                        t.insert(key.clone(), parsed.clone());
                    }
                }
            }
        }
        section_table.insert(key, parsed);
    }
    Ok(())
}

fn resolve_paths(config: &mut Config, base: &Path) {
    let fix = |p: &mut PathBuf| {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    };
    fix(&mut config.agents.agents_folder);
    config.sandbox.allowed_read_paths.iter_mut().for_each(fix);
    config.sandbox.allowed_write_paths.iter_mut().for_each(fix);
    if let Some(dir) = config.sandbox.working_dir.as_mut() {
        fix(dir);
    }
    fix(&mut config.kb.index_dir);
    if let Some(dir) = config.kb.embedder.model_dir.as_mut() {
        fix(dir);
    }
    config.memory.resolve_paths(base);
    // A server program given by a relative path (`./tools/server`) is the file's neighbour;
    // a bare name is looked up on PATH.
    for server in config.mcp.servers.values_mut() {
        if let Some(command) = server.command.as_mut()
            && command.contains('/')
            && Path::new(command.as_str()).is_relative()
        {
            *command = base.join(&*command).display().to_string();
        }
    }
    let fix_spec = |spec: &mut Option<String>| {
        if let Some(spec) = spec.as_mut()
            && let Some(file) = spec.strip_prefix("scripted:")
            && Path::new(file).is_relative()
        {
            *spec = format!("scripted:{}", base.join(file).display());
        }
    };
    fix_spec(&mut config.llm.provider);
    if let Some(p) = config.llm.model_path.as_mut() {
        fix(p);
    }
    for tier in [
        &mut config.llm.quick,
        &mut config.llm.normal,
        &mut config.llm.complex,
    ]
    .into_iter()
    .flatten()
    {
        fix_spec(&mut tier.provider);
        if let Some(p) = tier.model_path.as_mut() {
            fix(p);
        }
    }
}

/// `LSM_*` variables that are not settings of `lsm.toml`: `LSM_MODEL_CACHE` moves the model
/// cache folder (shared with `cargo xtask fetch-model`); `LSM_LOG` is the log filter.
const NOT_SETTINGS: &[&str] = &[lsm_providers::MODEL_CACHE_ENV, LOG_ENV];

/// The log filter's variable (`info`, `debug`, `lsm_harness=debug`, …).
pub const LOG_ENV: &str = "LSM_LOG";

/// The `LSM_*` variables of this process that override settings.
pub fn lsm_env() -> Vec<(String, String)> {
    settings_env(std::env::vars())
}

/// The variables among `vars` that override settings: `LSM_*` except [`NOT_SETTINGS`] and
/// the test-only `LSM_TEST_*` (crash points, the scripted provider's served log).
fn settings_env(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    vars.filter(|(k, _)| {
        k.starts_with("LSM_") && !k.starts_with("LSM_TEST_") && !NOT_SETTINGS.contains(&k.as_str())
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        apply_env_overrides(
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
        let e = apply_env_overrides(
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
            c.llm.provider.unwrap(),
            format!("scripted:{}", dir.path().join("s.jsonl").display())
        );
    }
}

#[cfg(test)]
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

    fn load_text(text: &str, env: &[(&str, &str)]) -> Result<Config> {
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
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/CONFIG.md"),
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
        apply_env_overrides(&mut t, &env).unwrap();
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
        let c = load_text("[llm]\nread_timeout_seconds = -1\n", &[]).unwrap();
        let e = c.llm.resolve(LlmTier::Normal).unwrap_err().to_string();
        assert!(e.contains("[llm] read_timeout_seconds"), "{e}");
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
        // Neither the file nor the environment can set the list.
        std::fs::write(&f, "[sandbox]\nprotected_paths = []\n").unwrap();
        let e = load(Some(&f), &[]).unwrap_err().to_string();
        assert!(e.contains("protected_paths"), "{e}");
        std::fs::write(&f, "").unwrap();
        let env = [("LSM_SANDBOX_PROTECTED_PATHS".to_string(), "[]".to_string())];
        assert!(load(Some(&f), &env).is_err());
    }
}
