//! Exit codes (documented in README.md; the e2e tests pin them), and running a command on an
//! async runtime with its error printed and mapped to one.

use lsm_phase::{RunOutcome, StopReason};

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
/// The run's wall-clock limit (`--max-wall-seconds`) was reached; the run can be resumed.
pub const WALL_TIME_EXCEEDED: u8 = 9;
/// The run waits for the result of a tool handled outside `lsm` (a deferred tool); `lsm runs
/// resume RUN --tool-result ID=FILE` supplies it.
pub const DEFERRED: u8 = 10;

/// The multi-threaded tokio runtime a command runs on (`worker_threads`: all cores when
/// `None`).
///
/// # Errors
/// When the runtime cannot start (no threads left, …).
pub fn runtime(worker_threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = worker_threads {
        builder.worker_threads(n);
    }
    builder.enable_all().build()
}

/// A configuration or command-line error ([`lsm_app::error::ConfigError`]): exit code
/// [`USAGE`].
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    lsm_app::error::ConfigError(msg.into()).into()
}

/// Whether `e` is, or wraps, a configuration or command-line error.
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(lsm_app::error::is_usage)
}

/// Print `e` (redacted) as the command's error and return its exit code: [`USAGE`] for a
/// [`lsm_app::error::ConfigError`] or when `is_usage` says so, [`ERROR`] for anything else.
pub fn report(e: &anyhow::Error, is_usage: impl Fn(&anyhow::Error) -> bool) -> u8 {
    // A server's or a tool's words may be part of the error: nothing in them drives the
    // terminal.
    let message = format!("{e:#}");
    let message = lsm_app::secrets::clean(&message);
    eprintln!("error: {}", crate::terminal::text::terminal_text(&message));
    if self::is_usage(e) || is_usage(e) {
        USAGE
    } else {
        ERROR
    }
}

/// A command's result as an exit code: its own code, or its error [`report`]ed.
pub fn finish(result: anyhow::Result<u8>) -> u8 {
    result.unwrap_or_else(|e| report(&e, |_| false))
}

/// Run `command` on a fresh multi-threaded runtime and turn its result into an exit code:
/// its own code, [`USAGE`] for a configuration error, [`ERROR`] for anything else (printed).
pub fn block_on_command<F>(command: F) -> u8
where
    F: std::future::Future<Output = anyhow::Result<u8>>,
{
    block_on_with(None, command)
}

/// Run `command` in `block_on` on a fresh runtime of `worker_threads` (all cores when `None`).
fn block_on_with<F>(worker_threads: Option<usize>, command: F) -> u8
where
    F: std::future::Future<Output = anyhow::Result<u8>>,
{
    let runtime = match runtime(worker_threads) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ERROR;
        }
    };
    finish(runtime.block_on(command))
}

/// Like [`block_on_command`], but the command runs as a task on a runtime of **one** async
/// worker thread (plus the blocking pool), not on the main thread in `block_on`: the HTTP
/// connections, timers and the command share that thread, so a model call's answer wakes the
/// command where it was received, and no second worker is woken to steal each new task and
/// hand it back (measured: 2.4 context switches per model call with two workers, 1.0 with
/// one; docs/PERFORMANCE.md). A run's own work between two awaits is tens of microseconds;
/// what can take longer (walks, hashing, the knowledge base, the local model) runs on the
/// blocking pool or a thread of its own, so concurrent worker runs of a conductor still
/// overlap. A panic in the command is resumed here, as if it had run on this thread.
pub fn spawn_command<F>(command: F) -> u8
where
    F: std::future::Future<Output = anyhow::Result<u8>> + Send + 'static,
{
    block_on_with(Some(1), async move {
        match tokio::spawn(command).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(anyhow::anyhow!("the command was cancelled: {e}")),
        }
    })
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
        StopReason::WallTimeExceeded => WALL_TIME_EXCEEDED,
        StopReason::Deferred => DEFERRED,
    }
}

/// The exit code of a finished run: 1 when the agent failed or the records are missing,
/// otherwise the code of the last phase's stop reason.
pub fn of_run(finished: &lsm_app::run::Finished) -> u8 {
    let output = &finished.output;
    match (
        &finished.records_problem,
        output.outcome,
        output.stop_reason,
    ) {
        (Some(_), _, _) | (None, RunOutcome::Failed, _) => ERROR,
        (None, _, reason) => for_stop_reason(reason.unwrap_or(StopReason::Done)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawned_command_runs_on_one_worker_off_the_main_thread() {
        let main = std::thread::current().id();
        let code = spawn_command(async move {
            let workers = tokio::runtime::Handle::current().metrics().num_workers();
            let off_main = std::thread::current().id() != main;
            Ok(u8::try_from(workers).unwrap_or(u8::MAX) * 10 + u8::from(off_main))
        });
        assert_eq!(code, 11, "one worker (tens), off the main thread (units)");
    }

    #[test]
    fn every_stop_reason_has_a_distinct_documented_code() {
        let codes: Vec<u8> = StopReason::ALL
            .iter()
            .map(|r| for_stop_reason(*r))
            .collect();
        assert_eq!(codes, [0, 6, 3, 4, 5, 1, 7, 8, 9, 10]);
        assert!(!codes.contains(&USAGE));
    }
}
