//! `lsm agent list`, `lsm agent show NAME` and `lsm agent check FILE`: the agents a project
//! can run — built-in, the user's and the project's definition files — with where each comes
//! from and what its runs are offered under this configuration.

use std::cell::OnceCell;
use std::path::Path;

use anyhow::Result;
use lsm_agents::definition::{AgentDefinition, DefinitionSource, PhaseDefinition, Program};
use serde_json::{Value, json};

use crate::exit;
use crate::terminal::notices;
use crate::terminal::text::{for_stdout, one_line};
use lsm_app::agent_defs::{OfferedTool, limits, offered_tools};
use lsm_app::config::Config;

/// Loads the configuration and the catalog, or prints the error and gives the exit code.
fn load(cfg: &lsm_app::config::ConfigArgs) -> Result<(Config, lsm_agents::Catalog), u8> {
    let fail = |e: anyhow::Error| {
        eprintln!(
            "error: {}",
            crate::terminal::text::terminal_text(&lsm_app::secrets::clean(&format!("{e:#}")))
        );
        exit::USAGE
    };
    let config = cfg.load().map_err(|e| fail(e.into()))?;
    let catalog = lsm_app::agent_defs::catalog(&config).map_err(|e| fail(e.into()))?;
    Ok((config, catalog))
}

fn tier_of(definition: &AgentDefinition) -> String {
    serde_json::to_value(definition.spec.tier)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn source_json(source: &DefinitionSource) -> Value {
    json!({"kind": source.kind(), "path": source.path()})
}

/// `lsm agent list [--json]`: every agent with its tier, input, source, description and the
/// tools its runs are offered under the configuration.
pub fn list(cfg: &lsm_app::config::ConfigArgs, as_json: bool) -> u8 {
    let (config, catalog) = match load(cfg) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let mcp = OnceCell::new();
    let rows: Vec<(&AgentDefinition, Vec<String>)> = catalog
        .iter()
        .map(|d| {
            let tools = offered_tools(&config, d, &mcp, &notices::show)
                .into_iter()
                .map(|t| t.name)
                .collect();
            (d, tools)
        })
        .collect();
    if as_json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|(d, tools)| {
                json!({
                    "name": d.name(),
                    "description": d.spec.description,
                    "tier": d.spec.tier,
                    "model": d.settings.model,
                    "input": d.spec.input,
                    "tools": tools,
                    "source": d.source.kind(),
                    "path": d.source.path(),
                    "overrides": d.overrides.iter().map(source_json).collect::<Vec<_>>(),
                    "phases": d.phases().iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
                })
            })
            .collect();
        crate::terminal::output::print_json(&Value::Array(rows).to_string());
        return exit::OK;
    }
    let width = rows
        .iter()
        .map(|(d, _)| d.name().len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "{:<width$}  {:<7}  {:<5}  {:<8}  DESCRIPTION",
        "NAME", "TIER", "INPUT", "SOURCE"
    );
    for (d, tools) in &rows {
        println!(
            "{:<width$}  {:<7}  {:<5}  {:<8}  {}",
            d.name(),
            tier_of(d),
            d.spec.input.as_str(),
            d.source.kind(),
            one_line(d.spec.description.clone())
        );
        println!("{:<width$}  tools: {}", "", tools.join(", "));
        if let Some(path) = d.source.path() {
            let overrides: Vec<String> = d.overrides.iter().map(|o| o.kind().to_string()).collect();
            let note = if overrides.is_empty() {
                String::new()
            } else {
                format!(" (overrides the {} one)", overrides.join(", then the "))
            };
            println!(
                "{:<width$}  file: {}{note}",
                "",
                for_stdout(&path.display().to_string())
            );
        }
    }
    println!(
        "\nRun one with: lsm agent run <name> --task \"...\" (or --topic \"...\" for topic agents)"
    );
    println!(
        "Define your own in {}/<name>.md (see docs/AGENTS.md); `lsm agent show <name>` prints one.",
        lsm_app::agent_files::PROJECT_FOLDER
    );
    exit::OK
}

fn phase_json(p: &PhaseDefinition) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
}

/// `lsm agent show NAME [--json]`: the effective prompt, phases, tools and limits of one
/// agent, each with its source.
pub fn show(cfg: &lsm_app::config::ConfigArgs, name: &str, as_json: bool) -> u8 {
    let (config, catalog) = match load(cfg) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let definition = match lsm_app::agent_defs::find(&catalog, name) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e:#}");
            return exit::USAGE;
        }
    };
    let tools = offered_tools(&config, definition, &OnceCell::new(), &notices::show);
    let limits = limits(&config, definition);
    let model = definition.settings.model.clone();
    let context = &config.agents.context;
    let instructions = match lsm_app::agent_defs::project_instructions(&config) {
        Ok(files) => files,
        Err(e) => {
            eprintln!(
                "error: {} (a run would stop on it; [agents.context] project_instructions = false switches them off)",
                crate::terminal::text::terminal_text(&lsm_app::secrets::clean(&e.to_string()))
            );
            return exit::USAGE;
        }
    };
    if as_json {
        let doc = json!({
            "name": definition.name(),
            "description": definition.spec.description,
            "source": source_json(&definition.source),
            "overrides": definition.overrides.iter().map(source_json).collect::<Vec<_>>(),
            "tier": definition.spec.tier,
            "model": model,
            "input": definition.spec.input,
            "program": match definition.program { Program::Phases(_) => "phases", Program::Code => "code" },
            "tools": tools.iter().map(|t| json!({"name": t.name, "source": t.from})).collect::<Vec<_>>(),
            "limits": limits.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<serde_json::Map<_, _>>(),
            "phases": definition.phases().iter().map(phase_json).collect::<Vec<_>>(),
            "system_prompt": definition.spec.system_prompt,
            "instructions": instructions,
            "environment": context.environment,
            "nested_instructions": context.nested_instructions,
        });
        crate::terminal::output::print_json(&doc.to_string());
        return exit::OK;
    }
    print_definition(definition, &tools, &limits);
    if !context.project_instructions {
        println!("project instructions: off ([agents.context] project_instructions)");
    }
    for file in &instructions {
        println!(
            "project instructions: {} ({} bytes{}) {}",
            file.name,
            file.bytes,
            if file.truncated {
                ", cut to the cap"
            } else {
                ""
            },
            for_stdout(&file.path.display().to_string())
        );
        for line in file.text.lines() {
            println!("  {}", for_stdout(line));
        }
    }
    println!(
        "environment block: {}; nested AGENTS.md just in time: {}",
        if context.environment { "on" } else { "off" },
        if context.nested_instructions {
            "on"
        } else {
            "off"
        }
    );
    exit::OK
}

fn print_definition(definition: &AgentDefinition, tools: &[OfferedTool], limits: &[(&str, Value)]) {
    let shown = |s: &str| for_stdout(s).into_owned();
    println!("name: {}", definition.name());
    println!("description: {}", shown(&definition.spec.description));
    let overrides: Vec<String> = definition
        .overrides
        .iter()
        .map(ToString::to_string)
        .collect();
    println!(
        "source: {}{}",
        shown(&definition.source.to_string()),
        if overrides.is_empty() {
            String::new()
        } else {
            format!(" (overrides: {})", shown(&overrides.join("; ")))
        }
    );
    println!("tier: {}", tier_of(definition));
    if let Some(model) = &definition.settings.model {
        println!("model: {} (definition)", shown(model));
    }
    println!("input: {}", definition.spec.input.as_str());
    println!("limits:");
    for (key, v) in limits {
        let value = match &v["value"] {
            Value::Null => "none".to_string(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        println!(
            "  {key}: {} — {}",
            shown(&value),
            shown(v["source"].as_str().unwrap_or_default())
        );
    }
    println!("tools:");
    for t in tools {
        println!("  {} — {}", t.name, shown(&t.from));
    }
    match &definition.program {
        Program::Code => println!("phases: built into the program (code)"),
        Program::Phases(phases) => {
            println!("phases:");
            for (i, p) in phases.iter().enumerate() {
                println!("  {}. {}", i + 1, phase_line(p));
                for line in p.prompt.source().lines() {
                    println!("     | {}", shown(line));
                }
            }
        }
    }
    println!("system prompt:");
    for line in definition.spec.system_prompt.lines() {
        println!("  {}", shown(line));
    }
}

/// A phase's settings in one line.
fn phase_line(p: &PhaseDefinition) -> String {
    let mut parts = vec![p.name.clone()];
    if let Some(list) = &p.for_each {
        parts.push(format!("for each item of {list} (at most {})", p.max_items));
    }
    parts.push(match &p.tools {
        None => "tools: all of the agent's".to_string(),
        Some(t) if t.is_empty() => "tools: none".to_string(),
        Some(t) => format!("tools: {}", t.join(", ")),
    });
    parts.push(match &p.context {
        None => "context: primary".to_string(),
        Some(c) => format!("context: {}", c.source()),
    });
    if !p.continue_context {
        parts.push("fresh context".into());
    }
    parts.push(match p.max_iterations {
        Some(n) => format!("max_iterations: {n}"),
        None => "max_iterations: the run's".into(),
    });
    if let Some(save) = &p.save_as {
        parts.push(format!("saved as {}", save.source()));
    }
    if p.always {
        parts.push("runs even after an early stop".into());
    }
    if p.completes_task {
        parts.push("completes the task".into());
    }
    if let Some(r) = &p.repeat {
        parts.push(format!("repeats from {} over its {}", r.from, r.items));
    }
    parts.join("; ")
}

/// `lsm agent check FILE [--json]`: the validation a run does, on one file: exit 0 when it
/// is a valid definition under this configuration, 2 with the file and line when not.
pub fn check(cfg: &lsm_app::config::ConfigArgs, file: &Path, as_json: bool) -> u8 {
    let result = cfg.load().map_err(anyhow::Error::from).and_then(|config| {
        let def = lsm_app::agent_files::read(
            file,
            DefinitionSource::Project {
                path: file.to_path_buf(),
            },
        )?;
        def.check_tools(&lsm_app::agent_defs::registered_tools(&config))?;
        Ok(def)
    });
    match result {
        Ok(def) => {
            let phases: Vec<&str> = def.phases().iter().map(|p| p.name.as_str()).collect();
            if as_json {
                crate::terminal::output::print_json(
                    &json!({"ok": true, "file": file, "name": def.name(), "phases": phases, "tools": def.spec.tools})
                        .to_string(),
                );
            } else {
                println!(
                    "ok: {} defines agent '{}' ({} phase(s): {}; tools: {})",
                    for_stdout(&file.display().to_string()),
                    def.name(),
                    phases.len(),
                    phases.join(", "),
                    if def.spec.tools.is_empty() {
                        "none".to_string()
                    } else {
                        def.spec.tools.join(", ")
                    }
                );
            }
            exit::OK
        }
        Err(e) => {
            let message =
                crate::terminal::text::terminal_text(&lsm_app::secrets::clean(&format!("{e:#}")))
                    .into_owned();
            if as_json {
                let located = e.downcast_ref::<lsm_agents::DefinitionError>();
                crate::terminal::output::print_json(
                    &json!({
                        "ok": false,
                        "file": file,
                        "line": located.map(|d| d.line),
                        "error": located.map_or(message.clone(), |d| d.message.clone()),
                    })
                    .to_string(),
                );
            }
            eprintln!("error: {message}");
            exit::USAGE
        }
    }
}
