//! `[agents.interaction]`: how long a request waits, and what a timeout means.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::InteractionError;

/// What a request that nobody answered in time becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutAction {
    /// A denial that says it timed out, and after how long.
    #[default]
    Deny,
    /// An approval that says it was automatic.
    Approve,
}

/// The channel's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InteractionConfig {
    /// How long a request waits to be acknowledged (shown to a person), in seconds; ≥ 1.
    pub timeout_seconds: u64,
    /// What a timed-out request becomes.
    pub timeout_action: TimeoutAction,
    /// How long an acknowledged request waits for its answer, in seconds; 0 waits forever.
    pub acknowledged_timeout_seconds: u64,
    /// Answer the agent's clarifications (`ask_user`) with "Continue with your best
    /// judgment." instead of asking.
    pub auto_continue: bool,
}

impl Default for InteractionConfig {
    fn default() -> Self {
        InteractionConfig {
            timeout_seconds: 300,
            timeout_action: TimeoutAction::Deny,
            acknowledged_timeout_seconds: 0,
            auto_continue: false,
        }
    }
}

impl InteractionConfig {
    /// Check the values.
    ///
    /// # Errors
    /// [`InteractionError::InvalidConfig`] when `timeout_seconds` is 0.
    pub fn validate(&self) -> Result<(), InteractionError> {
        if self.timeout_seconds == 0 {
            return Err(InteractionError::InvalidConfig {
                key: "timeout_seconds",
                message: "must be at least 1 (seconds before an unacknowledged request times out)"
                    .into(),
            });
        }
        Ok(())
    }

    /// The channel timings these settings give.
    pub fn timeouts(&self) -> Timeouts {
        Timeouts {
            unacknowledged: Duration::from_secs(self.timeout_seconds.max(1)),
            acknowledged: (self.acknowledged_timeout_seconds > 0)
                .then(|| Duration::from_secs(self.acknowledged_timeout_seconds)),
            action: self.timeout_action,
        }
    }
}

/// The channel's timings as durations (what [`InteractionConfig::timeouts`] gives; tests use
/// shorter ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// How long a request waits to be acknowledged.
    pub unacknowledged: Duration,
    /// How long an acknowledged request waits; `None` is forever.
    pub acknowledged: Option<Duration>,
    /// What a timeout becomes.
    pub action: TimeoutAction,
}

/// `300 s`, `0.25 s`.
pub(crate) fn seconds(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} s", d.as_secs_f64())
    }
}
