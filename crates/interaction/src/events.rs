//! What happens to a request, as events an observer (the run's journal, a front end) sees.

use serde_json::{Value, json};

use chrono::{DateTime, Utc};

use crate::{AnswerSource, InteractionRequest, InteractionResponse, RequestType, TimeoutAction};

/// Something that happened to a request, in the order it happened. Each request gets exactly
/// one [`InteractionEvent::Requested`] and exactly one [`InteractionEvent::Answered`], with
/// any acknowledgement and timeout between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InteractionEvent {
    /// A request was posted (the run now waits on a person).
    Requested {
        /// The request.
        request: InteractionRequest,
    },
    /// A front end showed the request to a person.
    Acknowledged {
        /// The request.
        request_id: String,
        /// When.
        acknowledged_at: DateTime<Utc>,
    },
    /// Nobody answered in time.
    TimedOut {
        /// The request.
        request_id: String,
        /// Whether it had been acknowledged (the second phase ran out) or not.
        acknowledged: bool,
        /// The limit that ran out, such as `300 s`.
        after: String,
        /// What the timeout became.
        action: TimeoutAction,
    },
    /// The request's one answer.
    Answered {
        /// The request's type.
        request_type: RequestType,
        /// The tool that asked.
        tool_name: String,
        /// The answer.
        response: InteractionResponse,
        /// Who answered.
        source: AnswerSource,
    },
}

impl InteractionEvent {
    /// The transcript event name: `interaction_request`, `interaction_acknowledged`,
    /// `interaction_timeout` or `interaction_response`.
    pub fn name(&self) -> &'static str {
        match self {
            InteractionEvent::Requested { .. } => "interaction_request",
            InteractionEvent::Acknowledged { .. } => "interaction_acknowledged",
            InteractionEvent::TimedOut { .. } => "interaction_timeout",
            InteractionEvent::Answered { .. } => "interaction_response",
        }
    }

    /// The event's fields, as recorded in the transcript.
    pub fn fields(&self) -> Value {
        match self {
            InteractionEvent::Requested { request } => {
                let mut v = serde_json::to_value(request).unwrap_or_else(|_| json!({}));
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("status".into(), json!("waiting_user"));
                }
                v
            }
            InteractionEvent::Acknowledged {
                request_id,
                acknowledged_at,
            } => json!({"request_id": request_id, "acknowledged_at": acknowledged_at}),
            InteractionEvent::TimedOut {
                request_id,
                acknowledged,
                after,
                action,
            } => json!({"request_id": request_id, "acknowledged": acknowledged,
                        "after": after, "timeout_action": action}),
            InteractionEvent::Answered {
                request_type,
                tool_name,
                response,
                source,
            } => json!({"request_id": response.request_id, "request_type": request_type,
                        "tool_name": tool_name, "decision": response.decision,
                        "user_message": response.user_message, "source": source}),
        }
    }

    /// The request this event is about.
    pub fn request_id(&self) -> &str {
        match self {
            InteractionEvent::Requested { request } => &request.request_id,
            InteractionEvent::Acknowledged { request_id, .. }
            | InteractionEvent::TimedOut { request_id, .. } => request_id,
            InteractionEvent::Answered { response, .. } => &response.request_id,
        }
    }
}

/// Receives every [`InteractionEvent`] (to record it in the run's transcript).
///
/// Called while the channel's state is locked, so events arrive in order; an observer must
/// return quickly and must not call back into the channel.
pub trait InteractionObserver: Send + Sync {
    /// One event.
    fn on_event(&self, event: &InteractionEvent);
}
