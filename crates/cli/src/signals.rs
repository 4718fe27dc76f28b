//! The signals that ask a command to stop cleanly: Ctrl-C (SIGINT) and SIGTERM.
//!
//! Both are registered with the kernel when [`StopSignals::listen`] returns, not when a task
//! first waits on them. A listener created lazily inside a spawned task leaves a window in
//! which the signal still has its default action: a SIGTERM that arrives before the task is
//! first polled kills the process (exit 143, no summary) instead of stopping it with code 4.
//! Every command that documents a clean stop registers here first, before it starts work.

/// Which signal asked for the stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT, what a terminal sends on Ctrl-C.
    Interrupt,
    /// SIGTERM, what `kill`, service managers and container runtimes send.
    Terminate,
}

impl StopSignal {
    /// The name the messages use.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "Ctrl-C",
            StopSignal::Terminate => "SIGTERM",
        }
    }

    /// The signal's number.
    fn number(self) -> i32 {
        match self {
            StopSignal::Interrupt => signal_hook::consts::SIGINT,
            StopSignal::Terminate => signal_hook::consts::SIGTERM,
        }
    }
}

/// Ctrl-C and SIGTERM, caught from the moment this value exists until the process ends.
pub struct StopSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Register both signals now. Must be called inside a Tokio runtime (its signal driver
    /// delivers them); fails only if the runtime has none or the kernel refuses the handler.
    pub fn listen() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Wait for the next stop signal; `None` if the runtime shut its signal driver down.
    pub async fn recv(&mut self) -> Option<StopSignal> {
        #[cfg(unix)]
        {
            tokio::select! {
                r = self.interrupt.recv() => r.map(|()| StopSignal::Interrupt),
                r = self.terminate.recv() => r.map(|()| StopSignal::Terminate),
            }
        }
        #[cfg(not(unix))]
        tokio::signal::ctrl_c()
            .await
            .ok()
            .map(|()| StopSignal::Interrupt)
    }
}

/// Register the stop signals now. Once one arrives, say on stderr that the stop was
/// requested and what the command does now (`doing`: "finishing the current step"), and
/// call `on_stop` (in a spawned task). A second signal ends the process at once, as the
/// signal's default action would (a shell shows 130 for Ctrl-C, 143 for SIGTERM): the person
/// who presses Ctrl-C twice does not wait for a step, a hook or a server to finish. What was
/// recorded stays; a run's journal is written line by line, so it ends like a run whose
/// process was killed, and `lsm runs resume` continues it.
///
/// If the signals cannot be registered, say so once on stderr: the command still runs, but
/// a signal then ends it the default way.
pub fn on_stop(
    doing: &'static str,
    on_stop: impl FnOnce() + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let signals = StopSignals::listen();
    tokio::spawn(async move {
        let mut signals = match signals {
            Ok(s) => s,
            Err(e) => {
                eprintln!(
                    "warning: cannot catch Ctrl-C or SIGTERM ({e}); a signal ends this program without a clean stop"
                );
                return;
            }
        };
        let Some(first) = signals.recv().await else {
            return;
        };
        let name = first.name();
        eprintln!("{name}: stop requested; {doing}… ({name} again quits at once)");
        on_stop();
        if let Some(second) = signals.recv().await {
            eprintln!("{}: quitting at once", second.name());
            end_the_default_way(second);
        }
    })
}

/// End the process as `signal`'s default action does: restore it and raise it, so the parent
/// sees a process killed by that signal. Falls back to exit code 128 + the signal's number.
fn end_the_default_way(signal: StopSignal) -> ! {
    #[cfg(unix)]
    {
        // Raises the signal with its default action restored; returns only if that failed.
        let _ = signal_hook::low_level::emulate_default_handler(signal.number());
    }
    std::process::exit(128 + signal.number())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listener sees every signal sent to the process: run one of these tests at a
    /// time, or one test's SIGTERM would be a second signal to the other's `on_stop` and end
    /// the test binary.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    /// A SIGTERM sent after `listen` returned and before anything waits on it is held for
    /// `recv`, not acted on by the default handler (which would end this test process).
    #[tokio::test(flavor = "current_thread")]
    async fn a_sigterm_sent_before_anyone_waits_is_caught_and_named() {
        let _one = ONE_AT_A_TIME.lock().await;
        let mut signals = StopSignals::listen().unwrap();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        // Nothing has polled `signals` yet: the current-thread runtime has not run a task.
        assert_eq!(signals.recv().await, Some(StopSignal::Terminate));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_stop_registers_before_it_returns() {
        let _one = ONE_AT_A_TIME.lock().await;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = on_stop("testing", move || {
            let _ = tx.send("stopped");
        });
        // Sent before the spawned task has run once: with registration inside the task this
        // signal would meet the default action and end the process.
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        assert_eq!(rx.await.unwrap(), "stopped");
        // The task now waits for a second signal, which would end the process.
        task.abort();
    }
}
