//! Building the concrete parts a run is wired from: provider, permission asker.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use lsm_providers::{Provider, ScriptedProvider};
use lsm_sandbox::{PermissionAsker, PermissionDecision, PermissionRequest};

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

/// `--yes` gives an asker that approves everything; otherwise nobody is there to ask, and a
/// call that needs permission is denied.
pub fn permission_asker(yes: bool) -> Option<Arc<dyn PermissionAsker>> {
    if yes {
        Some(Arc::new(AutoApprove))
    } else {
        None
    }
}

/// `--yes`: approves every permission request and says so.
struct AutoApprove;

#[async_trait::async_trait]
impl PermissionAsker for AutoApprove {
    async fn ask(&self, request: PermissionRequest) -> PermissionDecision {
        PermissionDecision::allow(format!(
            "approved automatically by --yes ({})",
            request.reason
        ))
    }
}
