//! `lsm tools list`.

use crate::exit;

/// Print the built-in tools, and the memory tools (offered when `[agents.memory]` is on).
pub fn list(json: bool) -> u8 {
    // The store is only named, never opened: listing touches no file.
    let store = std::sync::Arc::new(lsm_memory::MemoryStore::new(lsm_memory::StoreLayout::new(
        "Agents",
    )));
    let registry =
        crate::memory_wiring::with_memory_tools(lsm_sandbox::builtin::registry(), &store);
    if json {
        let rows: Vec<serde_json::Value> = registry
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name(),
                    "risk": t.risk(),
                    "needs_permission": t.needs_permission(),
                    "description": t.description(),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        return exit::OK;
    }
    let width = registry.names().map(str::len).max().unwrap_or(4).max(4);
    println!("{:<width$}  {:<16}  DESCRIPTION", "NAME", "RISK");
    for t in registry.iter() {
        let risk = if t.needs_permission() {
            format!("{}*", t.risk())
        } else {
            t.risk().to_string()
        };
        println!("{:<width$}  {:<16}  {}", t.name(), risk, t.description());
    }
    println!("\n* needs a person's permission by default");
    exit::OK
}
