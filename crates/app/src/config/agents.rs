//! `[agents]`: the harness's settings plus the runtime's (`max_concurrent`,
//! `log_stream_queue_limit`) and the nested `[agents.interaction]` table.
//!
//! The harness owns most of `[agents]` (its [`HarnessConfig`] refuses unknown keys); the
//! keys that belong to the runtime manager and the interaction channel are taken out of the
//! table first, so each part still refuses what it does not know.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

use lsm_harness::{HarnessConfig, TaskContract};
use lsm_interaction::InteractionConfig;
use serde::Deserialize;

/// The whole `[agents]` section. Dereferences to the harness's part, so
/// `config.agents.max_iterations` reads as before.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentsConfig {
    /// The harness's settings (every key of `[agents]` not listed below).
    pub harness: HarnessConfig,
    /// `[agents.interaction]`: the human-in-the-loop channel.
    pub interaction: InteractionConfig,
    /// Runs the runtime manager executes at once; the rest wait in a queue. At least 1.
    pub max_concurrent: usize,
    /// Log lines kept per run for live display; older ones are dropped and counted. At
    /// least 1.
    pub log_stream_queue_limit: usize,
    /// `[agents.extra_tools]`: agent name → tools added to that agent's allowlist (offered
    /// only when registered). The only way to offer an agent a tool its card does not name,
    /// such as `bash`.
    pub extra_tools: BTreeMap<String, Vec<String>>,
    /// `[agents.contracts.<agent>]`: the task contract each agent's runs are held to
    /// (`lsm agent run --contract FILE` replaces it for one run).
    pub contracts: BTreeMap<String, TaskContract>,
    /// `[agents.deferred_tools.<name>]`: tools handled outside `lsm` (their description and
    /// parameters); offered to the agents whose allowlist names them.
    pub deferred_tools: BTreeMap<String, crate::deferred_tools::DeferredToolConfig>,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        AgentsConfig {
            harness: HarnessConfig::default(),
            interaction: InteractionConfig::default(),
            max_concurrent: 5,
            log_stream_queue_limit: 500,
            extra_tools: BTreeMap::new(),
            contracts: BTreeMap::new(),
            deferred_tools: BTreeMap::new(),
        }
    }
}

impl AgentsConfig {
    /// The task contract `agent`'s runs are held to, if configured.
    pub fn contract_of(&self, agent: &str) -> Option<TaskContract> {
        self.contracts.get(agent).cloned()
    }

    /// The tools configuration adds to `agent`'s allowlist.
    pub fn extra_tools_of(&self, agent: &str) -> Vec<String> {
        self.extra_tools.get(agent).cloned().unwrap_or_default()
    }
}

impl Deref for AgentsConfig {
    type Target = HarnessConfig;
    fn deref(&self) -> &HarnessConfig {
        &self.harness
    }
}

impl DerefMut for AgentsConfig {
    fn deref_mut(&mut self) -> &mut HarnessConfig {
        &mut self.harness
    }
}

/// The keys of `[agents]` that are not the harness's.
#[derive(Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RuntimeKeys {
    interaction: InteractionConfig,
    max_concurrent: usize,
    log_stream_queue_limit: usize,
    extra_tools: BTreeMap<String, Vec<String>>,
    contracts: BTreeMap<String, TaskContract>,
    deferred_tools: BTreeMap<String, crate::deferred_tools::DeferredToolConfig>,
}

impl Default for RuntimeKeys {
    fn default() -> Self {
        let d = AgentsConfig::default();
        RuntimeKeys {
            interaction: d.interaction,
            max_concurrent: d.max_concurrent,
            log_stream_queue_limit: d.log_stream_queue_limit,
            extra_tools: d.extra_tools,
            contracts: d.contracts,
            deferred_tools: d.deferred_tools,
        }
    }
}

const RUNTIME_KEYS: [&str; 6] = [
    "interaction",
    "max_concurrent",
    "log_stream_queue_limit",
    "extra_tools",
    "contracts",
    "deferred_tools",
];

/// Read the task contract in the TOML file `path` (`lsm agent run --contract`).
///
/// # Errors
/// A usage error naming the file: unreadable, not TOML of a contract, or a contract that
/// cannot be checked.
pub fn read_contract(path: &std::path::Path) -> crate::error::Result<TaskContract> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| {
        crate::error::usage(format!("--contract {shown}: cannot read the file: {e}"))
    })?;
    let contract: TaskContract = toml::from_str(&text).map_err(|e| {
        crate::error::usage(format!(
            "--contract {shown}: not a task contract: {}",
            e.message()
        ))
    })?;
    contract
        .validate()
        .map_err(|e| crate::error::usage(format!("--contract {shown}: {e}")))?;
    Ok(contract)
}

impl<'de> Deserialize<'de> for AgentsConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = toml::Table::deserialize(deserializer)?;
        let mut runtime = toml::Table::new();
        for key in RUNTIME_KEYS {
            if let Some(v) = table.remove(key) {
                runtime.insert(key.to_string(), v);
            }
        }
        let harness: HarnessConfig =
            toml::Value::Table(table)
                .try_into()
                .map_err(|e: toml::de::Error| {
                    // The keys serde lists for an unknown one are the harness's; the section
                    // takes the runtime's too. A bad value needs no list.
                    if e.message().starts_with("unknown field") {
                        D::Error::custom(format!(
                            "{}; [agents] also takes {}",
                            e.message(),
                            RUNTIME_KEYS.join(", ")
                        ))
                    } else {
                        D::Error::custom(e.message())
                    }
                })?;
        harness.context.validate().map_err(D::Error::custom)?;
        // Zero would start a run that can do nothing and end it as a failure (an iteration
        // limit, a spent budget); say what is wrong instead.
        for (key, value) in [
            ("max_iterations", u64::from(harness.max_iterations)),
            ("max_tokens_budget", harness.max_tokens_budget),
            ("max_output_tokens", harness.max_output_tokens.unwrap_or(1)),
            ("max_parallel_tools", harness.max_parallel_tools as u64),
            ("max_wall_seconds", harness.max_wall_seconds.unwrap_or(1)),
        ] {
            if value == 0 {
                return Err(D::Error::custom(format!(
                    "[agents] {key} must be at least 1"
                )));
            }
        }
        let runtime: RuntimeKeys = toml::Value::Table(runtime)
            .try_into()
            .map_err(|e: toml::de::Error| D::Error::custom(e.message().to_string()))?;
        runtime
            .interaction
            .validate()
            .map_err(|e| D::Error::custom(e.to_string()))?;
        let builtin = lsm_sandbox::builtin::registry();
        for name in runtime.deferred_tools.keys() {
            if builtin.contains(name) || lsm_harness::is_control_tool(name) {
                return Err(D::Error::custom(format!(
                    "[agents.deferred_tools.{name}]: '{name}' is a tool of lsm's own; give the \
                     deferred tool another name"
                )));
            }
        }
        if runtime.max_concurrent == 0 {
            return Err(D::Error::custom(
                "[agents] max_concurrent must be at least 1",
            ));
        }
        if runtime.log_stream_queue_limit == 0 {
            return Err(D::Error::custom(
                "[agents] log_stream_queue_limit must be at least 1",
            ));
        }
        // The agents named here are checked once the agents are known (definition files
        // included): the configuration's `check_agent_names`.
        for (agent, contract) in &runtime.contracts {
            contract
                .validate()
                .map_err(|e| D::Error::custom(format!("[agents.contracts.{agent}]: {e}")))?;
        }
        Ok(AgentsConfig {
            harness,
            interaction: runtime.interaction,
            max_concurrent: runtime.max_concurrent,
            log_stream_queue_limit: runtime.log_stream_queue_limit,
            extra_tools: runtime.extra_tools,
            contracts: runtime.contracts,
            deferred_tools: runtime.deferred_tools,
        })
    }
}

#[cfg(test)]
mod tests {
    use lsm_interaction::TimeoutAction;

    use super::*;

    fn parse(text: &str) -> Result<AgentsConfig, String> {
        let t: toml::Table = text.parse().map_err(|e| format!("{e}"))?;
        toml::Value::Table(t)
            .try_into()
            .map_err(|e: toml::de::Error| e.to_string())
    }

    #[test]
    fn extra_tools_are_read_per_agent() {
        let c = parse("[extra_tools]\ngeneral = [\"bash\", \"load_url\"]\n").unwrap();
        assert_eq!(c.extra_tools_of("general"), ["bash", "load_url"]);
        assert!(c.extra_tools_of("research").is_empty());
    }

    #[test]
    fn harness_keys_runtime_keys_and_the_interaction_table_are_each_read() {
        let c = parse(
            "max_iterations = 7\nmax_concurrent = 2\nlog_stream_queue_limit = 10\n\
             [interaction]\ntimeout_seconds = 30\ntimeout_action = \"approve\"\n\
             acknowledged_timeout_seconds = 600\nauto_continue = true\n",
        )
        .unwrap();
        assert_eq!(c.max_iterations, 7);
        assert_eq!((c.max_concurrent, c.log_stream_queue_limit), (2, 10));
        assert_eq!(c.interaction.timeout_seconds, 30);
        assert_eq!(c.interaction.timeout_action, TimeoutAction::Approve);
        assert_eq!(c.interaction.acknowledged_timeout_seconds, 600);
        assert!(c.interaction.auto_continue);
    }

    #[test]
    fn contracts_stop_mode_and_work_items_are_read_and_checked() {
        let c = parse(
            "stop_mode = \"strict_automation\"\ncompletion_retries = 1\nwork_items = true\n\
             [contracts.general]\nrequired_outputs = [\"summary.md\"]\n\
             [[contracts.general.require]]\nkind = \"no_denials\"\n",
        )
        .unwrap();
        assert_eq!(c.stop_mode, lsm_harness::StopMode::StrictAutomation);
        assert_eq!(c.completion_retries, 1);
        assert!(c.work_items);
        let contract = c.contract_of("general").unwrap();
        assert_eq!(contract.required_outputs, ["summary.md"]);
        assert!(c.contract_of("research").is_none());
        let e = parse("[contracts.general]\n").unwrap_err();
        assert!(
            e.contains("[agents.contracts.general]") && e.contains("no condition"),
            "{e}"
        );
        let e = parse("stop_mode = \"strict\"\n").unwrap_err();
        assert!(e.contains("strict_automation"), "{e}");
    }

    #[test]
    fn defaults_match_the_reference() {
        let c = parse("").unwrap();
        assert_eq!(c, AgentsConfig::default());
        assert_eq!((c.max_concurrent, c.log_stream_queue_limit), (5, 500));
        assert_eq!(c.interaction.timeout_seconds, 300);
    }

    #[test]
    fn unknown_and_out_of_range_keys_are_clear_errors() {
        let e = parse("max_token_budget = 3").unwrap_err();
        assert!(
            e.contains("max_token_budget")
                && e.contains("[agents] also takes interaction, max_concurrent"),
            "an unknown key is told every key the section takes: {e}"
        );
        let e = parse("max_iterations = -1").unwrap_err();
        assert!(
            e.contains("expected u32") && !e.contains("also takes"),
            "a bad value is told what was expected, not the keys: {e}"
        );
        let e = parse("[interaction]\ntimeout_secs = 3").unwrap_err();
        assert!(e.contains("timeout_secs"), "{e}");
        let e = parse("[interaction]\ntimeout_seconds = 0").unwrap_err();
        assert!(e.contains("timeout_seconds"), "{e}");
        let e = parse("max_parallel_tools = 0").unwrap_err();
        assert!(e.contains("max_parallel_tools must be at least 1"), "{e}");
        let e = parse("max_concurrent = 0").unwrap_err();
        assert!(e.contains("max_concurrent"), "{e}");
        let e = parse("log_stream_queue_limit = 0").unwrap_err();
        assert!(e.contains("log_stream_queue_limit"), "{e}");
        for key in ["max_iterations", "max_tokens_budget", "max_output_tokens"] {
            let e = parse(&format!("{key} = 0")).unwrap_err();
            assert!(
                e.contains(&format!("[agents] {key} must be at least 1")),
                "{key} = 0: {e}"
            );
            assert!(parse(&format!("{key} = 1")).is_ok(), "{key} = 1");
        }
    }
}
