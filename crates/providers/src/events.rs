//! What a provider reports while a call is under way: streamed text and tool-call progress,
//! retries, a broken conversation chain. The harness forwards these to its event stream.

pub use lsm_run::message::ProviderEvent;

/// Receives a call's [`ProviderEvent`]s as they happen. Must not block.
pub trait CallObserver: Send + Sync {
    /// One event.
    fn on_event(&self, event: ProviderEvent);
}

/// An observer that ignores everything (what [`crate::Provider::complete`] uses).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl CallObserver for NoObserver {
    fn on_event(&self, _event: ProviderEvent) {}
}

/// An observer that keeps every event (for tests and for callers that want them afterwards).
#[derive(Debug, Default)]
pub struct CollectingObserver {
    events: std::sync::Mutex<Vec<ProviderEvent>>,
}

impl CollectingObserver {
    /// Every event so far, in order.
    pub fn events(&self) -> Vec<ProviderEvent> {
        match self.events.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

impl CallObserver for CollectingObserver {
    fn on_event(&self, event: ProviderEvent) {
        match self.events.lock() {
            Ok(mut g) => g.push(event),
            Err(p) => p.into_inner().push(event),
        }
    }
}
