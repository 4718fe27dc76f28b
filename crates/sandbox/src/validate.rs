//! Argument validation against a tool's JSON schema.
//! IMPLEMENTATION PENDING (sandbox helper).

/// A compiled schema.
pub(crate) struct Validator {}

impl Validator {
    /// Compile `schema`. Err: why the schema is unusable.
    pub(crate) fn new(_schema: &serde_json::Value) -> Result<Self, String> {
        Ok(Validator {})
    }

    /// Check `args`: must be an object matching the schema (required, unexpected, JSON types —
    /// an integer is not a bool), and no string anywhere longer than `max_string_bytes`.
    /// Err: one clear message naming the argument.
    pub(crate) fn validate(
        &self,
        _args: &serde_json::Value,
        _max_string_bytes: usize,
    ) -> Result<(), String> {
        Err("argument validation is not implemented yet".into())
    }
}
