//! Standing context from persistent memory, injected before every LLM call.

/// Supplies standing context for an agent's next call. The memory store implements it; the
/// harness asks before every LLM call.
#[async_trait::async_trait]
pub trait MemoryProvider: Send + Sync {
    /// A system block for `agent` about `topic` (the last user message), or `None`.
    async fn standing_context(&self, agent: &str, topic: &str) -> Option<String>;
}

/// No memory: the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoMemory;

#[async_trait::async_trait]
impl MemoryProvider for NoMemory {
    async fn standing_context(&self, _agent: &str, _topic: &str) -> Option<String> {
        None
    }
}
