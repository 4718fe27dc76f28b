//! Reading an answer, shared by every flavour: the stream assembler each flavour implements,
//! and the errors of an answer that cannot be read.

use serde_json::Value;

use crate::sse::SseEvent;
use crate::{CallObserver, LlmResponse};

/// Builds a response out of a stream of SSE events.
pub(crate) trait StreamAssembler: Send {
    /// One event. `Ok(true)` when the response is complete.
    fn event(&mut self, ev: &SseEvent, observer: &dyn CallObserver) -> Result<bool, StreamError>;
    /// The complete response.
    fn finish(self: Box<Self>) -> Result<LlmResponse, AnswerError>;
}

/// Why an answer (a body, or a completed stream) could not be read as a response; reported
/// as [`ProviderError::Malformed`]. The server does not speak the API the provider kind
/// expects: check `[llm] provider` and `base_url`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AnswerError {
    /// A required part of the answer is absent; `excerpt` is the start of the answer.
    #[error("no {part} in the answer: {excerpt}")]
    Missing {
        /// What is missing (`choices[0].message`, `output array`, `content array`).
        part: &'static str,
        /// The answer's first characters.
        excerpt: String,
    },
    /// A tool call of a Chat Completions answer has no `function.name`.
    #[error("tool call {index} has no function name")]
    NoFunctionName {
        /// The call's position.
        index: usize,
    },
    /// A tool call has no name; `what` says which kind of item it is.
    #[error("{what} {index} has no name")]
    NoToolName {
        /// `function_call item`, `tool_use block` or `streamed tool call`.
        what: &'static str,
        /// The call's position.
        index: usize,
    },
    /// The stream ended before its `response.completed` event.
    #[error("the stream ended without response.completed")]
    NotCompleted,
    /// A streamed `tool_use` input is not JSON.
    #[error("the streamed input of tool_use block {index} is not JSON ({message})")]
    InputNotJson {
        /// The block's position.
        index: usize,
        /// The JSON parser's message.
        message: String,
    },
}

impl AnswerError {
    /// [`AnswerError::Missing`]: `part` is absent from `answer`.
    pub(crate) fn missing(part: &'static str, answer: &Value) -> Self {
        AnswerError::Missing {
            part,
            excerpt: excerpt(&answer.to_string(), 300),
        }
    }
}

/// What went wrong inside a stream.
#[derive(Debug)]
pub(crate) enum StreamError {
    /// The data could not be understood.
    Malformed(String),
    /// The server reported an error in the stream.
    Server(String),
}

/// At most `max` characters of `s`, with an ellipsis when cut.
pub(crate) fn excerpt(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

/// Tool-call arguments as JSON: a string is parsed (an empty one is `{}`); a string that is
/// not JSON stays a string, so argument validation reports it to the model.
pub(crate) fn parse_arguments(raw: &Value) -> Value {
    match raw {
        Value::String(s) if s.trim().is_empty() => Value::Object(serde_json::Map::new()),
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| raw.clone()),
        Value::Null => Value::Object(serde_json::Map::new()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_given_as_a_json_string_are_parsed() {
        use serde_json::json;
        assert_eq!(parse_arguments(&json!("{\"a\": 1}")), json!({"a": 1}));
        assert_eq!(parse_arguments(&json!({"a": 1})), json!({"a": 1}));
        assert_eq!(parse_arguments(&json!("")), json!({}));
        assert_eq!(parse_arguments(&json!("not json")), json!("not json"));
    }
}
