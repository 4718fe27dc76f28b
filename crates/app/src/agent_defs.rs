//! The [`Catalog`] of a configuration: the built-in agents, then the user's definition files,
//! then the project's (found by [`crate::agent_files`]), each checked against the tools the
//! configuration registers; and what a definition asks of its run's configuration.
//!
//! A project definition replaces a user one of the same name, and both replace a built-in.
//! Every file is checked before any run starts: a file that does not parse, or that names a
//! tool this configuration does not register, stops the command with the file and line.

use std::path::Path;

use crate::error::Result;
use lsm_agents::definition::{self, AgentDefinition, DefinitionSource};
use lsm_agents::{Catalog, DefinitionError};
use serde_json::{Value, json};

use crate::agent_files::{PROJECT_FOLDER, error_at, layer, project_folder};
use crate::config::Config;
use crate::error::usage;

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
    let mut names = crate::tools::known_tool_names(config);
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

/// What `definition` asks of its run, applied to `config` under the command's options
/// ([`crate::config::Config::with_options`]), which win: its stop mode (unless an option
/// set one), its work items, its contract (unless `[agents.contracts]` names one for the
/// agent), and its iteration ceiling, which holds under `--max-iterations` too.
///
/// # Errors
/// The definition's contract file cannot be read.
pub fn apply_settings(definition: &AgentDefinition, config: &mut Config) -> Result<()> {
    let settings = &definition.settings;
    let option = |key: &str| matches!(config.origin(key), crate::config::Source::Option { .. });
    if let Some(mode) = settings.stop_mode
        && !option("agents.stop_mode")
    {
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
        let contract = crate::config::read_contract(path)?;
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

/// One tool an agent's runs are offered and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferedTool {
    /// The tool.
    pub name: String,
    /// Where it comes from: the built-in card, a definition, `[agents.extra_tools]` (with
    /// the setting's source).
    pub from: String,
}

/// The tools `definition`'s runs are offered under `config`: its own, and what `[agents.
/// extra_tools]` adds (an MCP server's `mcp__<server>__*` listed tool by tool: the servers
/// are started once, the first time an agent needs them, their tools kept in `mcp`; a server
/// that fails is told to `notify`).
pub fn offered_tools(
    config: &Config,
    definition: &AgentDefinition,
    mcp: &std::cell::OnceCell<Vec<String>>,
    notify: &dyn Fn(crate::notice::Notice),
) -> Vec<OfferedTool> {
    let name = definition.name();
    let own = match definition.source {
        DefinitionSource::Builtin => "built-in card".to_string(),
        ref other => format!("definition ({})", other.kind()),
    };
    let mut tools: Vec<OfferedTool> = definition
        .spec
        .tools
        .iter()
        .map(|t| OfferedTool {
            name: t.clone(),
            from: own.clone(),
        })
        .collect();
    let extra = config.agents.extra_tools_of(name);
    if !extra.is_empty() {
        let origin = config.origin(&format!("agents.extra_tools.{name}"));
        let from = format!("[agents.extra_tools] ({origin})");
        let wildcard = extra.iter().any(|t| t.ends_with('*'));
        let expanded = if wildcard {
            lsm_mcp::naming::expand(
                extra,
                mcp.get_or_init(|| crate::tools::mcp_tool_names(config, notify))
                    .iter()
                    .map(String::as_str),
            )
        } else {
            extra
        };
        for tool in expanded {
            if !tools.iter().any(|t| t.name == tool) {
                tools.push(OfferedTool {
                    name: tool,
                    from: from.clone(),
                });
            }
        }
    }
    tools
}

/// One setting of a run and where its value comes from.
fn limit(value: Value, source: String) -> Value {
    json!({"value": value, "source": source})
}

/// The limits of `definition`'s runs under `config`, each `{value, source}`.
pub fn limits(config: &Config, definition: &AgentDefinition) -> Vec<(&'static str, Value)> {
    let settings = &definition.settings;
    let configured = config.agents.max_iterations;
    let iterations = match settings.max_iterations {
        Some(max) if max < configured => limit(
            json!(max),
            format!(
                "definition (its ceiling; [agents] max_iterations is {configured}, {})",
                config.origin("agents.max_iterations")
            ),
        ),
        _ => limit(
            json!(configured),
            format!(
                "[agents] max_iterations ({})",
                config.origin("agents.max_iterations")
            ),
        ),
    };
    let stop_mode = match settings.stop_mode {
        Some(mode) => limit(json!(mode), "definition".into()),
        None => limit(
            json!(config.agents.stop_mode),
            format!("[agents] stop_mode ({})", config.origin("agents.stop_mode")),
        ),
    };
    let work_items = if settings.work_items {
        limit(json!(true), "definition".into())
    } else {
        limit(
            json!(config.agents.work_items),
            format!(
                "[agents] work_items ({})",
                config.origin("agents.work_items")
            ),
        )
    };
    let name = definition.name();
    let contract = if config.agents.contracts.contains_key(name) {
        limit(
            json!(format!("[agents.contracts.{name}]")),
            config
                .origin(&format!("agents.contracts.{name}"))
                .to_string(),
        )
    } else {
        match &settings.contract {
            Some(path) => limit(json!(path), "definition".into()),
            None => limit(Value::Null, "none".into()),
        }
    };
    let rounds = if definition.repeats() {
        match settings.max_rounds {
            Some(n) => limit(json!(n), "definition".into()),
            None => limit(json!(lsm_agents::DEFAULT_MAX_ROUNDS), "default".into()),
        }
    } else {
        limit(Value::Null, "no phase repeats".into())
    };
    vec![
        ("max_iterations", iterations),
        ("max_rounds", rounds),
        ("stop_mode", stop_mode),
        ("work_items", work_items),
        ("contract", contract),
        (
            "max_tokens_budget",
            limit(
                json!(config.agents.max_tokens_budget),
                format!(
                    "[agents] max_tokens_budget ({}; a definition cannot change it)",
                    config.origin("agents.max_tokens_budget")
                ),
            ),
        ),
        (
            "max_cost_usd",
            limit(
                json!(config.agents.max_cost_usd),
                format!(
                    "[agents] max_cost_usd ({}; a definition cannot change it)",
                    config.origin("agents.max_cost_usd")
                ),
            ),
        ),
    ]
}

/// The project's instruction files (`AGENTS.md` and the like) a run's standing context
/// carries under `[agents.context]` (none when `project_instructions` is off).
///
/// # Errors
/// What would stop a run: a file that cannot be read.
pub fn project_instructions(
    config: &Config,
) -> Result<Vec<lsm_harness::InstructionFile>, lsm_harness::ContextError> {
    let context = &config.agents.context;
    if !context.project_instructions {
        return Ok(Vec::new());
    }
    lsm_harness::project_instructions(&config.root, context.max_instruction_bytes)
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
