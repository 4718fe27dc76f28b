//! One entry of `[conductor.capabilities]`: the agent a worker of that capability runs, and
//! the worker's own limits (seed 003's `timeout_ms`, `max_steps` and model per worker).
//!
//! ```toml
//! [conductor.capabilities]
//! writer = "writing"                      # the agent only
//! [conductor.capabilities.researcher]     # or a table: limits of its own
//! timeout_seconds = 300
//! max_iterations = 8
//! tier = "quick"                          # or model = "gpt-4o-mini"
//! ```

use lsm_phase::LlmTier;
use serde::de::{self, MapAccess, Visitor};

use crate::error::ConfigError;

/// A capability's worker: its agent and its limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capability {
    /// The agent its workers run (default: the agent of the capability's name).
    pub agent: Option<String>,
    /// Wall-clock limit of each worker run, in seconds (its `max_wall_seconds`): a worker
    /// out of time ends `wall_time_exceeded`, which the conductor sees as a failed item.
    pub timeout_seconds: Option<u64>,
    /// Iteration limit of each worker run (its `max_iterations`).
    pub max_iterations: Option<u32>,
    /// The model its workers use (over the agent's own and the tier's).
    pub model: Option<String>,
    /// The tier its workers use (`quick`, `normal`, `complex`), mapped by `[llm.tiers]`.
    pub tier: Option<LlmTier>,
}

impl Capability {
    /// A capability whose workers run `agent` with its own limits.
    pub fn agent(agent: impl Into<String>) -> Self {
        Capability {
            agent: Some(agent.into()),
            ..Capability::default()
        }
    }

    /// The agent a worker of the capability `name` runs.
    pub fn agent_name<'a>(&'a self, name: &'a str) -> &'a str {
        self.agent.as_deref().unwrap_or(name)
    }

    /// Check the limits.
    ///
    /// # Errors
    /// A zero limit, or both `model` and `tier`, named with the capability.
    pub fn validate(&self, name: &str) -> Result<(), ConfigError> {
        let at = format!("[conductor.capabilities.{name}]");
        if self.timeout_seconds == Some(0) {
            return Err(ConfigError(format!(
                "{at} timeout_seconds must be at least 1"
            )));
        }
        if self.max_iterations == Some(0) {
            return Err(ConfigError(format!(
                "{at} max_iterations must be at least 1"
            )));
        }
        if self.model.is_some() && self.tier.is_some() {
            return Err(ConfigError(format!(
                "{at} gives both model and tier: give one (a model, or the tier whose model \
                 [llm.tiers] names)"
            )));
        }
        Ok(())
    }
}

impl<'de> serde::Deserialize<'de> for Capability {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> Visitor<'de> for Either {
            type Value = Capability;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an agent's name, or a table of agent, timeout_seconds, max_iterations, model, tier")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Capability, E> {
                Ok(Capability::agent(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Capability, A::Error> {
                <Fields as serde::Deserialize>::deserialize(de::value::MapAccessDeserializer::new(
                    map,
                ))
                .map(Into::into)
            }
        }
        deserializer.deserialize_any(Either)
    }
}

/// The table form, read field by field (unknown keys refused).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    agent: Option<String>,
    timeout_seconds: Option<u64>,
    max_iterations: Option<u32>,
    model: Option<String>,
    tier: Option<LlmTier>,
}

impl From<Fields> for Capability {
    fn from(f: Fields) -> Self {
        Capability {
            agent: f.agent,
            timeout_seconds: f.timeout_seconds,
            max_iterations: f.max_iterations,
            model: f.model,
            tier: f.tier,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(toml_text: &str) -> Result<std::collections::BTreeMap<String, Capability>, String> {
        toml::from_str(toml_text).map_err(|e| e.message().to_string())
    }

    #[test]
    fn a_capability_is_an_agents_name_or_a_table_of_limits() {
        let caps = read(
            "writer = \"writing\"\n\
             [researcher]\ntimeout_seconds = 300\nmax_iterations = 8\ntier = \"quick\"\n\
             [coder]\nagent = \"terminal\"\nmodel = \"small\"\n",
        )
        .unwrap();
        assert_eq!(caps["writer"], Capability::agent("writing"));
        let researcher = &caps["researcher"];
        assert_eq!(researcher.agent_name("researcher"), "researcher");
        assert_eq!(researcher.timeout_seconds, Some(300));
        assert_eq!(researcher.max_iterations, Some(8));
        assert_eq!(researcher.tier, Some(LlmTier::Quick));
        assert_eq!(caps["coder"].agent_name("coder"), "terminal");
        assert_eq!(caps["coder"].model.as_deref(), Some("small"));
        for (name, cap) in &caps {
            cap.validate(name).unwrap();
        }
    }

    #[test]
    fn bad_limits_and_unknown_keys_are_refused_by_name() {
        let e = read("[w]\ntimeout = 3\n").unwrap_err();
        assert!(e.contains("unknown field `timeout`"), "{e}");
        let e = read("w = 3\n").unwrap_err();
        assert!(e.contains("an agent's name, or a table"), "{e}");
        let zero = Capability {
            timeout_seconds: Some(0),
            ..Capability::default()
        };
        assert!(
            zero.validate("w")
                .unwrap_err()
                .0
                .contains("[conductor.capabilities.w] timeout_seconds")
        );
        let both = Capability {
            model: Some("m".into()),
            tier: Some(LlmTier::Quick),
            ..Capability::default()
        };
        assert!(
            both.validate("w")
                .unwrap_err()
                .0
                .contains("both model and tier")
        );
    }
}
