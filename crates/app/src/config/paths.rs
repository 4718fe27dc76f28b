//! The settings that are paths: the project's defaults under its root (`.lsm/agents`,
//! `.lsm/kb`, or an existing `Agents/`), and relative paths resolved against the folder of
//! the layer that gave them.

use std::path::Path;

/// The project's defaults that are paths: `.lsm/kb` for the index, `.lsm/agents` for the
/// agents' workspaces — unless the project already has an `Agents/` folder (the old default)
/// and no `.lsm/agents`, which keeps being used so its runs, memories and artifacts stay where
/// they are. Returns the note for `lsm config show` when that happens.
pub(super) fn default_paths(table: &mut toml::Table, root: &Path) -> Option<String> {
    let section = |table: &mut toml::Table, name: &str| -> Option<toml::Table> {
        match table.remove(name) {
            Some(toml::Value::Table(t)) => Some(t),
            None => Some(toml::Table::new()),
            Some(other) => {
                table.insert(name.to_string(), other);
                None
            }
        }
    };
    let mut note = None;
    if let Some(mut agents) = section(table, "agents") {
        if !agents.contains_key("agents_folder") {
            let legacy = root.join(LEGACY_AGENTS_FOLDER);
            let folder = if legacy.is_dir() && !root.join(DEFAULT_AGENTS_FOLDER).exists() {
                note = Some(format!(
                    "the old default {LEGACY_AGENTS_FOLDER}/, which exists here; move it to {DEFAULT_AGENTS_FOLDER} or set [agents] agents_folder"
                ));
                legacy
            } else {
                root.join(DEFAULT_AGENTS_FOLDER)
            };
            agents.insert(
                "agents_folder".into(),
                toml::Value::String(folder.display().to_string()),
            );
        }
        table.insert("agents".into(), toml::Value::Table(agents));
    }
    if let Some(mut kb) = section(table, "kb") {
        if !kb.contains_key("index_dir") {
            kb.insert(
                "index_dir".into(),
                toml::Value::String(root.join(DEFAULT_INDEX_DIR).display().to_string()),
            );
        }
        table.insert("kb".into(), toml::Value::Table(kb));
    }
    note
}

/// The agents folder by default, relative to the project's root.
pub const DEFAULT_AGENTS_FOLDER: &str = ".lsm/agents";
/// The agents folder before `.lsm/agents`: still used where it exists.
pub const LEGACY_AGENTS_FOLDER: &str = "Agents";
/// The knowledge base's index by default, relative to the project's root.
pub const DEFAULT_INDEX_DIR: &str = ".lsm/kb";

/// Resolve the relative paths among `table`'s settings against `base`: folders and files,
/// `scripted:<file>` provider specs, and MCP server programs given by a relative path
/// (`./tools/server`; a bare name is looked up on `PATH`).
pub(super) fn resolve_table_paths(table: &mut toml::Table, base: &Path) {
    let join = |s: &str| -> Option<String> {
        let p = Path::new(s);
        (p.is_relative() && !s.is_empty()).then(|| base.join(p).display().to_string())
    };
    let fix = |v: &mut toml::Value| match v {
        toml::Value::String(s) => {
            if let Some(j) = join(s) {
                *s = j;
            }
        }
        toml::Value::Array(items) => {
            for item in items {
                if let toml::Value::String(s) = item
                    && let Some(j) = join(s)
                {
                    *s = j;
                }
            }
        }
        _ => {}
    };
    let fix_spec = |v: &mut toml::Value| {
        if let toml::Value::String(s) = v
            && let Some(file) = s.strip_prefix("scripted:")
            && let Some(j) = join(file)
        {
            *s = format!("scripted:{j}");
        }
    };
    // Plain paths.
    for path in [
        &["agents", "agents_folder"][..],
        &["agents", "memory", "project_db"],
        &["agents", "memory", "global_db"],
        &["sandbox", "allowed_read_paths"],
        &["sandbox", "allowed_write_paths"],
        &["sandbox", "working_dir"],
        &["kb", "index_dir"],
        &["kb", "embedder", "model_dir"],
        &["llm", "model_path"],
        &["llm", "quick", "model_path"],
        &["llm", "normal", "model_path"],
        &["llm", "complex", "model_path"],
    ] {
        if let Some(v) = value_mut(table, path) {
            fix(v);
        }
    }
    for path in [
        &["llm", "provider"][..],
        &["llm", "quick", "provider"],
        &["llm", "normal", "provider"],
        &["llm", "complex", "provider"],
    ] {
        if let Some(v) = value_mut(table, path) {
            fix_spec(v);
        }
    }
    if let Some(servers) = value_mut(table, &["mcp", "servers"]).and_then(|v| v.as_table_mut()) {
        for (_, server) in servers.iter_mut() {
            if let Some(toml::Value::String(command)) =
                server.as_table_mut().and_then(|s| s.get_mut("command"))
                && command.contains('/')
                && let Some(j) = join(command.as_str())
            {
                *command = j;
            }
        }
    }
}

fn value_mut<'a>(table: &'a mut toml::Table, path: &[&str]) -> Option<&'a mut toml::Value> {
    let (last, parents) = path.split_last()?;
    let mut at = table;
    for part in parents {
        at = at.get_mut(*part)?.as_table_mut()?;
    }
    at.get_mut(*last)
}
