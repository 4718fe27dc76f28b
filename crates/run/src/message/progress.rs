//! What a provider reports while a call is under way ([`ProviderEvent`]): streamed text and
//! tool-call progress, retries, a broken conversation chain. The core records the retries
//! and chain resets; the rest goes to whoever watches the run.

use std::time::Duration;

use serde::Serialize;

/// One piece of progress during a call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProviderEvent {
    /// A piece of the model's text, as it is generated (streaming only).
    TextDelta {
        /// The new text.
        text: String,
    },
    /// The model started a tool call (streaming only).
    ToolCallStarted {
        /// Position of the call in the response.
        index: usize,
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's JSON arguments (streaming only).
    ToolCallArgumentsDelta {
        /// Position of the call in the response.
        index: usize,
        /// The new piece of the JSON text.
        delta: String,
    },
    /// The call failed in a way that may pass, and will be retried after `delay`.
    Retry {
        /// The attempt that failed (1-based).
        attempt: u32,
        /// How long the client waits before the next attempt.
        #[serde(serialize_with = "millis")]
        delay: Duration,
        /// Why it failed.
        reason: String,
    },
    /// The server no longer knew the previous response; the call is being repeated once with
    /// the full history, and the chain starts afresh.
    ChainReset {
        /// The server's explanation.
        reason: String,
    },
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
