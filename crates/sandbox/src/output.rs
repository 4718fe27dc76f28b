//! Output cap and secret redaction. IMPLEMENTATION PENDING.

use std::borrow::Cow;

/// Cap `text` at `max_bytes` (on a char boundary), appending `[TRUNCATED n bytes]`.
pub fn cap_output(text: String, _max_bytes: usize) -> String {
    text
}

/// Replace secrets (`sk-…`, `key_…`, `*API_KEY=…`, long base64) with `[REDACTED]`.
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    Cow::Borrowed(text)
}
