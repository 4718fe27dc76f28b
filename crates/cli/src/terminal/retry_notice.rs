//! Retries announced on stderr for commands without a run's progress printer (`lsm query`,
//! `lsm llm ping`, the knowledge-base tools' own calls): a person waiting on a 429 sees
//! `429 from openai, retry 2/4 in 2 s` at the default log level instead of silence.

use std::sync::Arc;

use lsm_app::wiring::{Retry, RetryNotice};

use super::progress::retry_line;

/// Each retry as a line on stderr.
pub fn on_stderr() -> RetryNotice {
    Arc::new(|retry: Retry| {
        eprintln!(
            "{}",
            lsm_app::secrets::clean(&retry_line(
                &retry.reason,
                retry.attempt,
                retry.delay_ms,
                Some(retry.max_retries)
            ))
        );
    })
}
