//! Context compaction, with one owner (seed 004 §3.2, §4.5 and its recommendation P1): the
//! pure core measures every assembled prompt against the model's context window and, when it
//! would not fit, rewrites that context's history down a ladder until it fits below a target
//! fraction of the window. This module holds the ladder's pure parts — which messages each
//! rung touches and how the fold applies a rung — and the settings; [`crate::core`] drives
//! it, the driver only carries out the one model call rung (b) needs.
//!
//! The ladder, in order, until the estimate is at most the target:
//!
//! - (a) **elide** old tool-result bodies, oldest first, each replaced by a one-line stub the
//!   model can act on (`[read_file notes.md: 2.1 KB, elided; read it again if needed]`);
//! - (b) **summarize** the oldest turns with one model call (a fixed prompt, its output capped,
//!   through the run's budget gate); a failure falls through to (c);
//! - (c) **drop** the oldest turns, leaving one note saying how many messages are gone.
//!
//! Never touched: the system prompt and the standing-memory block (not in the history), the
//! context's first user message (the task), the current phase's opening message, the current
//! tool exchange (the last assistant message with tool calls and everything after it — a
//! call is never separated from its result), and the work-item reminder (appended to each
//! request, never stored). Each context label compacts on its own.
//!
//! Every rung is recorded as a `compaction_step` event carrying what the fold needs to redo it
//! exactly ([`Step`], applied by [`apply`]), so the compacted view is part of the run's state
//! and a resumed run continues from it. Rewrites happen only at ladder steps, never on every
//! call, so the stable prefix (and the providers' prompt caches) keep hitting between them.

use std::sync::Arc;

use crate::message::{Message, Role};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Window assumed for a model whose window neither the configuration nor the provider knows.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 32_768;

/// What the summary's message starts with.
pub const SUMMARY_HEADER: &str = "[Summary of the earlier conversation, written by the harness \
to save space; the original messages are gone]";

/// The fixed instructions of the summarization call (rung b).
pub const SUMMARY_PROMPT: &str = "You compress the earlier part of an AI agent's working \
conversation so that the agent can continue its task without it. Write a concise summary in \
plain text: the facts learned, the files read or written (with their paths) and what they \
held, the decisions taken, the errors met, and what was still open. Do not invent anything; \
do not address the agent; no preamble.";

/// `[agents.compaction]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionConfig {
    /// The model's context window in tokens. `None`: the provider's own knowledge (its model
    /// table), else [`DEFAULT_CONTEXT_WINDOW`]. The CLI sets it from `[llm] context_window`.
    pub context_window: Option<u64>,
    /// Compact down to this fraction of the window (0.1 to 0.95).
    pub target_fraction: f64,
    /// Tokens kept free for the answer. `None`: the smaller of `max_output_tokens` and a
    /// quarter of the window.
    pub output_reserve: Option<u64>,
    /// The summary's output cap (rung b).
    pub summary_max_tokens: u64,
    /// Tool results shorter than this (bytes) are not worth eliding.
    pub elide_min_bytes: usize,
    /// The most recent turns before the current exchange that rung (b) leaves as they are.
    pub keep_recent_turns: usize,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            context_window: None,
            target_fraction: 0.7,
            output_reserve: None,
            summary_max_tokens: 600,
            elide_min_bytes: 400,
            keep_recent_turns: 2,
        }
    }
}

impl CompactionConfig {
    /// Check the numbers.
    ///
    /// # Errors
    /// The key and what is wrong with it.
    pub fn validate(&self) -> Result<(), crate::error::SettingError> {
        if !(0.1..=0.95).contains(&self.target_fraction) {
            return Err(crate::error::SettingError::TargetFraction(
                self.target_fraction,
            ));
        }
        if self.context_window.is_some_and(|w| w < 1024) {
            return Err(crate::error::SettingError::ContextWindow);
        }
        if self.summary_max_tokens == 0 {
            return Err(crate::error::SettingError::SummaryMaxTokens);
        }
        Ok(())
    }

    /// The window numbers for a model whose window is `provider_window` (if known) and whose
    /// calls may generate `max_output` tokens.
    pub fn window(&self, provider_window: Option<u64>, max_output: Option<u64>) -> Window {
        let window = self
            .context_window
            .or(provider_window)
            .unwrap_or(DEFAULT_CONTEXT_WINDOW)
            .max(1);
        let reserve = self
            .output_reserve
            .unwrap_or_else(|| max_output.unwrap_or(window / 4).min(window / 4));
        let limit = window.saturating_sub(reserve).max(1);
        // Truncation is intended: a whole number of tokens below the fraction.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let target = ((window as f64) * self.target_fraction) as u64;
        Window {
            window,
            limit,
            target: target.min(limit).max(1),
        }
    }
}

/// A model's window and the two marks compaction works with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    /// Tokens the model accepts, prompt and answer together.
    pub window: u64,
    /// The largest prompt sent without compacting: the window minus the output reserve.
    pub limit: u64,
    /// What a compaction brings the prompt down to.
    pub target: u64,
}

/// One rung of the ladder as it was applied: what the fold needs to redo it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// (a) These tool results' bodies were replaced by stubs.
    ElideToolResults {
        /// The results, by their call ids.
        call_ids: Vec<String>,
    },
    /// (b) Messages `from..to` were replaced by one summary message.
    Summarize {
        /// First message replaced.
        from: usize,
        /// One past the last.
        to: usize,
        /// The summary (without [`SUMMARY_HEADER`]).
        text: String,
    },
    /// (c) Messages `from..to` were dropped, replaced by (or counted in) one note.
    DropOldest {
        /// First message dropped.
        from: usize,
        /// One past the last.
        to: usize,
    },
}

impl Step {
    /// The rung's name (`elide_tool_results`, `summarize`, `drop_oldest`).
    pub fn name(&self) -> &'static str {
        match self {
            Step::ElideToolResults { .. } => "elide_tool_results",
            Step::Summarize { .. } => "summarize",
            Step::DropOldest { .. } => "drop_oldest",
        }
    }
}

/// The rung a compaction in progress goes to next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rung {
    /// (a).
    Elide,
    /// (b).
    Summarize,
    /// (c).
    Drop,
}

/// What of a history may be compacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Indices never touched before the tail: the task (index 0 when it is a user message)
    /// and the current phase's opening message.
    pub pinned: Vec<usize>,
    /// Where the protected tail (the current tool exchange and what follows it) begins.
    pub tail: usize,
}

/// The layout of `history`, whose current phase opened at `phase_start`.
pub fn layout(history: &[Arc<Message>], phase_start: Option<usize>) -> Layout {
    let mut pinned = Vec::new();
    if history.first().is_some_and(|m| m.role == Role::User) {
        pinned.push(0);
    }
    if let Some(p) = phase_start
        && p < history.len()
        && !pinned.contains(&p)
    {
        pinned.push(p);
    }
    // The current exchange: the last assistant message that asked for tools, and after it.
    let tail = history
        .iter()
        .rposition(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
        .filter(|&i| {
            // Only if nothing but its results (and harness notes) follows: otherwise the
            // exchange is over and an answer came after it.
            !history[i + 1..].iter().any(|m| m.role == Role::Assistant)
        })
        .unwrap_or(history.len());
    Layout { pinned, tail }
}

/// The elided form of a tool result's body: one line naming the call, its size, and what to
/// do to see it again.
pub fn stub(history: &[Arc<Message>], index: usize) -> String {
    let Some(message) = history.get(index) else {
        return String::new();
    };
    let call_id = message.tool_call_id.as_deref().unwrap_or_default();
    let call = history[..index]
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls.iter())
        .find(|c| c.id == call_id);
    let what = match call {
        Some(c) => {
            let arg = c
                .arguments
                .as_object()
                .and_then(|o| o.values().find_map(serde_json::Value::as_str))
                .map(|a| {
                    let short: String = a.chars().take(80).collect();
                    format!(" {short}")
                })
                .unwrap_or_default();
            format!("{}{arg}", c.name)
        }
        None => "tool result".to_string(),
    };
    format!(
        "[{what}: {}, elided; call it again if needed]",
        human_size(message.content.len())
    )
}

fn human_size(bytes: usize) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
    } else if bytes >= 1024 {
        format!("{:.1} KB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// Whether `message` is a stub already.
fn is_stub(message: &Message) -> bool {
    message.content.starts_with('[')
        && message
            .content
            .ends_with("elided; call it again if needed]")
}

/// Rung (a)'s candidates: tool results before the tail, at least `min_bytes` long, not yet
/// elided, oldest first (index and call id).
pub fn elidable(
    history: &[Arc<Message>],
    layout: &Layout,
    min_bytes: usize,
) -> Vec<(usize, String)> {
    history[..layout.tail]
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Tool && m.content.len() >= min_bytes && !is_stub(m))
        .filter_map(|(i, m)| m.tool_call_id.clone().map(|id| (i, id)))
        .collect()
}

/// The compactable run of messages that starts first: from the first index after the pinned
/// head up to the next pinned index or the tail, on turn boundaries (a range never starts
/// with a tool result, never ends between a call and its result). `keep_turns` turns at its
/// end are left out. `None` when there is nothing.
pub fn oldest_run(
    history: &[Arc<Message>],
    layout: &Layout,
    keep_turns: usize,
) -> Option<(usize, usize)> {
    let mut from = 0;
    while layout.pinned.contains(&from) {
        from += 1;
    }
    let stop = layout
        .pinned
        .iter()
        .copied()
        .filter(|&p| p > from)
        .chain([layout.tail])
        .min()
        .unwrap_or(layout.tail)
        .min(history.len());
    if from >= stop {
        return None;
    }
    // A turn starts at every message that is not a tool result.
    let starts: Vec<usize> = (from..stop)
        .filter(|&i| history[i].role != Role::Tool)
        .collect();
    let first = *starts.first()?;
    let to = if keep_turns == 0 {
        stop
    } else if starts.len() > keep_turns {
        starts[starts.len() - keep_turns]
    } else {
        return None;
    };
    (first < to).then_some((first, to))
}

/// The messages of `from..to` as text for the summarization call.
pub fn transcript_of(history: &[Arc<Message>], from: usize, to: usize) -> String {
    let mut out = String::new();
    for m in &history[from..to.min(history.len())] {
        let who = match m.role {
            Role::System => "note",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool result",
        };
        out.push_str(&format!("[{who}] {}\n", m.content));
        for c in &m.tool_calls {
            out.push_str(&format!("[assistant calls {}] {}\n", c.name, c.arguments));
        }
    }
    out
}

/// The note that stands for dropped messages.
fn drop_note(n: usize) -> String {
    format!("[{n} earlier messages were dropped to fit the model's context window]")
}

fn dropped_count(message: &Message) -> Option<usize> {
    let rest = message.content.strip_prefix('[')?;
    let (n, tail) = rest.split_once(' ')?;
    tail.starts_with("earlier messages were dropped")
        .then(|| n.parse().ok())
        .flatten()
}

/// Apply `step` to `history` (the fold's part of compaction). Returns how many messages were
/// removed before the end of `from..to` minus the ones added (for indices that follow).
pub fn apply(history: &mut Vec<Arc<Message>>, step: &Step) -> isize {
    match step {
        Step::ElideToolResults { call_ids } => {
            for i in 0..history.len() {
                if history[i].role == Role::Tool
                    && history[i]
                        .tool_call_id
                        .as_ref()
                        .is_some_and(|id| call_ids.contains(id))
                    && !is_stub(&history[i])
                {
                    // A new message with the stub, not `Arc::make_mut`: the message is
                    // shared (the last request, the wire cache), so that would copy the
                    // whole result only to replace it.
                    let content = stub(history, i);
                    let old = &history[i];
                    history[i] = Arc::new(Message {
                        role: old.role,
                        content,
                        tool_calls: old.tool_calls.clone(),
                        tool_call_id: old.tool_call_id.clone(),
                    });
                }
            }
            0
        }
        Step::Summarize { from, to, text } => {
            let (from, to) = (*from.min(&history.len()), *to.min(&history.len()));
            if from >= to {
                return 0;
            }
            history.splice(
                from..to,
                [Message::user(format!("{SUMMARY_HEADER}\n{text}")).into()],
            );
            (to - from) as isize - 1
        }
        Step::DropOldest { from, to } => {
            let (from, to) = (*from.min(&history.len()), *to.min(&history.len()));
            if from >= to {
                return 0;
            }
            // Messages already standing for dropped ones are counted, not kept.
            let earlier: usize = history[from..to]
                .iter()
                .filter_map(|m| dropped_count(m))
                .sum();
            let notes = history[from..to]
                .iter()
                .filter(|m| dropped_count(m).is_some())
                .count();
            let n = to - from - notes + earlier;
            history.splice(from..to, [Message::user(drop_note(n)).into()]);
            (to - from) as isize - 1
        }
    }
}

#[cfg(test)]
mod tests;
