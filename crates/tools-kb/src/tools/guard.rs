//! [`ModeGuard`]: the mode a tool call carries, checked before the tool runs.

use std::collections::BTreeMap;

use serde_json::Value;

use super::MODE_TOOLS;
use crate::error::KbError;
use crate::mode::{ModeConfig, ModePolicy, ModeSpec};

/// Why [`ModeGuard::check`] refused a tool call's mode. The message is for the model: it
/// should call again with a mode the policy allows, or without one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModeRefusal {
    /// The `context_package`'s `mode` is not a mode object. Pass the package as
    /// `query_context` returned it.
    #[error("mode refused: the package's mode is invalid: {0}")]
    InvalidPackageMode(serde_json::Error),
    /// The `mode` argument is neither a mode name nor a mode object. Use a configured name or
    /// a valid object.
    #[error("mode refused: not a mode name or object: {0}")]
    NotAMode(serde_json::Error),
    /// The mode is unknown, or the policy forbids what it asks for
    /// ([`KbError::InvalidRequest`], naming the field).
    #[error(transparent)]
    Policy(#[from] KbError),
}

/// Checks the mode a tool call carries against a [`ModePolicy`] before the tool runs — what
/// the harness calls for every tool in [`MODE_TOOLS`] (seed 002 §13.2). A refusal is a clear
/// message for the model.
#[derive(Debug, Clone)]
pub struct ModeGuard {
    policy: ModePolicy,
    custom: BTreeMap<String, ModeConfig>,
}

impl ModeGuard {
    /// A guard with this policy and these configured modes.
    pub fn new(policy: ModePolicy, custom: BTreeMap<String, ModeConfig>) -> Self {
        ModeGuard { policy, custom }
    }

    /// Check the call's mode; calls of other tools pass.
    ///
    /// # Errors
    /// A [`ModeRefusal`]: the reason the mode is refused.
    pub fn check(&self, tool: &str, args: &Value) -> Result<(), ModeRefusal> {
        if !MODE_TOOLS.contains(&tool) {
            return Ok(());
        }
        let mode = if tool == "execute_context" {
            match args.get("context_package").and_then(|p| p.get("mode")) {
                None | Some(Value::Null) => return Ok(()),
                Some(m) => {
                    let mut mode: ModeConfig = serde_json::from_value(m.clone())
                        .map_err(ModeRefusal::InvalidPackageMode)?;
                    // A package's mode was checked when it was built; remote sources are never
                    // used at this stage.
                    mode.remote_policy.enabled = false;
                    Some(mode)
                }
            }
        } else {
            match args.get("mode") {
                None | Some(Value::Null) => None,
                Some(m) => {
                    let spec: ModeSpec =
                        serde_json::from_value(m.clone()).map_err(ModeRefusal::NotAMode)?;
                    let composed = matches!(spec, ModeSpec::Config(_));
                    let mut mode = crate::mode::resolve(&spec, &self.custom)?;
                    if !composed {
                        // Named modes run without remote sources when URL access is off.
                        mode.remote_policy.enabled = false;
                    }
                    Some(mode)
                }
            }
        };
        match mode {
            None => Ok(()),
            Some(m) => Ok(self.policy.validate(&m)?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_guard_checks_composed_and_named_modes_and_packages() {
        let policy = ModePolicy::new(&["lexical".to_string(), "hybrid_rrf".to_string()], false);
        let g = ModeGuard::new(policy, BTreeMap::new());
        assert!(g.check("read_file", &json!({"mode": "anything"})).is_ok());
        assert!(g.check("query_context", &json!({"query": "x"})).is_ok());
        assert!(
            g.check("query_context", &json!({"query": "x", "mode": "insight"}))
                .is_ok()
        );
        let e = g
            .check(
                "query_and_synthesize",
                &json!({"query": "x", "mode": {"remote_policy": {"enabled": true}}}),
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("allow_url_access"), "{e}");
        let e = g
            .check(
                "query_context",
                &json!({"query": "x", "mode": {"retrieval_profile": "llm_rerank"}}),
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("not allowed"), "{e}");
        let e = g
            .check("query_context", &json!({"query": "x", "mode": "nope"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown mode"), "{e}");
        let e = g
            .check("execute_context", &json!({"question": "q", "context_package": {"mode": {"retrieval_profile": "dense_only"}}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not allowed"), "{e}");
    }

    #[test]
    fn mode_injection_attempts_are_refused() {
        let policy = ModePolicy::new(&["lexical".to_string()], false);
        let g = ModeGuard::new(policy, BTreeMap::new());
        // A mode object smuggled in as a string is just an unknown name.
        let e = g
            .check(
                "query_context",
                &json!({"query": "x", "mode": "{\"remote_policy\": {\"enabled\": true}}"}),
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown mode"), "{e}");
        // Unknown fields (a made-up escape hatch) are refused, not ignored.
        let e = g
            .check("query_context", &json!({"query": "x", "mode": {"retrieval_profile": "lexical", "allow_url_access": true}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("mode refused"), "{e}");
        // Remote sources nested in a composed mode, even with an allowed profile.
        let e = g
            .check("query_and_synthesize", &json!({"query": "x", "mode": {"retrieval_profile": "lexical", "remote_policy": {"enabled": true, "remote_providers": ["wikipedia"]}}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("allow_url_access"), "{e}");
        // A built-in name whose profile is not allowed here.
        let e = g
            .check("query_context", &json!({"query": "x", "mode": "grounded"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("hybrid_rrf"), "{e}");
        // A package with a mode of the wrong shape.
        let e = g
            .check(
                "execute_context",
                &json!({"question": "q", "context_package": {"mode": "grounded"}}),
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid"), "{e}");
    }
}
