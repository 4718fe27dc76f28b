//! Sections of `lsm.toml` read here whose types serve other parts: `[conductor]`, and
//! `[agents.memory]` (lsm-memory's `MemoryConfig`), split off the `[agents]` table.

use crate::error::Result;
use lsm_memory::MemoryConfig;

use crate::error::ConfigError;

/// `[conductor]`: how the conductor delegates.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConductorConfig {
    /// Worker runs at once (at least 1). Flag: `--max-workers`.
    pub max_workers: usize,
    /// Capability → the agent its workers run and their limits (beside `researcher` and
    /// `terminal`, which run the agents of those names unless mapped here).
    pub capabilities: std::collections::BTreeMap<String, super::Capability>,
}

impl Default for ConductorConfig {
    fn default() -> Self {
        ConductorConfig {
            max_workers: lsm_agents::DEFAULT_MAX_WORKERS,
            capabilities: std::collections::BTreeMap::new(),
        }
    }
}

impl ConductorConfig {
    /// Check the section (the agents its capabilities name are checked once the agents are
    /// known: [`super::layers`]'s `check_agent_names`).
    ///
    /// # Errors
    /// A zero `max_workers`; a capability's bad limits.
    pub fn validate(&self) -> Result<(), crate::error::ConfigError> {
        if self.max_workers == 0 {
            return Err(crate::error::ConfigError(
                "[conductor] max_workers must be at least 1".into(),
            ));
        }
        for (name, capability) in &self.capabilities {
            capability.validate(name)?;
        }
        Ok(())
    }

    /// The name of the agent a worker of `capability` runs (never the conductor).
    pub fn agent_for<'a>(&'a self, capability: &'a str) -> Option<&'a str> {
        let name = self
            .capabilities
            .get(capability)
            .map_or(capability, |c| c.agent_name(capability));
        let builtin_worker = matches!(name, "researcher" | "terminal");
        (name != "conductor" && (builtin_worker || self.capabilities.contains_key(capability)))
            .then_some(name)
    }
}

/// `[store]`: where run journals (and, with a URL, agent memory) live. Without a URL, the
/// run folders' files and the SQLite memory databases (the default for one person).
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://USER@HOST:PORT/DATABASE[?sslmode=disable|prefer|require]`, without a
    /// password (it comes from `LSM_STORE_PASSWORD` or `PGPASSWORD`). Variable:
    /// `LSM_STORE_URL`.
    pub url: Option<String>,
    /// The schema of lsm's tables (created when missing).
    pub schema: String,
    /// How long a run's lease lasts unless its driver renews it (every third of it): how long
    /// a dead worker's runs wait before another worker takes them.
    pub lease_seconds: f64,
    /// Connections per process.
    pub pool_size: usize,
    /// A PEM file of the certificate authorities the server's certificate must chain to
    /// (without it, TLS encrypts without checking the certificate).
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            url: None,
            schema: lsm_store_pg::SCHEMA_DEFAULT.to_string(),
            lease_seconds: 30.0,
            pool_size: 8,
            ca_file: None,
        }
    }
}

impl StoreConfig {
    /// Check the section (without connecting).
    ///
    /// # Errors
    /// A bad URL (one holding a password included), schema, lease or pool size.
    pub fn validate(&self) -> Result<(), crate::error::ConfigError> {
        if !(self.lease_seconds.is_finite() && self.lease_seconds >= 0.5) {
            return Err(crate::error::ConfigError(format!(
                "[store] lease_seconds = {} must be at least 0.5",
                self.lease_seconds
            )));
        }
        if let Some(settings) = self.settings() {
            settings
                .validate()
                .map_err(|e| crate::error::ConfigError(e.to_string()))?;
        }
        Ok(())
    }

    /// The PostgreSQL settings, when a URL is configured.
    pub fn settings(&self) -> Option<lsm_store_pg::PgSettings> {
        let url = self.url.as_deref().filter(|u| !u.is_empty())?;
        let mut s = lsm_store_pg::PgSettings::new(url).with_schema(&self.schema);
        s.pool_size = self.pool_size;
        s.ca_file.clone_from(&self.ca_file);
        Some(s)
    }

    /// How long a lease lasts.
    pub fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.lease_seconds.max(0.5))
    }
}

/// Read the `memory` entry of the `[agents]` table (`[agents.memory]`) and take it out, so
/// the rest of the table can be read as the harness's own settings (which refuse keys they
/// do not know).
///
/// # Errors
/// A [`ConfigError`] naming the bad key or value.
pub fn split_memory_config(table: &mut toml::Table) -> Result<MemoryConfig> {
    let Some(toml::Value::Table(agents)) = table.get_mut("agents") else {
        return Ok(MemoryConfig::default());
    };
    match agents.remove("memory") {
        None => Ok(MemoryConfig::default()),
        Some(value @ toml::Value::Table(_)) => {
            let config: MemoryConfig = value.try_into().map_err(|e: toml::de::Error| {
                ConfigError(format!("[agents.memory]: {}", e.message()))
            })?;
            config
                .validate()
                .map_err(|e| ConfigError(format!("[agents.memory] {e}")))?;
            Ok(config)
        }
        Some(_) => {
            Err(ConfigError("[agents] memory must be a table ([agents.memory])".into()).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn the_memory_table_is_split_off_and_checked() {
        let mut t =
            table("[agents]\nmax_iterations = 3\n[agents.memory]\nenabled = true\nlimit = 4\n");
        let m = split_memory_config(&mut t).unwrap();
        assert!(m.enabled);
        assert_eq!(m.limit, 4);
        assert!(t["agents"].get("memory").is_none());
        assert_eq!(t["agents"]["max_iterations"].as_integer(), Some(3));

        let mut t = table("[agents.memory]\nenabeld = true\n");
        let e = split_memory_config(&mut t).unwrap_err().to_string();
        assert!(
            e.contains("enabeld") && e.contains("[agents.memory]"),
            "{e}"
        );

        let mut t = table("[agents.memory]\nlimit = 0\n");
        assert!(split_memory_config(&mut t).is_err());
        let mut t = table("[agents]\nmemory = true\n");
        assert!(split_memory_config(&mut t).is_err());
        assert_eq!(
            split_memory_config(&mut toml::Table::new()).unwrap(),
            MemoryConfig::default()
        );
    }

    #[test]
    fn capabilities_map_to_worker_agents_and_bad_mappings_are_refused() {
        let mut c = ConductorConfig::default();
        assert_eq!(c.agent_for("researcher"), Some("researcher"));
        assert_eq!(c.agent_for("terminal"), Some("terminal"));
        assert!(c.agent_for("painter").is_none());
        assert!(
            c.agent_for("conductor").is_none(),
            "no conductor under a conductor"
        );
        c.capabilities.insert(
            "librarian".into(),
            super::super::Capability::agent("librarian"),
        );
        c.capabilities
            .insert("writer".into(), super::super::Capability::agent("writing"));
        c.validate().unwrap();
        assert_eq!(c.agent_for("writer"), Some("writing"));
        c.capabilities
            .insert("boss".into(), super::super::Capability::agent("conductor"));
        assert!(c.agent_for("boss").is_none(), "no conductor as a worker");
        let zero = ConductorConfig {
            max_workers: 0,
            ..ConductorConfig::default()
        };
        assert!(zero.validate().is_err());
    }
}
