//! Where settings come from, in order of precedence (later wins): the built-in defaults, the
//! user file (`$XDG_CONFIG_HOME/lsm/config.toml`), the project file (the nearest `lsm.toml`
//! from the working directory upward), `--config FILE`, `LSM_*` environment variables, and
//! `-c key=value` flags; a command that starts a run puts its own options on top
//! ([`super::Options`]). Each layer is a TOML table with the origin of every value in it
//! ([`Origins`]); relative paths are resolved per layer (a file's against its folder, the
//! environment's and the flags' against the working directory), then the layers are merged.
//! An error is blamed on the one value that causes it: its file and line, its variable or
//! its flag.

use std::path::{Path, PathBuf};

use crate::error::Result;

use super::origins::{Origins, Source, TableLines};
use super::paths::{default_paths, resolve_table_paths};
use super::{Config, DEFAULT_CONFIG_FILE, TIERS, config_error};
use crate::error::ConfigError;

/// One layer: its values and where each came from.
#[derive(Debug, Clone)]
struct Layer {
    /// How messages name the layer as a whole.
    name: String,
    table: toml::Table,
    origins: Origins,
}

/// What [`load`] reads.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The working directory.
    pub cwd: PathBuf,
    /// The user file's path (read when it exists; `None`: no user file).
    pub user_file: Option<PathBuf>,
    /// `--config FILE`.
    pub explicit: Option<PathBuf>,
    /// The `LSM_*` variables that are settings ([`super::lsm_env`]).
    pub env: Vec<(String, String)>,
    /// `-c key=value` flags, in order.
    pub overrides: Vec<String>,
}

/// The user file: `$XDG_CONFIG_HOME/lsm/config.toml`, else `~/.config/lsm/config.toml`.
pub fn user_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("lsm").join("config.toml"))
}

/// The user's agent definitions folder: `agents/` beside the user file.
pub fn user_agents_folder() -> Option<PathBuf> {
    user_file().and_then(|f| f.parent().map(|d| d.join("agents")))
}

/// The project file: the nearest `lsm.toml` in `cwd` or a folder above it.
pub fn project_file(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .map(|dir| dir.join(DEFAULT_CONFIG_FILE))
        .find(|p| p.is_file())
}

/// Read every layer, merge them and check the result.
///
/// # Errors
/// A [`ConfigError`] naming the file and line, the variable or the flag at fault.
pub fn load(inputs: &Inputs) -> Result<Config> {
    let cwd = &inputs.cwd;
    let explicit = match &inputs.explicit {
        Some(p) => {
            let p = cwd.join(p);
            if !p.is_file() {
                return Err(config_error(format!(
                    "config file {} does not exist; check the path given to --config",
                    p.display()
                )));
            }
            Some(p)
        }
        None => None,
    };
    let project = project_file(cwd);
    let mut files: Vec<PathBuf> = Vec::new();
    if let Some(user) = inputs.user_file.as_ref().filter(|p| p.is_file()) {
        files.push(user.clone());
    }
    files.extend(project.clone());
    files.extend(explicit.clone());
    dedup_same_files(&mut files);
    // The project's root: where its records and index go by default.
    let root = explicit
        .as_ref()
        .or(project.as_ref())
        .and_then(|p| p.parent())
        .map_or_else(|| cwd.clone(), Path::to_path_buf);

    let mut layers = Vec::new();
    for file in &files {
        layers.push(file_layer(file)?);
    }
    let tiers_in_files: Vec<&str> = TIERS
        .iter()
        .copied()
        .filter(|t| layers.iter().any(|l| has_tier(&l.table, t)))
        .collect();
    layers.push(env_layer(&inputs.env, &tiers_in_files, cwd)?);
    layers.push(flag_layer(&inputs.overrides, cwd)?);
    for layer in &layers {
        check_alone(layer)?;
    }

    let mut table = toml::Table::new();
    let mut origins = Origins::default();
    for layer in &layers {
        merge_tables(&mut table, &layer.table);
        origins.merge(&layer.origins);
    }
    let agents_folder_note = default_paths(&mut table, &root);
    let mut config = typed(table).map_err(|e| {
        let names: Vec<&str> = layers.iter().map(|l| l.name.as_str()).collect();
        config_error(format!(
            "{e:#} (the settings of {} together)",
            names.join(", ")
        ))
    })?;
    if let Some(note) = agents_folder_note {
        origins.set(
            vec!["agents".into(), "agents_folder".into()],
            Source::Default { note: Some(note) },
        );
    }
    check_llm_seconds(&config, &origins)?;
    check_agent_names(&config, &origins, &root)?;
    config.source = explicit.or(project);
    config.files = files;
    config.root = root;
    config.origins = origins;
    Ok(config)
}

/// The same file named twice (the project file given again with `--config`) is one layer.
fn dedup_same_files(files: &mut Vec<PathBuf>) {
    let mut seen = Vec::new();
    files.retain(|f| {
        let id = std::fs::canonicalize(f).unwrap_or_else(|_| f.clone());
        if seen.contains(&id) {
            false
        } else {
            seen.push(id);
            true
        }
    });
}

fn has_tier(table: &toml::Table, tier: &str) -> bool {
    table
        .get("llm")
        .and_then(toml::Value::as_table)
        .is_some_and(|llm| llm.contains_key(tier))
}

/// A file: its table (tiers lifted, paths resolved against its folder) and the line of every
/// key in it.
fn file_layer(path: &Path) -> Result<Layer> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| config_error(format!("cannot read {}: {e}", path.display())))?;
    let spanned = toml::de::DeTable::parse(&text).map_err(|e| {
        let at = e
            .span()
            .map(|s| format!(":{}", line_of(&text, s.start)))
            .unwrap_or_default();
        config_error(format!(
            "{}{at} is not valid TOML: {}",
            path.display(),
            e.message()
        ))
    })?;
    let mut table: toml::Table = text
        .parse()
        .map_err(|e| config_error(format!("{} is not valid TOML: {e}", path.display())))?;
    let mut origins = Origins::default();
    let mut tables = TableLines::new();
    record_lines(
        spanned.get_ref(),
        &mut Vec::new(),
        &text,
        path,
        &mut origins,
        &mut tables,
    );
    super::lift_llm_tiers(&mut table).map_err(|e| {
        let at = tables
            .get(&["llm".to_string(), "tiers".to_string()][..])
            .map_or_else(|| path.display().to_string(), ToString::to_string);
        config_error(format!("{at}: {e:#}"))
    })?;
    // `[llm.tiers.<tier>]` keys now live at `[llm.<tier>]`: move their origins along.
    let lifted: Vec<(Vec<String>, Source)> = origins
        .0
        .iter()
        .filter(|(p, _)| p.len() > 2 && p[0] == "llm" && p[1] == "tiers")
        .map(|(p, s)| {
            let mut moved = vec!["llm".to_string()];
            moved.extend(p[2..].iter().cloned());
            (moved, s.clone())
        })
        .collect();
    for (p, s) in lifted {
        origins.0.insert(p, s);
    }
    let base = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    resolve_table_paths(&mut table, &base);
    Ok(Layer {
        name: path.display().to_string(),
        table,
        origins,
    })
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Record the line of every setting of `table` under `prefix` in `origins`, and of every
/// table in `tables`.
fn record_lines(
    table: &toml::de::DeTable<'_>,
    prefix: &mut Vec<String>,
    text: &str,
    path: &Path,
    origins: &mut Origins,
    tables: &mut TableLines,
) {
    for (key, value) in table {
        prefix.push(key.get_ref().to_string());
        let source = Source::File {
            path: path.to_path_buf(),
            line: line_of(text, key.span().start),
        };
        if let toml::de::DeValue::Table(inner) = value.get_ref() {
            tables.insert(prefix.clone(), source);
            record_lines(inner, prefix, text, path, origins, tables);
        } else {
            origins.0.insert(prefix.clone(), source);
        }
        prefix.pop();
    }
}

/// The environment: `LSM_<SECTION>_<KEY>` variables (see [`super::apply_env_overrides`]),
/// relative paths resolved against the working directory.
fn env_layer(env: &[(String, String)], tiers_in_files: &[&str], cwd: &Path) -> Result<Layer> {
    let mut table = toml::Table::new();
    let mut origins = Origins::default();
    super::apply_env_overrides(&mut table, env, tiers_in_files, &mut |path, var| {
        origins.set(
            path,
            Source::Env {
                var: var.to_string(),
            },
        );
    })?;
    resolve_table_paths(&mut table, cwd);
    Ok(Layer {
        name: "the environment".into(),
        table,
        origins,
    })
}

/// `-c key=value` flags: the dotted key's value is read as TOML, else as a plain string.
fn flag_layer(overrides: &[String], cwd: &Path) -> Result<Layer> {
    let mut table = toml::Table::new();
    let mut origins = Origins::default();
    for flag in overrides {
        let Some((key, value)) = flag.split_once('=') else {
            return Err(config_error(format!(
                "-c {flag}: use -c KEY=VALUE with a dotted key, e.g. -c agents.max_tokens_budget=5000"
            )));
        };
        let path: Vec<String> = key.trim().split('.').map(str::to_string).collect();
        if path.iter().any(String::is_empty) || path.len() < 2 {
            return Err(config_error(format!(
                "-c {flag}: '{}' is not a key; use SECTION.KEY, e.g. llm.model or agents.memory.enabled",
                key.trim()
            )));
        }
        let Some((last, parents)) = path.split_last() else {
            continue;
        };
        let mut at = &mut table;
        for part in parents {
            let entry = at
                .entry(part.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let toml::Value::Table(inner) = entry else {
                return Err(config_error(format!(
                    "-c {flag}: {part} was set to a value by an earlier -c, not a table"
                )));
            };
            at = inner;
        }
        at.insert(last.clone(), super::parse_value(value));
        origins.set(path, Source::Flag { flag: flag.clone() });
    }
    super::lift_llm_tiers(&mut table)?;
    resolve_table_paths(&mut table, cwd);
    Ok(Layer {
        name: "the -c flags".into(),
        table,
        origins,
    })
}

/// A layer must make sense on its own: if it does not, find the one value at fault — the
/// first (in file order) that fails alone — and name its origin.
fn check_alone(layer: &Layer) -> Result<()> {
    let Err(whole) = typed(layer.table.clone()) else {
        return Ok(());
    };
    let mut leaves: Vec<(&Vec<String>, &Source)> = layer
        .origins
        .0
        .iter()
        .filter(|(p, _)| leaf_at(&layer.table, p).is_some())
        .collect();
    leaves.sort_by_key(|(_, s)| match s {
        Source::File { line, .. } => *line,
        _ => 0,
    });
    for (path, source) in leaves {
        let Some(value) = leaf_at(&layer.table, path) else {
            continue;
        };
        let mut alone = toml::Table::new();
        insert_at(&mut alone, path, value.clone());
        if let Err(e) = typed(alone) {
            return Err(config_error(format!(
                "{source}: {} — {e:#}",
                path.join(".")
            )));
        }
    }
    Err(config_error(format!("{}: {whole:#}", layer.name)))
}

/// The value at `path` when it is not a table (a setting, not a section).
fn leaf_at<'a>(table: &'a toml::Table, path: &[String]) -> Option<&'a toml::Value> {
    let (last, parents) = path.split_last()?;
    let mut at = table;
    for part in parents {
        at = at.get(part)?.as_table()?;
    }
    at.get(last).filter(|v| !v.is_table())
}

fn insert_at(table: &mut toml::Table, path: &[String], value: toml::Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = table;
    for part in parents {
        let entry = at
            .entry(part.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let toml::Value::Table(inner) = entry else {
            return;
        };
        at = inner;
    }
    at.insert(last.clone(), value);
}

/// `later` over `base`: tables merge key by key, anything else replaces.
fn merge_tables(base: &mut toml::Table, later: &toml::Table) {
    for (key, value) in later {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(l)) => merge_tables(b, l),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The typed configuration of `table`: `[agents.memory]` split off (the harness's settings
/// refuse keys they do not know), deserialized, MCP servers, hooks, compaction and the
/// conductor's section checked.
fn typed(mut table: toml::Table) -> Result<Config> {
    let memory = super::sections::split_memory_config(&mut table)?;
    let mut config: Config = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError(e.message().to_string()))?;
    config.memory = memory;
    config
        .mcp
        .validate()
        .map_err(|e| config_error(e.to_string()))?;
    config
        .hooks
        .validate()
        .map_err(|e| config_error(e.to_string()))?;
    config
        .agents
        .compaction
        .validate()
        .map_err(|e| config_error(e.to_string()))?;
    config.conductor.validate()?;
    config.store.validate()?;
    Ok(config)
}

/// The agents `[agents.extra_tools]`, `[agents.contracts]` and `[conductor.capabilities]`
/// name must exist: a built-in, or a definition file of the project or the user (see
/// `crate::agent_defs`). The error names the setting's file and line.
fn check_agent_names(config: &Config, origins: &Origins, root: &Path) -> Result<()> {
    let mut known: Vec<String> = lsm_agents::definition::builtin()
        .iter()
        .map(|a| a.name().to_string())
        .collect();
    let mut folders = vec![crate::agent_files::project_folder(root)];
    folders.extend(user_agents_folder());
    let mut checked = false;
    let mut is_known = |name: &str| {
        if !checked && !known.iter().any(|k| k == name) {
            known.extend(crate::agent_files::defined_names(&folders));
            checked = true;
        }
        known.iter().any(|k| k == name)
    };
    let names = config
        .agents
        .extra_tools
        .keys()
        .map(|a| ("agents", "extra_tools", a.as_str(), a.as_str()))
        .chain(
            config
                .agents
                .contracts
                .keys()
                .map(|a| ("agents", "contracts", a.as_str(), a.as_str())),
        )
        .chain(
            config
                .conductor
                .capabilities
                .iter()
                .map(|(c, a)| ("conductor", "capabilities", c.as_str(), a.agent_name(c))),
        );
    for (section, table, key, agent) in names {
        let capability = table == "capabilities";
        if is_known(agent) && !(capability && agent == "conductor") {
            continue;
        }
        let source = origins.of(&[section.to_string(), table.to_string(), key.to_string()]);
        let what = if capability {
            format!(
                "{key} = \"{agent}\": not an agent a worker can run (the conductor cannot be one)"
            )
        } else {
            format!("names '{agent}', which is not an agent")
        };
        let mut agents: Vec<String> = Vec::new();
        for k in crate::agent_files::defined_names(&folders)
            .into_iter()
            .chain(
                lsm_agents::definition::builtin()
                    .iter()
                    .map(|a| a.name().to_string()),
            )
        {
            let excluded = capability && k == "conductor";
            if !excluded && !agents.contains(&k) {
                agents.push(k);
            }
        }
        return Err(config_error(format!(
            "{source}: [{section}.{table}] {what}; the agents are: {} (`lsm agent list`)",
            agents.join(", ")
        )));
    }
    Ok(())
}

/// `[llm]` durations must be positive numbers of seconds; say which value is not.
fn check_llm_seconds(config: &Config, origins: &Origins) -> Result<()> {
    let llm = &config.llm;
    let mut tables: Vec<(&str, [Option<f64>; 3])> = vec![(
        "llm",
        [
            llm.connect_timeout_seconds,
            llm.read_timeout_seconds,
            llm.retry_max_delay_seconds,
        ],
    )];
    for (name, tier) in [
        ("llm.quick", &llm.quick),
        ("llm.normal", &llm.normal),
        ("llm.complex", &llm.complex),
    ] {
        if let Some(t) = tier {
            tables.push((
                name,
                [
                    t.connect_timeout_seconds,
                    t.read_timeout_seconds,
                    t.retry_max_delay_seconds,
                ],
            ));
        }
    }
    const KEYS: [&str; 3] = [
        "connect_timeout_seconds",
        "read_timeout_seconds",
        "retry_max_delay_seconds",
    ];
    for (table, values) in tables {
        for (key, value) in KEYS.iter().zip(values) {
            if let Some(v) = value
                && !(v.is_finite() && v > 0.0)
            {
                let dotted = format!("{table}.{key}");
                return Err(config_error(format!(
                    "{}: {dotted} = {v} must be a positive number of seconds",
                    origins.of_key(&dotted)
                )));
            }
        }
    }
    Ok(())
}
