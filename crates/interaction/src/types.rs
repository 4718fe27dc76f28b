//! The request and response vocabulary: what is asked, how it is answered, and by whom.

use chrono::{DateTime, Utc};
use lsm_sandbox::{PermissionRequest, RiskLevel};
use serde::{Deserialize, Serialize};

/// What kind of question a request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestType {
    /// May a tool run?
    Permission,
    /// The agent needs information.
    Clarification,
    /// The agent wants an opinion on its work.
    Feedback,
    /// The agent wants a yes/no before going on.
    Confirmation,
}

impl RequestType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestType::Permission => "permission",
            RequestType::Clarification => "clarification",
            RequestType::Feedback => "feedback",
            RequestType::Confirmation => "confirmation",
        }
    }

    /// The prefix of this type's request ids (`perm-1a2b…`).
    pub fn id_prefix(self) -> &'static str {
        match self {
            RequestType::Permission => "perm",
            RequestType::Clarification => "clarify",
            RequestType::Feedback => "feedback",
            RequestType::Confirmation => "confirm",
        }
    }

    /// Whether a free-text reply answers this type (clarification, feedback).
    pub fn takes_reply(self) -> bool {
        matches!(self, RequestType::Clarification | RequestType::Feedback)
    }
}

impl std::fmt::Display for RequestType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Yes, this once.
    Approve,
    /// No.
    Deny,
    /// Yes, for this tool, for the rest of the run.
    ApproveSession,
    /// A free-text answer.
    Reply,
}

impl Decision {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Deny => "deny",
            Decision::ApproveSession => "approve_session",
            Decision::Reply => "reply",
        }
    }

    /// Whether the answer lets a permission request through.
    pub fn allows(self) -> bool {
        matches!(self, Decision::Approve | Decision::ApproveSession)
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A question to a person, as front ends show it and the transcript records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractionRequest {
    /// `perm-<hex>`, `clarify-<hex>`, `feedback-<hex>` or `confirm-<hex>`.
    pub request_id: String,
    /// What kind of question.
    pub request_type: RequestType,
    /// The tool that asks (`ask_user` for a clarification).
    pub tool_name: String,
    /// That tool's risk level.
    pub risk_level: RiskLevel,
    /// Why the question is asked (which setting asked for permission, the agent's context).
    pub reason: String,
    /// The tool's arguments as sorted JSON, at most 500 characters (empty when none).
    pub args_summary: String,
    /// The question itself: `Allow tool 'x' (risk: r)?`, or the agent's question.
    pub prompt: String,
    /// When it was asked (UTC).
    pub timestamp: DateTime<Utc>,
    /// What the call would change (a unified diff for a file write), when the tool says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
}

/// A fresh request id for `request_type`: its prefix, a dash, 12 hex digits.
pub fn new_request_id(request_type: RequestType) -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("{}-{}", request_type.id_prefix(), &hex[..12])
}

impl InteractionRequest {
    /// A request of any type, with a fresh id and the current time.
    pub fn new(
        request_type: RequestType,
        tool_name: impl Into<String>,
        risk_level: RiskLevel,
        reason: impl Into<String>,
        args_summary: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Self {
        InteractionRequest {
            request_id: new_request_id(request_type),
            request_type,
            tool_name: tool_name.into(),
            risk_level,
            reason: reason.into(),
            args_summary: args_summary.into(),
            prompt: prompt.into(),
            timestamp: Utc::now(),
            preview: None,
        }
    }

    /// The permission request for a sandbox's question: `Allow tool 'x' (risk: r)?`.
    pub fn permission(request: &PermissionRequest) -> Self {
        let mut posted = Self::new(
            RequestType::Permission,
            request.tool_name.clone(),
            request.risk_level,
            request.reason.clone(),
            request.args_summary.clone(),
            format!(
                "Allow tool '{}' (risk: {})?",
                request.tool_name, request.risk_level
            ),
        );
        posted.preview.clone_from(&request.preview);
        posted
    }

    /// A clarification asked by `tool_name` (the `ask_user` tool): `question` is the prompt,
    /// `context` (what the agent says it needs the answer for) the reason.
    pub fn clarification(
        tool_name: impl Into<String>,
        question: impl Into<String>,
        context: Option<&str>,
    ) -> Self {
        let reason = context
            .filter(|c| !c.trim().is_empty())
            .map_or_else(|| "The agent asks a question.".to_string(), str::to_string);
        Self::new(
            RequestType::Clarification,
            tool_name,
            RiskLevel::ReadOnly,
            reason,
            String::new(),
            question,
        )
    }
}

/// The answer to one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractionResponse {
    /// The request it answers.
    pub request_id: String,
    /// The decision.
    pub decision: Decision,
    /// The person's words (a reply's text, why they denied), or what answered for them.
    pub user_message: String,
}

/// Who (or what) answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerSource {
    /// A person, through a front end (the CLI prompt, the TUI, the runtime manager).
    Person,
    /// `--yes`: permission requests approved automatically.
    AutoApprove,
    /// Nobody could answer (no terminal, no front end): fail-closed.
    Unattended,
    /// The tool was approved for the rest of the run earlier (`approve_session`).
    SessionApproval,
    /// `auto_continue`: a clarification answered without asking.
    AutoContinue,
    /// Nobody answered in time; `timeout_action` decided.
    Timeout,
    /// `cancel_pending` (a stop, or the waiting call went away).
    Cancelled,
    /// The channel shut down.
    Shutdown,
}

impl AnswerSource {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerSource::Person => "person",
            AnswerSource::AutoApprove => "auto_approve",
            AnswerSource::Unattended => "unattended",
            AnswerSource::SessionApproval => "session_approval",
            AnswerSource::AutoContinue => "auto_continue",
            AnswerSource::Timeout => "timeout",
            AnswerSource::Cancelled => "cancelled",
            AnswerSource::Shutdown => "shutdown",
        }
    }
}

/// What [`crate::InteractionChannel::post_request`] returns: the one answer, and its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The response.
    pub response: InteractionResponse,
    /// Who answered.
    pub source: AnswerSource,
}

/// The pending request as a front end sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingView {
    /// The request.
    pub request: InteractionRequest,
    /// When a front end first showed it, if one has.
    pub acknowledged_at: Option<DateTime<Utc>>,
}
