//! `lsm config show [--json]`: every effective setting, with where its value came from.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{Config, Source};

/// One effective setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Setting {
    /// Its dotted key (`agents.max_tokens_budget`).
    pub key: String,
    /// Its value (`null`: unset).
    pub value: Value,
    /// Where it came from, as a person reads it (`default`, `/p/lsm.toml:3`, `environment
    /// variable LSM_…`, `flag -c …`).
    pub source: String,
    /// The same, as data.
    pub origin: Source,
}

/// Every setting of `config` as a JSON object, sections first (the shape of `lsm.toml`).
pub fn effective(config: &Config) -> Value {
    let to = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    let mut agents = match to(serde_json::to_value(&config.agents.harness)) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    agents.insert("max_concurrent".into(), json!(config.agents.max_concurrent));
    agents.insert(
        "log_stream_queue_limit".into(),
        json!(config.agents.log_stream_queue_limit),
    );
    agents.insert(
        "extra_tools".into(),
        to(serde_json::to_value(&config.agents.extra_tools)),
    );
    agents.insert(
        "interaction".into(),
        to(serde_json::to_value(&config.agents.interaction)),
    );
    agents.insert("memory".into(), to(serde_json::to_value(&config.memory)));
    json!({
        "agents": agents,
        "sandbox": to(serde_json::to_value(&config.sandbox)),
        "llm": to(serde_json::to_value(&config.llm)),
        "kb": to(serde_json::to_value(&config.kb)),
        "mcp": to(serde_json::to_value(&config.mcp)),
        "stall": to(serde_json::to_value(config.stall)),
        "hooks": to(serde_json::to_value(&config.hooks)),
        "store": to(serde_json::to_value(&config.store)),
    })
}

/// Every setting of `config`, one per leaf: a scalar, an array, or an empty table.
pub fn settings(config: &Config) -> Vec<Setting> {
    let mut out = Vec::new();
    flatten(&effective(config), &mut Vec::new(), config, &mut out);
    out
}

fn flatten(value: &Value, path: &mut Vec<String>, config: &Config, out: &mut Vec<Setting>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                path.push(k.clone());
                flatten(v, path, config, out);
                path.pop();
            }
        }
        _ => {
            let origin = config.origins.of(path);
            out.push(Setting {
                key: path.join("."),
                value: value.clone(),
                source: origin.to_string(),
                origin,
            });
        }
    }
}

/// The text form: the files read, then `key = value  # source`, one setting a line.
pub fn text(config: &Config) -> String {
    let mut s = String::new();
    if config.files.is_empty() {
        s.push_str("# no configuration file read (`lsm init` writes lsm.toml)\n");
    }
    for f in &config.files {
        s.push_str(&format!("# read {}\n", f.display()));
    }
    s.push_str(&format!("# project root {}\n", config.root.display()));
    let rows: Vec<(String, String)> = settings(config)
        .into_iter()
        .map(|set| {
            let value = match &set.value {
                Value::Null => "(unset)".to_string(),
                v => v.to_string(),
            };
            (format!("{} = {value}", set.key), set.source)
        })
        .collect();
    let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0).min(72);
    for (line, source) in rows {
        s.push_str(&format!("{line:<width$}  # {source}\n"));
    }
    s
}

/// The JSON form: `{"files": [...], "root": "...", "settings": [{key, value, source,
/// origin}]}`.
pub fn json(config: &Config) -> Value {
    json!({
        "files": config.files,
        "root": config.root,
        "settings": settings(config),
    })
}
