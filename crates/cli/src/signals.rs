//! The signals that ask a command to stop cleanly: Ctrl-C (SIGINT) and SIGTERM.
//!
//! Both are registered with the kernel when [`StopSignals::listen`] returns, not when a task
//! first waits on them. A listener created lazily inside a spawned task leaves a window in
//! which the signal still has its default action: a SIGTERM that arrives before the task is
//! first polled kills the process (exit 143, no summary) instead of stopping it with code 4.
//! Every command that documents a clean stop registers here first, before it starts work.

/// Which signal asked for the stop, as the messages name it.
pub type SignalName = &'static str;

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
    pub async fn recv(&mut self) -> Option<SignalName> {
        #[cfg(unix)]
        {
            tokio::select! {
                r = self.interrupt.recv() => r.map(|()| "Ctrl-C"),
                r = self.terminate.recv() => r.map(|()| "SIGTERM"),
            }
        }
        #[cfg(not(unix))]
        tokio::signal::ctrl_c().await.ok().map(|()| "Ctrl-C")
    }
}

/// Register the stop signals now and, once one arrives, call `on_stop` with its name (in a
/// spawned task). If they cannot be registered, say so once on stderr: the command still runs,
/// but a signal then ends it the default way.
pub fn on_stop(on_stop: impl FnOnce(SignalName) + Send + 'static) -> tokio::task::JoinHandle<()> {
    let signals = StopSignals::listen();
    tokio::spawn(async move {
        match signals {
            Ok(mut s) => {
                if let Some(name) = s.recv().await {
                    on_stop(name);
                }
            }
            Err(e) => {
                eprintln!(
                    "warning: cannot catch Ctrl-C or SIGTERM ({e}); a signal ends this program without a clean stop"
                );
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SIGTERM sent after `listen` returned and before anything waits on it is held for
    /// `recv`, not acted on by the default handler (which would end this test process).
    #[tokio::test(flavor = "current_thread")]
    async fn a_sigterm_sent_before_anyone_waits_is_caught_and_named() {
        let mut signals = StopSignals::listen().unwrap();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        // Nothing has polled `signals` yet: the current-thread runtime has not run a task.
        assert_eq!(signals.recv().await, Some("SIGTERM"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn on_stop_registers_before_it_returns() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let task = on_stop(move |name| {
            let _ = tx.send(name);
        });
        // Sent before the spawned task has run once: with registration inside the task this
        // signal would meet the default action and end the process.
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        assert_eq!(rx.await.unwrap(), "SIGTERM");
        task.await.unwrap();
    }
}
