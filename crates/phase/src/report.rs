//! What a run reports when it completes, and the worker runs a parent run can ask for
//! (seed 003: `WorkerTurnReport`, a conductor spawning workers). Operational data only: no
//! token, cost or budget figure, like [`crate::PhaseResult`].

use serde::{Deserialize, Serialize};

use crate::StopReason;

/// One finding: a claim, how sure the run is of it (0 to 1), and what shows it — references
/// to the run's own tool results (their call ids) or sources (a file path, a URL, a chunk id
/// a knowledge-base tool returned). References that pointed at nothing are dropped by the
/// executor and listed in [`TurnReport::dropped_evidence`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// What was found.
    pub claim: String,
    /// How sure, from 0 to 1.
    pub confidence: f64,
    /// What shows it.
    #[serde(default)]
    pub evidence_refs: Vec<String>,
}

/// What a run reports when it completes (the reserved `complete` control tool); a run whose
/// model just stops talking reports its last answer as the summary and nothing else.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnReport {
    /// What was done.
    pub summary: String,
    /// Whether the run did what it was asked.
    pub success: bool,
    /// Claims with their evidence.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// What is worth knowing next time.
    #[serde(default)]
    pub learnings: Vec<String>,
    /// What needs a decision above this run (a failure, a block, a question).
    #[serde(default)]
    pub escalations: Vec<String>,
    /// Evidence references of the findings that pointed at nothing the run had, dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_evidence: Vec<String>,
}

/// A worker run a parent run asks for: an objective for a capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerRequest {
    /// The parent's name for the work (an agenda item's id).
    pub item_id: String,
    /// What kind of worker (`researcher`, `terminal`, or one the configuration defines).
    pub capability: String,
    /// What the worker is to do.
    pub objective: String,
}

/// How a worker run ended, as its parent sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerOutcome {
    /// The request's item id.
    pub item_id: String,
    /// The request's capability.
    pub capability: String,
    /// The worker's run id, once it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_run_id: Option<String>,
    /// Why its last phase stopped (`error` when it could not run at all).
    pub stop_reason: StopReason,
    /// What it reported.
    pub report: TurnReport,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl WorkerOutcome {
    /// An outcome for a worker that could not run: `error`, with the reason as an escalation.
    pub fn failed(request: &WorkerRequest, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        WorkerOutcome {
            item_id: request.item_id.clone(),
            capability: request.capability.clone(),
            worker_run_id: None,
            stop_reason: StopReason::Error,
            report: TurnReport {
                summary: String::new(),
                success: false,
                escalations: vec![reason.clone()],
                ..TurnReport::default()
            },
            error: Some(reason),
        }
    }

    /// Whether the worker did what it was asked.
    pub fn succeeded(&self) -> bool {
        self.stop_reason == StopReason::Done && self.report.success && self.error.is_none()
    }
}
