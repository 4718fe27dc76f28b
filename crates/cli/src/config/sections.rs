//! Sections of `lsm.toml` read here whose types serve other parts: `[conductor]`, and
//! `[agents.memory]` (lsm-memory's `MemoryConfig`), split off the `[agents]` table.

use anyhow::Result;
use lsm_memory::MemoryConfig;

use crate::exit::ConfigError;

/// `[conductor]`: how the conductor delegates.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConductorConfig {
    /// Worker runs at once (at least 1). Flag: `--max-workers`.
    pub max_workers: usize,
    /// Capability → the agent its workers run (beside `researcher` and `terminal`, which run
    /// the agents of those names unless mapped here).
    pub capabilities: std::collections::BTreeMap<String, String>,
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
    /// Check the section.
    ///
    /// # Errors
    /// A zero `max_workers`, or a capability mapped to something that is not an agent (or to
    /// the conductor itself).
    pub fn validate(&self) -> Result<(), String> {
        if self.max_workers == 0 {
            return Err("[conductor] max_workers must be at least 1".into());
        }
        for (capability, agent) in &self.capabilities {
            if agent == "conductor" || lsm_agents::find(agent).is_none() {
                let known: Vec<&str> = lsm_agents::BUILTIN
                    .iter()
                    .map(|a| a.name)
                    .filter(|n| *n != "conductor")
                    .collect();
                return Err(format!(
                    "[conductor.capabilities] {capability} = \"{agent}\": not an agent a worker can run; the agents are: {}",
                    known.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// The agent a worker of `capability` runs.
    pub fn agent_for(&self, capability: &str) -> Option<&'static lsm_agents::AgentSpec> {
        let name = self
            .capabilities
            .get(capability)
            .map_or(capability, String::as_str);
        lsm_agents::find(name).filter(|spec| spec.name != "conductor")
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
        assert_eq!(
            c.agent_for("researcher").map(|s| s.name),
            Some("researcher")
        );
        assert_eq!(c.agent_for("terminal").map(|s| s.name), Some("terminal"));
        assert!(c.agent_for("painter").is_none());
        assert!(
            c.agent_for("conductor").is_none(),
            "no conductor under a conductor"
        );
        c.capabilities
            .insert("librarian".into(), "librarian".into());
        c.capabilities.insert("writer".into(), "writing".into());
        c.validate().unwrap();
        assert_eq!(c.agent_for("writer").map(|s| s.name), Some("writing"));
        c.capabilities.insert("boss".into(), "conductor".into());
        assert!(c.validate().unwrap_err().contains("boss"));
        let zero = ConductorConfig {
            max_workers: 0,
            ..ConductorConfig::default()
        };
        assert!(zero.validate().is_err());
    }
}
