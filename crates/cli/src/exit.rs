//! Exit codes. Documented in README.md; the e2e tests pin them.

use lsm_phase::StopReason;

/// The run finished (`done`).
pub const OK: u8 = 0;
/// The run failed (`error`: provider failure, records not writable, internal fault).
pub const ERROR: u8 = 1;
/// Bad command line or configuration; nothing ran.
pub const USAGE: u8 = 2;
/// The token budget ran out.
pub const BUDGET_EXHAUSTED: u8 = 3;
/// A stop was requested (Ctrl-C).
pub const STOP_REQUESTED: u8 = 4;
/// The model said it cannot proceed.
pub const BLOCKED: u8 = 5;
/// The iteration limit was reached.
pub const MAX_ITERATIONS: u8 = 6;
/// The model repeated itself without progress (stall detection, `[stall]`).
pub const STALLED: u8 = 7;
/// The run's completion checks (task contract, work items, `work_complete`) were not met
/// in the `strict_automation` stop mode.
pub const CONTRACT_UNMET: u8 = 8;

/// Run `command` on a fresh multi-threaded runtime and turn its result into an exit code:
/// its own code, [`USAGE`] for a configuration error, [`ERROR`] for anything else (printed).
pub fn block_on_command<F>(command: F) -> u8
where
    F: std::future::Future<Output = anyhow::Result<u8>>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ERROR;
        }
    };
    match runtime.block_on(command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", crate::secrets::clean(&format!("{e:#}")));
            if e.downcast_ref::<crate::config::ConfigError>().is_some() {
                USAGE
            } else {
                ERROR
            }
        }
    }
}

/// The exit code for a run that ended with `reason`.
pub fn for_stop_reason(reason: StopReason) -> u8 {
    match reason {
        StopReason::Done => OK,
        StopReason::Error => ERROR,
        StopReason::BudgetExhausted => BUDGET_EXHAUSTED,
        StopReason::StopRequested => STOP_REQUESTED,
        StopReason::Blocked => BLOCKED,
        StopReason::MaxIterations => MAX_ITERATIONS,
        StopReason::Stalled => STALLED,
        StopReason::ContractUnmet => CONTRACT_UNMET,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stop_reason_has_a_distinct_documented_code() {
        let codes: Vec<u8> = StopReason::ALL
            .iter()
            .map(|r| for_stop_reason(*r))
            .collect();
        assert_eq!(codes, [0, 6, 3, 4, 5, 1, 7, 8]);
        assert!(!codes.contains(&USAGE));
    }
}
