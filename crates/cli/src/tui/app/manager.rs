//! The real runs behind the TUI: [`AgentRuntimeManager`] as [`Runs`].

use super::*;

impl Runs for AgentRuntimeManager {
    fn list(&self) -> Vec<RunInfo> {
        AgentRuntimeManager::list(self)
    }
    fn pending(&self, run_id: &str) -> Option<PendingView> {
        AgentRuntimeManager::pending(self, run_id).ok().flatten()
    }
    fn logs(&self, run_id: &str) -> LogSnapshot {
        AgentRuntimeManager::logs(self, run_id).unwrap_or_default()
    }
    fn acknowledge(&self, run_id: &str, request_id: &str) -> Result<bool, ManagerError> {
        self.acknowledge_interaction(run_id, request_id)
    }
    fn respond(
        &self,
        run_id: &str,
        request_id: &str,
        decision: Decision,
        message: &str,
    ) -> Result<(), ManagerError> {
        AgentRuntimeManager::respond(self, run_id, request_id, decision, message)
    }
    fn stop(&self, run_id: &str) -> Result<(), ManagerError> {
        AgentRuntimeManager::stop(self, run_id)
    }
    fn start(&self, request: RunRequest) -> Result<String, ManagerError> {
        AgentRuntimeManager::start(self, request)
    }
}
