//! What is done with an event besides recording it: its wire name, building one from a name
//! and fields, whether it is journaled; the reserved keys, a tool result's summary, and the
//! schema.

use super::*;

/// The transcript format this release writes.
pub const SCHEMA_VERSION: u32 = 2;

/// Longest `summary` of a [`super::RunEvent::ToolResult`], in characters.
pub const TOOL_SUMMARY_CHARS: usize = 200;

impl RunEvent {
    /// The event's wire name (`"phase_started"`, …).
    pub fn name(&self) -> &'static str {
        match self {
            RunEvent::RunStarted(crate::event::RunStarted { .. }) => "run_started",
            RunEvent::RunResumed { .. } => "run_resumed",
            RunEvent::ConversationContinued(_) => "conversation_continued",
            RunEvent::ToolCallRepaired { .. } => "tool_call_repaired",
            RunEvent::PhaseStarted { .. } => "phase_started",
            RunEvent::StandingContext { .. } => "standing_context",
            RunEvent::ProjectInstructions { .. } => "project_instructions",
            RunEvent::EnvironmentContext { .. } => "environment_context",
            RunEvent::GuidanceAdded(crate::event::GuidanceAdded { .. }) => "guidance_added",
            RunEvent::LlmRequest { .. } => "llm_request",
            RunEvent::LlmResponse { .. } => "llm_response",
            RunEvent::LlmRetry { .. } => "llm_retry",
            RunEvent::LlmChainReset { .. } => "llm_chain_reset",
            RunEvent::LlmError { .. } => "llm_error",
            RunEvent::LlmStream { .. } => "llm_stream",
            RunEvent::BudgetExhausted(crate::event::BudgetExhausted { .. }) => "budget_exhausted",
            RunEvent::WallTimeExceeded(_) => "wall_time_exceeded",
            RunEvent::ToolDeferred(_) => "tool_deferred",
            RunEvent::ToolCallStarted { .. } => "tool_call_started",
            RunEvent::ToolResult { .. } => "tool_result",
            RunEvent::ToolDenied { .. } => "tool_denied",
            RunEvent::ToolUsage(crate::event::ToolUsage { .. }) => "tool_usage",
            RunEvent::MemoryWritten(_) => "memory_written",
            RunEvent::MemoryApproved(_) => "memory_approved",
            RunEvent::MemoryRemoved(_) => "memory_removed",
            RunEvent::ToolEvent { .. } => "tool_event",
            RunEvent::InteractionRequest(_) => "interaction_request",
            RunEvent::InteractionAcknowledged(_) => "interaction_acknowledged",
            RunEvent::InteractionTimeout(_) => "interaction_timeout",
            RunEvent::InteractionResponse(_) => "interaction_response",
            RunEvent::Blocked { .. } => "blocked",
            RunEvent::StallNudge { .. } => "stall_nudge",
            RunEvent::HookDecision(crate::event::HookDecision { .. }) => "hook_decision",
            RunEvent::StopBlocked { .. } => "stop_blocked",
            RunEvent::StopForced { .. } => "stop_forced",
            RunEvent::Stalled { .. } => "stalled",
            RunEvent::WorkItemChanged { .. } => "work_item_changed",
            RunEvent::WorkReported { .. } => "work_reported",
            RunEvent::WorkCompleteDeclared { .. } => "work_complete_declared",
            RunEvent::ContractChecked { .. } => "contract_checked",
            RunEvent::CompletionObjected { .. } => "completion_objected",
            RunEvent::StopAccepted { .. } => "stop_accepted",
            RunEvent::ContractUnmet { .. } => "contract_unmet",
            RunEvent::CompactionStarted { .. } => "compaction_started",
            RunEvent::CompactionStep { .. } => "compaction_step",
            RunEvent::CompactionSummaryRequested { .. } => "compaction_summary_requested",
            RunEvent::CompactionSummaryFailed { .. } => "compaction_summary_failed",
            RunEvent::CompactionFinished { .. } => "compaction_finished",
            RunEvent::WorkersRequested { .. } => "workers_requested",
            RunEvent::WorkerStarted { .. } => "worker_started",
            RunEvent::WorkerProgress { .. } => "worker_progress",
            RunEvent::WorkerFinding { .. } => "worker_finding",
            RunEvent::WorkerLearning { .. } => "worker_learning",
            RunEvent::WorkerCompleted { .. } => "worker_completed",
            RunEvent::WorkerFailed { .. } => "worker_failed",
            RunEvent::WorkersFinished { .. } => "workers_finished",
            RunEvent::StopRequested { .. } => "stop_requested",
            RunEvent::Artifact { .. } => "artifact",
            RunEvent::PhaseEnded { .. } => "phase_ended",
            RunEvent::RunFinished { .. } => "run_finished",
        }
    }

    /// An event produced outside the harness (the interaction channel), given by `name` and
    /// its `fields` (a JSON object; the envelope's keys in it are dropped).
    ///
    /// # Errors
    /// When `name` is not an event of the schema or `fields` do not fit it.
    pub fn from_parts(name: &str, fields: Value) -> Result<RunEvent, UnknownEvent> {
        let mut object = match fields {
            Value::Object(map) => without_reserved(&map),
            Value::Null => Map::new(),
            other => {
                return Err(UnknownEvent {
                    name: name.to_string(),
                    reason: format!("its fields must be a JSON object, not {other}"),
                });
            }
        };
        object.insert("event".into(), Value::String(name.to_string()));
        serde_json::from_value(Value::Object(object)).map_err(|e| UnknownEvent {
            name: name.to_string(),
            reason: e.to_string(),
        })
    }

    /// Whether this event is written to the journal (stream pieces and workers' progress
    /// are not).
    pub fn is_journaled(&self) -> bool {
        !matches!(
            self,
            RunEvent::LlmStream { .. } | RunEvent::WorkerProgress { .. }
        )
    }
}

/// Keys a tool or another producer may not set: the envelope's and the event's name.
const RESERVED: [&str; 5] = ["seq", "ts", "run_id", "schema_version", "event"];

/// `fields` without the envelope's keys.
pub(crate) fn without_reserved(fields: &Map<String, Value>) -> Map<String, Value> {
    fields
        .iter()
        .filter(|(k, _)| !RESERVED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The first [`TOOL_SUMMARY_CHARS`] characters of `text` on one line, with `…` when cut.
pub fn summarize(text: &str) -> String {
    // The head is found first ([`lsm_phase::text::char_cut`]) and copied whole, its line
    // breaks replaced byte by byte: they are ASCII, so the copy stays UTF-8.
    let cut = lsm_phase::text::char_cut(text, TOOL_SUMMARY_CHARS);
    let head = &text.as_bytes()[..cut.unwrap_or(text.len())];
    let mut bytes = Vec::with_capacity(head.len() + '…'.len_utf8());
    bytes.extend(
        head.iter()
            .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b }),
    );
    let mut out = String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    if cut.is_some() {
        out.push('…');
    }
    out
}

/// The JSON schema of one transcript line, as committed in `docs/run-event.schema.json`.
pub fn event_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(EventEnvelope)).unwrap_or(Value::Null)
}
