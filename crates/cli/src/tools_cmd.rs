//! `lsm tools list`.

use std::path::Path;

use lsm_sandbox::RiskLevel;
use serde::Serialize;

use crate::{config, exit};

/// When a run is offered a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Offered {
    /// Every run.
    Always,
    /// When `[agents.memory]` is on.
    Memory,
    /// When an index exists (`lsm ingest`).
    KnowledgeBase,
}

impl Offered {
    /// The table's marker after the description.
    fn marker(self) -> &'static str {
        match self {
            Offered::Always => "",
            Offered::Memory => " [memory]",
            Offered::KnowledgeBase => " [kb]",
        }
    }
}

/// One row of the listing.
#[derive(Debug, Serialize)]
struct Row {
    name: String,
    risk: RiskLevel,
    needs_permission: bool,
    description: String,
    offered: Offered,
}

/// Print every tool a run can be offered: the built-ins, the memory tools (offered when
/// `[agents.memory]` is on) and the knowledge-base tools (offered when an index exists),
/// with the remote-source tools of the configuration's `[kb.remote]`.
pub fn list(config_path: Option<&Path>, json: bool) -> u8 {
    let config = match config::load(config_path, &config::lsm_env()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {}", crate::secrets::clean(&format!("{e:#}")));
            return exit::USAGE;
        }
    };
    // The store is only named, never opened: listing touches no file.
    let store = std::sync::Arc::new(lsm_memory::MemoryStore::new(lsm_memory::StoreLayout::new(
        "Agents",
    )));
    let builtin = lsm_sandbox::builtin::registry();
    let memory = crate::memory_wiring::with_memory_tools(lsm_sandbox::ToolRegistry::new(), &store);
    let row = |t: &std::sync::Arc<dyn lsm_sandbox::Tool>, offered| Row {
        name: t.name().to_string(),
        risk: t.risk(),
        needs_permission: t.needs_permission(),
        description: t.description().to_string(),
        offered,
    };
    let mut rows: Vec<Row> = builtin.iter().map(|t| row(t, Offered::Always)).collect();
    rows.extend(memory.iter().map(|t| row(t, Offered::Memory)));
    rows.extend(
        lsm_tools_kb::tools::catalog(&config.kb.remote)
            .into_iter()
            .map(|t| Row {
                name: t.name,
                risk: t.risk,
                needs_permission: t.needs_permission,
                description: t.description,
                offered: Offered::KnowledgeBase,
            }),
    );
    if json {
        match serde_json::to_string(&rows) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("error: cannot serialize the tool list: {e}");
                return exit::ERROR;
            }
        }
        return exit::OK;
    }
    let risk_of = |r: &Row| {
        let mut risk = r.risk.to_string();
        if r.needs_permission {
            risk.push('*');
        }
        risk
    };
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    let risk_width = rows
        .iter()
        .map(|r| risk_of(r).len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!("{:<width$}  {:<risk_width$}  DESCRIPTION", "NAME", "RISK");
    for r in &rows {
        println!(
            "{:<width$}  {:<risk_width$}  {}{}",
            r.name,
            risk_of(r),
            r.description,
            r.offered.marker()
        );
    }
    println!("\n* needs a person's permission by default");
    println!("[memory] offered when [agents.memory] is on");
    println!("[kb] offered when a knowledge base exists (`lsm ingest <dir>`)");
    exit::OK
}
