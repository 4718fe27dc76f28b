//! Building the concrete parts a run is wired from: the provider. (A run's permission asker
//! is its interaction channel: see `interaction_wiring`.)

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use lsm_providers::{Provider, ScriptedProvider};

use crate::agent_run::usage;

/// `scripted:<file>` (relative to the working directory).
pub fn build_provider(spec: &str, cwd: &Path) -> Result<Arc<dyn Provider>> {
    match spec.split_once(':') {
        Some(("scripted", file)) if !file.is_empty() => {
            let path = cwd.join(file);
            let p = ScriptedProvider::from_file(&path).map_err(|e| usage(e.to_string()))?;
            Ok(Arc::new(p))
        }
        _ => Err(usage(format!(
            "unknown provider '{spec}': this build supports scripted:<file.jsonl>"
        ))),
    }
}
