//! The `ask_user` tool: the agent asks the person a question and gets the answer as the
//! tool's result.

use std::sync::Arc;

use lsm_sandbox::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{Value, json};

use crate::{AUTO_CONTINUE_REPLY, AnswerSource, Decision, InteractionChannel};

/// The tool's name.
pub const ASK_USER_TOOL: &str = "ask_user";

/// `ask_user {question, context?}` (risk read_only): posts a clarification on the run's
/// channel and returns the person's reply. With `auto_continue` it returns "Continue with
/// your best judgment." at once; a denial or a timeout is a tool error the model sees.
#[derive(Debug, Clone)]
pub struct AskUserTool {
    channel: Arc<InteractionChannel>,
}

impl AskUserTool {
    /// The tool over `channel`.
    pub fn new(channel: Arc<InteractionChannel>) -> Self {
        AskUserTool { channel }
    }
}

#[async_trait::async_trait]
impl Tool for AskUserTool {
    fn name(&self) -> &str {
        ASK_USER_TOOL
    }

    fn description(&self) -> &str {
        "Ask the user a question when you need information only they have, and wait for the \
         answer. Ask one clear question; say why in `context`."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "The question for the user."},
                "context": {"type": "string", "description": "Why you need the answer."}
            },
            "required": ["question"],
            "additionalProperties": false
        })
    }

    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }

    fn waits_for_person(&self) -> bool {
        true
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let question = ctx.str_arg("question")?;
        if question.trim().is_empty() {
            return Err(ToolError::InvalidArguments(
                "'question' must not be empty".into(),
            ));
        }
        let answer = self
            .channel
            .ask_clarification(ASK_USER_TOOL, question, ctx.opt_str_arg("context"))
            .await
            .map_err(|e| ToolError::Failed(format!("the question could not be asked: {e}")))?;
        let message = answer.response.user_message;
        match answer.response.decision {
            Decision::Reply => Ok(ToolOutput::text(message)),
            // A timeout with timeout_action = approve: go on without an answer.
            Decision::Approve | Decision::ApproveSession => Ok(ToolOutput::text(
                if answer.source == AnswerSource::Person && !message.trim().is_empty() {
                    message
                } else {
                    format!("No answer was given ({message}). {AUTO_CONTINUE_REPLY}")
                },
            )),
            Decision::Deny => Err(ToolError::Failed(format!(
                "the user did not answer: {message}"
            ))),
        }
    }
}
