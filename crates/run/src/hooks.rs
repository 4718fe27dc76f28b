//! What hooks are told and how they answer: the data of the core's side of hooks.
//!
//! - `pre_tool` — before a permitted call runs; may deny it with a reason the model sees.
//! - `post_tool` — after a call's result is recorded; observes, may add a note to the result.
//! - `agent_stop` — when the model answers without a tool call; may block the stop with a
//!   reason (the model continues), at most `agent_stop_max_blocks` times in a phase — then
//!   the stop proceeds and the transcript records it as forced.
//! - `run_start`, `run_end` — observe.
//!
//! The driver (lsm-harness) runs the [`Hook`]s, its own command hooks among them; the pure
//! core decides on their answers ([`HookRun`]) and records them as one `hook_decision`
//! event, so a resumed run replays a decision and never runs its hooks again. A hook cannot
//! touch the budget or the sandbox: it sees a JSON description of the moment and answers
//! allow, deny (block), a note, or fails.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Default number of times `agent_stop` hooks may block a stop in one phase.
pub const DEFAULT_AGENT_STOP_MAX_BLOCKS: u32 = 2;

/// The moments hooks are told of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookPoint {
    /// Before a tool call runs.
    PreTool,
    /// After a tool call's result is recorded.
    PostTool,
    /// The model answered without a tool call (it wants to stop).
    AgentStop,
    /// The run starts.
    RunStart,
    /// The run ends.
    RunEnd,
}

impl HookPoint {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            HookPoint::PreTool => "pre_tool",
            HookPoint::PostTool => "post_tool",
            HookPoint::AgentStop => "agent_stop",
            HookPoint::RunStart => "run_start",
            HookPoint::RunEnd => "run_end",
        }
    }

    /// Whether a hook that fails refuses (`pre_tool` denies, `agent_stop` blocks) unless it
    /// is configured to fail open.
    pub fn decides(self) -> bool {
        matches!(self, HookPoint::PreTool | HookPoint::AgentStop)
    }
}

/// What a hook is told: the JSON a command hook reads on its stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HookEvent {
    /// The moment.
    pub hook: HookPoint,
    /// The run.
    pub run_id: String,
    /// The agent.
    pub agent: String,
    /// The tool (`pre_tool`, `post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The call's id (`pre_tool`, `post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The call's arguments (`pre_tool`, `post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The call's output or error (`post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Whether the call succeeded (`post_tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
    /// The model's answer (`agent_stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// The run's status (`run_end`: `completed`, `stopped`, `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// One hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookAnswer {
    /// Go ahead.
    Allow,
    /// `pre_tool`: refuse the call; `agent_stop`: block the stop. With the reason.
    Deny(String),
    /// `post_tool`: add this note to the result the model sees.
    Note(String),
    /// The hook failed (could not start, crashed, timed out, answered nonsense).
    Failed(String),
}

/// Code told of a run's moments. Implement it to hook into runs from Rust.
#[async_trait::async_trait]
pub trait Hook: Send + Sync {
    /// A name for the record (a command hook's is its command line).
    fn name(&self) -> String;

    /// Whether this hook wants to hear of `point` (for `tool`, at the tool points).
    fn matches(&self, point: HookPoint, tool: Option<&str>) -> bool;

    /// A hook that fails lets the run go on (`true`) or refuses (`false`, the default) at
    /// the points that decide (`pre_tool`, `agent_stop`).
    fn fail_open(&self) -> bool {
        false
    }

    /// The hook's answer to `event`.
    async fn call(&self, event: &HookEvent) -> HookAnswer;
}

/// One hook's run, as recorded in `hook_decision`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HookRun {
    /// The hook's name.
    pub name: String,
    /// `allow`, `deny`, `note` or `failed`.
    pub outcome: String,
    /// The reason, note or failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A failure lets the run go on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_open: bool,
}

impl HookRun {
    /// The record of `hook`'s `answer`.
    pub fn of(hook: &dyn Hook, answer: HookAnswer) -> HookRun {
        let (outcome, message) = match answer {
            HookAnswer::Allow => ("allow", None),
            HookAnswer::Deny(r) => ("deny", Some(r)),
            HookAnswer::Note(n) => ("note", Some(n)),
            HookAnswer::Failed(e) => ("failed", Some(e)),
        };
        HookRun {
            name: hook.name(),
            outcome: outcome.to_string(),
            message,
            fail_open: hook.fail_open(),
        }
    }

    /// Whether this run refuses (a deny, or a failure that fails closed at a point that
    /// decides), and why.
    pub fn refusal(&self, point: HookPoint) -> Option<String> {
        let message = self.message.clone().unwrap_or_default();
        match self.outcome.as_str() {
            "deny" if point.decides() => Some(if message.is_empty() {
                format!("refused by the hook {}", self.name)
            } else {
                message
            }),
            "failed" if point.decides() && !self.fail_open => {
                Some(format!("refused because a hook failed: {message}"))
            }
            _ => None,
        }
    }
}
