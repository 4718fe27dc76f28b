//! Helpers shared by the request encoders: request bodies are serialized straight from the
//! wire-neutral [`crate::LlmRequest`] by borrowing, never through a `serde_json::Value` copy.

use serde::{Serialize, Serializer};
use serde_json::Value;

/// Serialize a request body. Serializing borrowed strings and `Value`s into a `Vec` cannot
/// fail (no map has non-string keys), so the error arm is unreachable in practice; it yields
/// an empty body, which the server rejects with a clear error rather than a panic here.
pub(crate) fn to_bytes(body: &impl Serialize) -> Vec<u8> {
    match serde_json::to_vec(body) {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::error!("a request body could not be serialized: {e}");
            Vec::new()
        }
    }
}

/// A JSON value sent as a string holding its JSON text (OpenAI's tool-call `arguments`).
pub(crate) struct JsonString<'a>(pub &'a Value);

impl Serialize for JsonString<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}
