//! Blocking work (index reads, embedding, parsing: bound by the CPU or the disk) kept off the
//! async runtime's workers.

/// Run `work` on tokio's blocking pool when called inside a runtime, so it never stalls the
/// runtime's workers (other runs, the interaction channel, timers); inline otherwise. A panic
/// in `work` is resumed here, as it would have unwound had `work` run inline.
pub(crate) async fn off_runtime<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return work();
    };
    match handle.spawn_blocking(work).await {
        Ok(value) => value,
        Err(e) => match e.try_into_panic() {
            Ok(payload) => std::panic::resume_unwind(payload),
            // Only when the runtime shuts down before the work starts: the caller is being
            // dropped with it.
            Err(e) => std::panic::resume_unwind(Box::new(e.to_string())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn work_runs_on_another_thread_inside_a_runtime_and_inline_outside() {
        let here = std::thread::current().id();
        let there = off_runtime(|| std::thread::current().id()).await;
        assert_ne!(here, there, "a blocking-pool thread, not the runtime's");
        let inline = std::thread::spawn(move || {
            let id = std::thread::current().id();
            let got = futures_lite_block_on(off_runtime(|| std::thread::current().id()));
            (id, got)
        })
        .join()
        .unwrap();
        assert_eq!(inline.0, inline.1);
    }

    /// Polls a future that never waits to completion without a runtime.
    fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(f);
        loop {
            if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }
}
