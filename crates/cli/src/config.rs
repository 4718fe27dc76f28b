//! `lsm.toml`: finding it, reading it, `LSM_*` environment overrides, resolving its paths.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use lsm_harness::HarnessConfig;
use lsm_sandbox::SandboxConfig;
use lsm_tools_kb::KbConfig;
use serde::Deserialize;

/// The name looked for in the working directory when `--config` is not given.
pub const DEFAULT_CONFIG_FILE: &str = "lsm.toml";

/// `[llm]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// Provider spec, as `--provider` takes it (`scripted:<file.jsonl>`).
    pub provider: Option<String>,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[agents]`: harness settings.
    pub agents: HarnessConfig,
    /// `[sandbox]`: tool policy.
    pub sandbox: SandboxConfig,
    /// `[llm]`: the provider.
    pub llm: LlmConfig,
    /// `[kb]`: the knowledge base.
    pub kb: KbConfig,
    /// The file this came from (`None`: built-in defaults).
    #[serde(skip)]
    pub source: Option<PathBuf>,
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
    apply_env_overrides(&mut table, env)?;
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
    resolve_paths(&mut config, &base);
    config.source = path;
    Ok(config)
}

/// The sections an `LSM_<SECTION>_<KEY>` variable can address.
const SECTIONS: &[&str] = &["agents", "sandbox", "llm", "kb"];

/// `LSM_AGENTS_MAX_TOKENS_BUDGET=5000` sets `[agents] max_tokens_budget = 5000`. Values are
/// read as TOML (numbers, booleans, arrays) and fall back to a plain string.
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
        let entry = table
            .entry(section.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        match entry {
            toml::Value::Table(t) => {
                t.insert(key, parsed);
            }
            _ => bail!(config_error(format!("[{section}] is not a table"))),
        }
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
    if let Some(spec) = config.llm.provider.as_mut()
        && let Some(file) = spec.strip_prefix("scripted:")
        && Path::new(file).is_relative()
    {
        *spec = format!("scripted:{}", base.join(file).display());
    }
}

/// The `LSM_*` variables of this process.
pub fn lsm_env() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| k.starts_with("LSM_"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_overrides_set_typed_values() {
        let mut t = toml::Table::new();
        apply_env_overrides(
            &mut t,
            &[
                ("LSM_AGENTS_MAX_TOKENS_BUDGET".into(), "5000".into()),
                ("LSM_SANDBOX_ALLOW_URL_ACCESS".into(), "true".into()),
                ("LSM_LLM_PROVIDER".into(), "scripted:x.jsonl".into()),
            ],
        )
        .unwrap();
        let c: Config = toml::Value::Table(t).try_into().unwrap();
        assert_eq!(c.agents.max_tokens_budget, 5000);
        assert!(c.sandbox.allow_url_access);
        assert_eq!(c.llm.provider.as_deref(), Some("scripted:x.jsonl"));
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
