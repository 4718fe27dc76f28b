//! Settings from the environment: `LSM_<SECTION>_<KEY>` variables (nested tables and tiers
//! included), values read as TOML, and `[llm.tiers.<tier>]` lifted into place.

use crate::error::Result;

use crate::error::usage as config_error;

/// A value given on the command line or in a variable: TOML (numbers, booleans, arrays,
/// inline tables), else a plain string.
pub(super) fn parse_value(value: &str) -> toml::Value {
    format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()))
}

/// The sections an `LSM_<SECTION>_<KEY>` variable can address.
const SECTIONS: &[&str] = &[
    "agents",
    "sandbox",
    "llm",
    "kb",
    "stall",
    "conductor",
    "store",
];

/// Tables nested in a section, addressed as `LSM_<SECTION>_<TABLE>_<KEY>`
/// (`LSM_AGENTS_MEMORY_ENABLED` sets `[agents.memory] enabled`,
/// `LSM_AGENTS_INTERACTION_TIMEOUT_SECONDS=60` sets `[agents.interaction] timeout_seconds`).
const NESTED: &[(&str, &str)] = &[
    ("agents", "memory"),
    ("agents", "interaction"),
    ("agents", "compaction"),
    ("agents", "context"),
];

/// `[llm.tiers.<tier>]` is another spelling of `[llm.<tier>]`: move such tables into place.
/// A tier given both ways is an error naming it.
pub(super) fn lift_llm_tiers(table: &mut toml::Table) -> Result<()> {
    let Some(toml::Value::Table(llm)) = table.get_mut("llm") else {
        return Ok(());
    };
    let Some(tiers) = llm.remove("tiers") else {
        return Ok(());
    };
    let toml::Value::Table(tiers) = tiers else {
        return Err(config_error(
            "[llm.tiers] must be a table of tiers (quick, normal, complex)",
        ));
    };
    for (name, value) in tiers {
        if !TIERS.contains(&name.as_str()) {
            return Err(config_error(format!(
                "[llm.tiers.{name}] is not a tier: use quick, normal or complex"
            )));
        }
        if llm.contains_key(&name) {
            return Err(config_error(format!(
                "the tier {name} is given twice, as [llm.{name}] and [llm.tiers.{name}]: keep one"
            )));
        }
        llm.insert(name, value);
    }
    Ok(())
}

/// The `[llm]` tiers an `LSM_LLM_<TIER>_<KEY>` variable can address.
pub(super) const TIERS: &[&str] = &["quick", "normal", "complex"];

/// The `[llm]` keys whose environment override also overrides every tier: the variable says
/// which provider, model and server to use, whatever the file's tiers say.
const LLM_KEYS_OVER_TIERS: &[&str] = &["provider", "model", "model_path", "base_url"];

fn subtable<'a>(table: &'a mut toml::Table, key: &str, name: &str) -> Result<&'a mut toml::Table> {
    let entry = table
        .entry(key.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    match entry {
        toml::Value::Table(t) => Ok(t),
        _ => Err(config_error(format!("{name} is not a table"))),
    }
}

/// `LSM_AGENTS_MAX_TOKENS_BUDGET=5000` sets `[agents] max_tokens_budget = 5000`. Values are
/// read as TOML (numbers, booleans, arrays) and fall back to a plain string.
/// `LSM_LLM_NORMAL_MODEL` sets `[llm.normal] model`; `LSM_LLM_PROVIDER`, `LSM_LLM_MODEL` and
/// `LSM_LLM_BASE_URL` set `[llm]` and every tier in `tiers_in_files`. `record` is told the
/// key path each variable set.
pub(super) fn apply_env_overrides(
    table: &mut toml::Table,
    env: &[(String, String)],
    tiers_in_files: &[&str],
    record: &mut dyn FnMut(Vec<String>, &str),
) -> Result<()> {
    for (name, value) in env {
        let Some(rest) = name.strip_prefix("LSM_") else {
            continue;
        };
        let lower = rest.to_ascii_lowercase();
        let Some((section, key)) = SECTIONS.iter().find_map(|s| {
            lower
                .strip_prefix(s)
                .and_then(|k| k.strip_prefix('_'))
                .map(|k| (*s, k.to_string()))
        }) else {
            return Err(config_error(format!(
                "environment variable {name} does not name a setting: use LSM_<SECTION>_<KEY> with a section among {}",
                SECTIONS.join(", ")
            )));
        };
        let parsed = parse_value(value);
        let section_table = subtable(table, section, &format!("[{section}]"))?;
        if let Some((_, sub)) = NESTED.iter().find(|(s, sub)| {
            *s == section && key.strip_prefix(sub).is_some_and(|k| k.starts_with('_'))
        }) {
            let inner_key = key[sub.len() + 1..].to_string();
            record(vec![section.into(), (*sub).into(), inner_key.clone()], name);
            subtable(section_table, sub, &format!("[{section}.{sub}]"))?.insert(inner_key, parsed);
            continue;
        }
        if section == "llm" {
            if let Some((tier, tier_key)) = TIERS.iter().find_map(|t| {
                key.strip_prefix(t)
                    .and_then(|k| k.strip_prefix('_'))
                    .map(|k| (*t, k.to_string()))
            }) {
                record(vec!["llm".into(), tier.into(), tier_key.clone()], name);
                subtable(section_table, tier, &format!("[llm.{tier}]"))?.insert(tier_key, parsed);
                continue;
            }
            if LLM_KEYS_OVER_TIERS.contains(&key.as_str()) {
                for tier in tiers_in_files {
                    record(vec!["llm".into(), (*tier).into(), key.clone()], name);
                    subtable(section_table, tier, &format!("[llm.{tier}]"))?
                        .insert(key.clone(), parsed.clone());
                }
            }
        }
        record(vec![section.into(), key.clone()], name);
        section_table.insert(key, parsed);
    }
    Ok(())
}

/// `LSM_*` variables that are not settings of `lsm.toml`: `LSM_MODEL_CACHE` moves the model
/// cache folder (shared with `cargo xtask fetch-model`); `LSM_LOG` is the log filter.
const NOT_SETTINGS: &[&str] = &[
    lsm_providers::MODEL_CACHE_ENV,
    LOG_ENV,
    lsm_store_pg::PASSWORD_ENV,
];

/// The log filter's variable (`info`, `debug`, `lsm_harness=debug`, …).
pub const LOG_ENV: &str = "LSM_LOG";

/// The `LSM_*` variables of this process that override settings.
pub fn lsm_env() -> Vec<(String, String)> {
    settings_env(std::env::vars())
}

/// The variables among `vars` that override settings: `LSM_*` except [`NOT_SETTINGS`] and
/// the test-only `LSM_TEST_*` (crash points, the scripted provider's served log).
pub(super) fn settings_env(vars: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    vars.filter(|(k, _)| {
        k.starts_with("LSM_") && !k.starts_with("LSM_TEST_") && !NOT_SETTINGS.contains(&k.as_str())
    })
    .collect()
}
