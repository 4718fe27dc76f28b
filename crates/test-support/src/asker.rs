//! [`Asker`]: a person at the permission gate who always gives the same answer, and
//! remembers what was asked.

use std::sync::{Mutex, PoisonError};

use lsm_sandbox::{PermissionAsker, PermissionDecision, PermissionRequest};

/// Answers every permission request the same way, with the same reason, and records each
/// request.
#[derive(Debug)]
pub struct Asker {
    allow: bool,
    reason: String,
    asked: Mutex<Vec<PermissionRequest>>,
}

impl Asker {
    /// Approves every request with `reason`.
    pub fn approving(reason: &str) -> Self {
        Asker {
            allow: true,
            reason: reason.to_string(),
            asked: Mutex::new(Vec::new()),
        }
    }

    /// Denies every request with `reason`.
    pub fn denying(reason: &str) -> Self {
        Asker {
            allow: false,
            reason: reason.to_string(),
            asked: Mutex::new(Vec::new()),
        }
    }

    /// Approves every request when `yes`, else denies it; the reason says which.
    pub fn answering(yes: bool) -> Self {
        if yes {
            Self::approving("a person said yes")
        } else {
            Self::denying("a person said no")
        }
    }

    /// Approves every request, as `--yes` does.
    pub fn approve_all() -> Self {
        Self::approving("approved by the test")
    }

    /// The requests asked so far, in order.
    pub fn asked(&self) -> Vec<PermissionRequest> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait::async_trait]
impl PermissionAsker for Asker {
    async fn ask(&self, request: PermissionRequest) -> PermissionDecision {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
        if self.allow {
            PermissionDecision::allow(&self.reason)
        } else {
            PermissionDecision::deny(&self.reason)
        }
    }
}
