//! The types an event is made of and wrapped in: the [`EventEnvelope`] of every line, and
//! the records a few events carry (a run's launch, a phase's mode, a repair, a decision, a
//! tool's side effect), and [`UnknownEvent`].

use super::*;

/// One line of a run's transcript: an event and where it sits in the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EventEnvelope {
    /// Position in the run's journal, from 1, without gaps. Events that are never journaled
    /// (streamed model output, sent to the event sink only) carry 0.
    pub seq: u64,
    /// When the event was recorded (RFC 3339, UTC, milliseconds; the events one step records
    /// share it).
    pub ts: String,
    /// The run.
    pub run_id: String,
    /// The transcript format ([`SCHEMA_VERSION`] when written by this release).
    pub schema_version: u32,
    /// The event; its name is the `event` key.
    #[serde(flatten)]
    pub event: RunEvent,
}

/// How a phase runs: the model loop, or the agent's own tool calls with no model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PhaseMode {
    /// Model calls and the tool calls they ask for.
    Llm,
    /// The request's `direct_tool_calls`, no model call.
    ToolOnly,
}

/// How a run's owner started it: what it needs besides the agent, the topic and the limits
/// (in `run_started`) to build the same run again. The harness records it and never reads it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunLaunch {
    /// The provider as the owner named it (`openai`, `scripted:/abs/script.jsonl`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_spec: Option<String>,
    /// The model as the owner named it, when not the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The API base URL, when not the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The working directory relative paths were resolved against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// The iteration limit of long phases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// The research agent's refinement rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// Tools added to the agent's allowlist.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_tools: Vec<String>,
    /// The wall-clock limit the owner set (`--max-wall-seconds`); a resume keeps it unless
    /// given another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall_seconds: Option<u64>,
    /// The run whose conversation this one continues (`--continue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continues: Option<String>,
}

/// What a resumed run does about a tool call that started and never finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RepairAction {
    /// Run it again: the tool is `read_only`, or the call was still waiting for a person's
    /// decision (so it had not run); a pending request is posted again.
    RunAgain,
    /// Not run again: the model gets a failed result saying the call was interrupted and may
    /// or may not have taken effect.
    ReportInterrupted,
}

/// A permission or policy decision about one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Decision {
    /// The tool.
    pub tool_name: String,
    /// Let through?
    pub allowed: bool,
    /// Why.
    pub reason: String,
    /// When (RFC 3339, UTC).
    pub timestamp: String,
}

/// The fields of a tool's side-effect event: where it happened and what the tool reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolSideEffect {
    /// Label (`None` in tool-only mode).
    pub label: Option<String>,
    /// The tool.
    pub tool: String,
    /// What the tool reported (its keys, minus the envelope's own).
    #[serde(flatten)]
    pub data: Map<String, Value>,
}

/// Why an event given by name could not be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot record the event '{name}': {reason}")]
pub struct UnknownEvent {
    /// The name given.
    pub name: String,
    /// What was wrong.
    pub reason: String,
}
