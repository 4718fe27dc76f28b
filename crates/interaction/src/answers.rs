//! What an answer means: whether its decision fits the request, and what the sandbox is told.

use lsm_sandbox::PermissionDecision;

use crate::{Answer, AnswerSource, Decision, InteractionError, RequestType};

pub(crate) fn check_decision(
    request_type: RequestType,
    decision: Decision,
) -> Result<(), InteractionError> {
    let (ok, hint) = match request_type {
        RequestType::Permission => (
            decision != Decision::Reply,
            "answer approve, deny or approve_session",
        ),
        RequestType::Confirmation => (
            matches!(decision, Decision::Approve | Decision::Deny),
            "answer approve or deny",
        ),
        RequestType::Clarification | RequestType::Feedback => (
            decision != Decision::ApproveSession,
            "answer with a reply (or deny to decline)",
        ),
    };
    if ok {
        Ok(())
    } else {
        Err(InteractionError::InvalidDecision {
            decision: decision.as_str().to_string(),
            request_type: request_type.as_str().to_string(),
            hint,
        })
    }
}

/// What the sandbox is told (and records) for an answer to a permission request.
pub fn permission_decision(answer: &Answer) -> PermissionDecision {
    let r = &answer.response;
    let message = r.user_message.trim();
    let reason = match (answer.source, r.decision) {
        (AnswerSource::Person, Decision::Approve) => with_message("approved by the user", message),
        (AnswerSource::Person, Decision::ApproveSession) => {
            with_message("approved by the user for the rest of the run", message)
        }
        (AnswerSource::Person, _) => with_message("denied by the user", message),
        (_, _) if !message.is_empty() => message.to_string(),
        (source, decision) => format!("{} ({})", decision.as_str(), source.as_str()),
    };
    if r.decision.allows() {
        PermissionDecision::allow(reason)
    } else {
        PermissionDecision::deny(reason)
    }
}

fn with_message(base: &str, message: &str) -> String {
    if message.is_empty() {
        base.to_string()
    } else {
        format!("{base}: {message}")
    }
}
