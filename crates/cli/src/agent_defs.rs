//! The [`Catalog`] of a configuration: the built-in agents, then the user's definition files,
//! then the project's (found by [`crate::agent_files`]), each checked against the tools the
//! configuration registers; and what a definition asks of its run's configuration.
//!
//! A project definition replaces a user one of the same name, and both replace a built-in.
//! Every file is checked before any run starts: a file that does not parse, or that names a
//! tool this configuration does not register, stops the command with the file and line.

use std::path::Path;

use anyhow::Result;
use lsm_agents::definition::{self, AgentDefinition, DefinitionSource};
use lsm_agents::{Catalog, DefinitionError};

use crate::agent_files::{PROJECT_FOLDER, error_at, layer, project_folder};
use crate::config::Config;
use crate::exit::usage;

/// The catalog of `config`'s project: the built-ins, the user's definitions, the project's;
/// every definition's tools checked against what this configuration registers.
///
/// # Errors
/// A usage error (exit code 2) naming the file and the line of the first bad definition, or
/// a definitions folder that is the records folder.
pub fn catalog(config: &Config) -> Result<Catalog> {
    load(config).map_err(|e| usage(e.to_string()))
}

fn load(config: &Config) -> Result<Catalog, DefinitionError> {
    let project = project_folder(&config.root);
    if same_folder(&project, &config.agents.agents_folder) {
        return Err(error_at(
            &project,
            format!(
                "the definitions folder is also [agents] agents_folder, where run records are kept: keep definitions in {PROJECT_FOLDER}/ and records elsewhere (the default is .lsm/agents)"
            ),
        ));
    }
    let mut catalog = Catalog::builtin();
    if let Some(user) = crate::config::layers::user_agents_folder() {
        catalog = catalog.with_layer(layer(&user, |path| DefinitionSource::User { path })?)?;
    }
    catalog = catalog.with_layer(layer(&project, |path| DefinitionSource::Project { path })?)?;
    // The registered tools are listed only when there is a file to check against them.
    let files: Vec<&AgentDefinition> = catalog
        .iter()
        .filter(|d| d.source != DefinitionSource::Builtin)
        .collect();
    if !files.is_empty() {
        let registered = registered_tools(config);
        for def in files {
            def.check_tools(&registered)?;
        }
    }
    Ok(catalog)
}

fn same_folder(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(b)
}

/// The names a definition file may give in `tools`: every tool this configuration can
/// register, the control tools, and `mcp__<server>__*` / `mcp__<server>__<tool>` of each
/// configured MCP server (its tools are known only once it runs).
pub fn registered_tools(config: &Config) -> Vec<String> {
    let mut names = crate::tool_rows::known_tool_names(config);
    names.extend(
        lsm_harness::control_tool_names()
            .into_iter()
            .map(str::to_string),
    );
    for server in config.mcp.servers.keys() {
        names.push(format!("mcp__{server}__*"));
    }
    names.sort();
    names.dedup();
    names
}

/// The agent `name` of `catalog`, or a usage error listing the agents.
///
/// # Errors
/// No agent has that name.
pub fn find<'a>(catalog: &'a Catalog, name: &str) -> Result<&'a AgentDefinition> {
    catalog.get(name).ok_or_else(|| {
        usage(format!(
            "unknown agent '{name}'; available: {} (definition files: {PROJECT_FOLDER}/*.md in the project, see `lsm agent list`)",
            catalog.names().join(", ")
        ))
    })
}

/// What `definition` asks of its run, applied to `config` before the command's flags (which
/// override it): its stop mode, its work items, its contract (unless `[agents.contracts]`
/// names one for the agent), and its iteration ceiling. Call [`cap_iterations`] again after
/// the flags: the ceiling holds under `--max-iterations` too.
///
/// # Errors
/// The definition's contract file cannot be read.
pub fn apply_settings(definition: &AgentDefinition, config: &mut Config) -> Result<()> {
    let settings = &definition.settings;
    if let Some(mode) = settings.stop_mode {
        config.agents.stop_mode = match mode {
            definition::StopMode::Interactive => lsm_harness::StopMode::Interactive,
            definition::StopMode::StrictAutomation => lsm_harness::StopMode::StrictAutomation,
        };
    }
    if settings.work_items {
        config.agents.work_items = true;
    }
    if let Some(path) = &settings.contract
        && !config.agents.contracts.contains_key(definition.name())
    {
        let contract = crate::agents_config::read_contract(path)?;
        config
            .agents
            .contracts
            .insert(definition.name().to_string(), contract);
    }
    cap_iterations(definition, config);
    Ok(())
}

/// The run's iteration limit is at most the definition's `max_iterations`.
pub fn cap_iterations(definition: &AgentDefinition, config: &mut Config) {
    if let Some(max) = definition.settings.max_iterations {
        config.agents.max_iterations = config.agents.max_iterations.min(max);
    }
}

/// The model settings of `definition`'s runs: its tier's, with its `model` when it names one.
///
/// # Errors
/// As [`crate::config::LlmConfig::resolve`].
pub fn resolve_llm(
    config: &Config,
    definition: &AgentDefinition,
) -> Result<crate::config::ResolvedLlm> {
    let mut llm = config.llm.resolve(definition.spec.tier)?;
    if let Some(model) = &definition.settings.model {
        llm.settings.model = Some(model.clone());
    }
    Ok(llm)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project folder with `lsm.toml` = `toml` and the definition `lsm-agents/<name>.md`.
    fn project(toml: &str, name: &str, front: &str) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join(PROJECT_FOLDER);
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(
            agents.join(format!("{name}.md")),
            format!("+++\nname = \"{name}\"\ndescription = \"d\"\n{front}+++\nprompt\n"),
        )
        .unwrap();
        let file = dir.path().join("lsm.toml");
        std::fs::write(&file, toml).unwrap();
        let config = crate::config::load(Some(&file), &[]).unwrap();
        (dir, config)
    }

    #[test]
    fn a_definitions_iteration_limit_is_a_ceiling_under_the_configured_one() {
        let (_dir, mut config) = project(
            "[agents]\nmax_iterations = 9\n",
            "low",
            "max_iterations = 4\n",
        );
        let agents = catalog(&config).unwrap();
        apply_settings(agents.get("low").unwrap(), &mut config).unwrap();
        assert_eq!(config.agents.max_iterations, 4);
        config.agents.max_iterations = 40; // --max-iterations 40
        cap_iterations(agents.get("low").unwrap(), &mut config);
        assert_eq!(config.agents.max_iterations, 4, "a flag cannot lift it");

        let (_dir, mut config) = project(
            "[agents]\nmax_iterations = 3\n",
            "high",
            "max_iterations = 50\n",
        );
        let agents = catalog(&config).unwrap();
        apply_settings(agents.get("high").unwrap(), &mut config).unwrap();
        assert_eq!(
            config.agents.max_iterations, 3,
            "a definition cannot raise it"
        );
    }

    #[test]
    fn the_records_folder_cannot_be_the_definitions_folder() {
        let (_dir, config) = project("[agents]\nagents_folder = \"lsm-agents\"\n", "x", "");
        let e = catalog(&config).unwrap_err().to_string();
        assert!(e.contains("also [agents] agents_folder"), "{e}");
    }

    #[test]
    fn settings_may_name_a_defined_agent_and_an_unknown_one_is_named_with_its_line() {
        let (dir, config) = project(
            "[agents.extra_tools]\nreviewer = [\"bash\"]\n",
            "reviewer",
            "",
        );
        assert_eq!(config.agents.extra_tools_of("reviewer"), ["bash"]);
        let file = dir.path().join("lsm.toml");
        std::fs::write(&file, "\n[agents.extra_tools]\nreveiwer = [\"bash\"]\n").unwrap();
        let e = format!("{:#}", crate::config::load(Some(&file), &[]).unwrap_err());
        assert!(
            e.contains("lsm.toml:3") && e.contains("'reveiwer', which is not an agent"),
            "{e}"
        );
        assert!(
            e.contains("reviewer"),
            "the agents are listed, the defined one too: {e}"
        );
    }
}
