//! Named conversation contexts and the history strategies.
//!
//! Each `context_label` has its own history, conversation id, last response id and
//! iteration count; `None` is a label of its own. What a strategy sends: `compact` and
//! `full` the whole history (compaction, when needed, is the core's), `fresh` the last six
//! messages. Nothing here rewrites a history.

use std::sync::Arc;

use crate::message::{Message, Role};
use serde::{Deserialize, Serialize};

use crate::config::ContextStrategy;

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

/// The record name of a label.
pub fn label_name(label: &Option<String>) -> &str {
    label.as_deref().unwrap_or(DEFAULT_LABEL)
}

/// The history part of a request under `strategy`: everything, or (`fresh`) the last six
/// messages. Nothing here rewrites the stored history: compaction does, at its ladder steps,
/// through recorded events ([`crate::compaction`]).
pub(crate) fn sent_messages(
    strategy: ContextStrategy,
    history: &[Arc<Message>],
) -> &[Arc<Message>] {
    match strategy {
        ContextStrategy::Compact | ContextStrategy::Full => history,
        ContextStrategy::Fresh => {
            const KEEP: usize = 6;
            let start = clean_start(history, history.len().saturating_sub(KEEP));
            &history[start..]
        }
    }
}

/// A request's message list built over the list of an earlier request: where the two agree
/// (the same messages, in the same order, from the start) the earlier list's entries are
/// kept as they are; from the first difference on, the rest is replaced.
///
/// Why: a request lists every message of the history, each a shared `Arc`. Copying the list
/// for every call counted each message up and, when the request was dropped, down again:
/// two atomic operations per message per call, each on the message's own cache line —
/// work that grew with the history. Built over the last list, a call touches only the
/// messages that changed or are new.
pub(crate) struct ReusedList {
    list: Vec<Arc<Message>>,
    /// How many leading entries of `list` are this request's so far.
    len: usize,
}

impl ReusedList {
    /// A list built over `earlier` (empty: built from nothing).
    pub(crate) fn over(earlier: Vec<Arc<Message>>) -> Self {
        ReusedList {
            list: earlier,
            len: 0,
        }
    }

    /// Append `message`, shared.
    pub(crate) fn push_shared(&mut self, message: &Arc<Message>) {
        if !self.keeps(message) {
            self.list.push(Arc::clone(message));
            self.len += 1;
        }
    }

    /// Append `message`.
    pub(crate) fn push(&mut self, message: Arc<Message>) {
        if !self.keeps(&message) {
            self.list.push(message);
            self.len += 1;
        }
    }

    /// Whether the earlier list has `message` next (then it is counted in); otherwise the
    /// earlier list's rest is dropped, for the caller to append.
    fn keeps(&mut self, message: &Arc<Message>) -> bool {
        if self
            .list
            .get(self.len)
            .is_some_and(|kept| Arc::ptr_eq(kept, message))
        {
            self.len += 1;
            return true;
        }
        self.list.truncate(self.len);
        false
    }

    /// The list: what was appended, in order.
    pub(crate) fn finish(mut self) -> Vec<Arc<Message>> {
        self.list.truncate(self.len);
        self.list
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

    /// What a list holds after `earlier` is reused for `wanted`, and whether each entry is
    /// the very `Arc` it should be.
    fn rebuilt(earlier: &[Arc<Message>], wanted: &[Arc<Message>]) -> Vec<Arc<Message>> {
        let mut list = ReusedList::over(earlier.to_vec());
        for (i, m) in wanted.iter().enumerate() {
            // Both ways in: shared and moved.
            if i % 2 == 0 {
                list.push_shared(m);
            } else {
                list.push(Arc::clone(m));
            }
        }
        let list = list.finish();
        assert_eq!(list.len(), wanted.len());
        for (got, want) in list.iter().zip(wanted) {
            assert!(
                Arc::ptr_eq(got, want),
                "{got:?} is not the message {want:?}"
            );
        }
        list
    }

    #[test]
    fn a_reused_list_holds_exactly_the_messages_appended() {
        let h = conversation(12);
        // The usual call: the history grew.
        rebuilt(&h[..8], &h);
        // The same list again, a shorter one, none before, nothing wanted.
        rebuilt(&h, &h);
        rebuilt(&h, &h[..5]);
        rebuilt(&[], &h);
        rebuilt(&h, &[]);
        // A message changed in the middle (compaction rewrote it): a new `Arc` there, the
        // rest after it as before.
        let mut edited = h.clone();
        edited[4] = Arc::new(Message::user("elided"));
        rebuilt(&h, &edited);
        // An equal message that is another `Arc` is not taken for the kept one.
        let mut equal = h.clone();
        equal[0] = Arc::new((*h[0]).clone());
        let list = rebuilt(&h, &equal);
        assert!(!Arc::ptr_eq(&list[0], &h[0]));
    }

    #[test]
    fn a_reused_list_lets_go_of_what_it_no_longer_holds() {
        let h = conversation(6);
        let earlier = h.clone();
        let mut edited = h.clone();
        edited[2] = Arc::new(Message::user("new"));
        let list = rebuilt(&earlier, &edited[..4]);
        drop((earlier, edited));
        // The entries kept are held by `h` and the list; the one replaced and those past
        // the end by `h` alone.
        let holders: Vec<usize> = h.iter().map(Arc::strong_count).collect();
        assert_eq!(holders, [2, 2, 1, 2, 1, 1]);
        assert_eq!(Arc::strong_count(&list[2]), 1);
    }

    #[test]
    fn reset_changes_the_conversation_id_and_clears_the_chain() {
        // The driver makes the ids (`conv-<random>`); the context only keeps them.
        let mut c = ContextState::new("conv-1".into());
        c.history.push(Message::user("x").into());
        c.last_response_id = Some("r1".into());
        let before = c.conversation_id.clone();
        c.reset("conv-2".into());
        assert!(c.history.is_empty());
        assert_eq!(c.last_response_id, None);
        assert_ne!(c.conversation_id, before);
    }
}
