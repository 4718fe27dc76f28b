//! Named conversation contexts and the history strategies.

use std::sync::Arc;

use lsm_providers::{Message, Role};
use serde::{Deserialize, Serialize};

use crate::ContextStrategy;

/// The key of the primary (unnamed) context in records.
pub(crate) const DEFAULT_LABEL: &str = "__default__";

/// One conversation: its history and chain ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextState {
    /// The messages so far (as stored: `compact` rewrites it). Each is shared with the
    /// requests that send it (serialized as plain messages).
    pub history: Vec<Arc<Message>>,
    /// The conversation's id.
    pub conversation_id: String,
    /// The last response id the provider returned (chaining).
    pub last_response_id: Option<String>,
    /// LLM calls made in this context over the whole run.
    pub iterations: u32,
    /// Where the current phase's opening message is (never compacted).
    #[serde(default)]
    pub phase_start: Option<usize>,
    /// Compactions of this context so far.
    #[serde(default)]
    pub compactions: u32,
}

impl ContextState {
    /// An empty conversation with this id.
    pub fn new(conversation_id: String) -> Self {
        ContextState {
            history: Vec::new(),
            conversation_id,
            last_response_id: None,
            iterations: 0,
            phase_start: None,
            compactions: 0,
        }
    }

    /// Forget the conversation: empty history, a new conversation id, no previous response.
    /// The iteration count is kept: it counts the run's calls in this label.
    pub fn reset(&mut self, conversation_id: String) {
        self.history.clear();
        self.conversation_id = conversation_id;
        self.last_response_id = None;
        self.phase_start = None;
    }

    /// The most recent user message, the topic for standing memory.
    pub fn last_user_message(&self) -> &str {
        self.history
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map_or("", |m| m.content.as_str())
    }
}

/// A fresh conversation id.
pub(crate) fn new_conversation_id() -> String {
    format!("conv-{}", uuid::Uuid::new_v4().simple())
}

/// The record name of a label.
pub(crate) fn label_name(label: &Option<String>) -> &str {
    label.as_deref().unwrap_or(DEFAULT_LABEL)
}

/// The history part of a request under `strategy`: everything, or (`fresh`) the last six
/// messages. Nothing here rewrites the stored history: compaction does, at its ladder steps,
/// through recorded events ([`crate::compaction`]).
pub(crate) fn sent_messages(
    strategy: ContextStrategy,
    history: &[Arc<Message>],
) -> Vec<Arc<Message>> {
    match strategy {
        ContextStrategy::Compact | ContextStrategy::Full => history.to_vec(),
        ContextStrategy::Fresh => {
            const KEEP: usize = 6;
            let start = clean_start(history, history.len().saturating_sub(KEEP));
            history[start..].to_vec()
        }
    }
}

/// Move `start` forward past tool results whose call would be cut off: a tool message must
/// follow the assistant message that asked for it.
fn clean_start(history: &[Arc<Message>], mut start: usize) -> usize {
    while start < history.len() && history[start].role == Role::Tool {
        start += 1;
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(n: usize) -> Vec<Arc<Message>> {
        (0..n)
            .map(|i| {
                if i % 3 == 2 {
                    Message::tool_result(format!("c{i}"), format!("r{i}"))
                } else {
                    Message::user(format!("m{i}"))
                }
            })
            .map(Arc::new)
            .collect()
    }

    #[test]
    fn fresh_sends_at_most_six_and_never_starts_with_a_tool_result() {
        let h = conversation(20);
        let sent = sent_messages(ContextStrategy::Fresh, &h);
        assert!(sent.len() <= 6);
        assert_ne!(sent[0].role, Role::Tool);
        assert_eq!(sent.last(), h.last());
    }

    #[test]
    fn compact_and_full_send_the_whole_history() {
        let h = conversation(40);
        assert_eq!(sent_messages(ContextStrategy::Compact, &h), h);
        assert_eq!(sent_messages(ContextStrategy::Full, &h), h);
    }

    #[test]
    fn reset_changes_the_conversation_id_and_clears_the_chain() {
        let mut c = ContextState::new(new_conversation_id());
        c.history.push(Message::user("x").into());
        c.last_response_id = Some("r1".into());
        let before = c.conversation_id.clone();
        c.reset(new_conversation_id());
        assert!(c.history.is_empty());
        assert_eq!(c.last_response_id, None);
        assert_ne!(c.conversation_id, before);
    }
}
