//! [`Wave`]: one call of `run_workers` as the parent's journal records it — what was asked,
//! which workers started (their run folders) and how each ended. Part of [`crate::RunState`]:
//! a resumed parent replays a finished wave and continues an unfinished one from it.

use lsm_phase::{WorkerOutcome, WorkerRequest};
use serde::{Deserialize, Serialize};

/// A worker as the parent's journal records its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartedWorker {
    /// Its run id.
    pub worker_run_id: String,
    /// Its run folder.
    pub run_dir: String,
}

/// One call of `run_workers`, as folded from the parent's journal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Wave {
    /// What was asked for.
    pub requests: Vec<WorkerRequest>,
    /// Workers started, by item id.
    pub started: std::collections::BTreeMap<String, StartedWorker>,
    /// Workers ended, by item id.
    pub outcomes: std::collections::BTreeMap<String, WorkerOutcome>,
    /// Every outcome in the order asked, once the wave is over.
    pub finished: Option<Vec<WorkerOutcome>>,
}
