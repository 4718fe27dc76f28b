//! Stall detection: a progress fingerprint per iteration, and how many consecutive iterations
//! had the same one.
//!
//! An iteration is one model answer and the outcomes of the tool calls it asked for. Its
//! fingerprint hashes the answer's text (trimmed), and the calls as a multiset (reordered
//! parallel calls are the same iteration) of canonical call keys: the tool's name, its
//! identifying arguments (`lsm_sandbox::Tool::identity_args`, every argument by default) as
//! JSON with sorted keys, and the call's outcome (result or error). A refused call
//! counts like any other, so repeated invalid calls are a stall; a retry with different
//! arguments, or the same call whose result changed, is progress.
//!
//! The fingerprint is computed by the fold ([`crate::RunState::apply`]) when an iteration
//! completes, so a resumed run knows how long the current streak is; the table of identifying
//! arguments is recorded in `run_started` for that reason.
//!
//! The digest is 128-bit SipHash-2-4 under a fixed key: the same in every process (a state
//! carried to another process keeps its streak), and a fraction of SHA-256's cost where the
//! CPU has no SHA instructions (it hashes every call's whole result text). It only tells
//! iterations apart: nothing trusts it against a forger, who could as well repeat a step.

use std::collections::BTreeMap;

use lsm_phase::{ToolCallRecord, ToolOutcome};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use siphasher::sip128::{Hasher128, SipHasher24};
use std::hash::Hasher;

/// Default number of identical consecutive iterations that is a stall.
pub const DEFAULT_STALL_THRESHOLD: u32 = 3;

/// What the model is told the first time its iterations repeat (recorded in `stall_nudge`).
pub const STALL_NUDGE: &str = "You have repeated the same step several times in a row with \
the same result: it is not making progress. Do something different — change the arguments, \
use another tool, or answer with what you have. If you repeat it again, this phase ends as \
stalled.";

/// `[stall]` in `lsm.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StallConfig {
    /// Detect stalls (on by default).
    pub enabled: bool,
    /// Identical consecutive iterations that are a stall (at least 2; default 3).
    pub threshold: u32,
}

impl Default for StallConfig {
    fn default() -> Self {
        StallConfig {
            enabled: true,
            threshold: DEFAULT_STALL_THRESHOLD,
        }
    }
}

impl StallConfig {
    /// Detection switched off.
    pub fn disabled() -> Self {
        StallConfig {
            enabled: false,
            ..StallConfig::default()
        }
    }
}

/// Which arguments identify a call, per tool (a tool absent: all of them).
pub type CallIdentity = BTreeMap<String, Vec<String>>;

/// The current phase's streak of identical iterations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallState {
    /// The last completed iteration's fingerprint.
    pub last: Option<String>,
    /// How many consecutive completed iterations had it (0 before the first).
    pub repeats: u32,
    /// The iteration after which the model was nudged, if it was (once per phase).
    pub nudged_at: Option<u32>,
}

impl StallState {
    /// One more iteration completed with `fingerprint`.
    pub fn observe(&mut self, fingerprint: String) {
        if self.last.as_deref() == Some(fingerprint.as_str()) {
            self.repeats = self.repeats.saturating_add(1);
        } else {
            self.last = Some(fingerprint);
            self.repeats = 1;
        }
    }
}

/// `value` as JSON with every object's keys sorted (whatever order they arrived in).
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(value, None, &mut out);
    // Only JSON text was written: always UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `v` as canonical JSON into `out`; when `v` is an object and `keep` is given, only its keys
/// named in `keep` (a call's identifying arguments). Written in place, with no copy of the
/// value and no text per key: this runs for every call of every iteration.
fn write_canonical(v: &Value, keep: Option<&[String]>, out: &mut Vec<u8>) {
    match v {
        Value::Object(map) => {
            // serde_json's map keeps insertion order with `preserve_order`; the keys are
            // sorted here either way.
            let mut entries: Vec<(&String, &Value)> = map
                .iter()
                .filter(|(k, _)| keep.is_none_or(|keep| keep.iter().any(|key| key == *k)))
                .collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(k, out);
                out.push(b':');
                write_canonical(item, None, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, None, out);
            }
            out.push(b']');
        }
        other => write_json(other, out),
    }
}

/// A string or a scalar as compact JSON, appended to `out`.
fn write_json<T: Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) {
    // Writing a string or a scalar into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, v);
}

/// The fixed key of the digests: `b"lsm stall digest"` as two little-endian words.
const DIGEST_KEY: (u64, u64) = (0x6c61_7473_206d_736c, 0x7473_6567_6964_206c);

/// 128-bit SipHash-2-4 of `parts`, each prefixed with its length (so no two lists of parts
/// run together into the same bytes).
fn digest(parts: &[&[u8]]) -> u128 {
    let mut h = SipHasher24::new_with_keys(DIGEST_KEY.0, DIGEST_KEY.1);
    for p in parts {
        h.write(&(p.len() as u64).to_le_bytes());
        h.write(p);
    }
    h.finish128().as_u128()
}

/// `digest` as 32 lowercase hexadecimal digits.
fn hex(digest: u128) -> String {
    format!("{digest:032x}")
}

/// The canonical key of one call: name, identifying arguments, outcome (32 hex digits).
pub fn call_key(call: &ToolCallRecord, identity: &CallIdentity) -> String {
    hex(call_digest(call, identity))
}

/// [`call_key`] before it is written out.
fn call_digest(call: &ToolCallRecord, identity: &CallIdentity) -> u128 {
    let mut arguments = Vec::new();
    write_canonical(
        &call.arguments,
        identity.get(&call.name).map(Vec::as_slice),
        &mut arguments,
    );
    let (kind, text) = match &call.outcome {
        ToolOutcome::Result(t) => ("result", t.as_str()),
        ToolOutcome::Error(t) => ("error", t.as_str()),
    };
    digest(&[
        call.name.as_bytes(),
        &arguments,
        kind.as_bytes(),
        text.as_bytes(),
    ])
}

/// The fingerprint of one iteration: its text and its calls (as a multiset), 32 hex digits.
pub fn fingerprint(text: &str, calls: &[ToolCallRecord], identity: &CallIdentity) -> String {
    // The calls' digests sorted (a multiset), as bytes: no text per call.
    let mut keys: Vec<u128> = calls.iter().map(|c| call_digest(c, identity)).collect();
    keys.sort_unstable();
    let joined: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
    hex(digest(&[text.trim().as_bytes(), &joined]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn call(name: &str, arguments: Value, result: &str) -> ToolCallRecord {
        ToolCallRecord {
            name: name.into(),
            arguments,
            outcome: ToolOutcome::Result(result.into()),
        }
    }

    fn none() -> CallIdentity {
        CallIdentity::new()
    }

    #[test]
    fn digests_are_sip_hash_2_4_of_length_prefixed_parts_under_the_fixed_key() {
        // The key and the framing are what make a fingerprint the same in every process.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&3u64.to_le_bytes());
        bytes.extend_from_slice(b"abc");
        bytes.extend_from_slice(&0u64.to_le_bytes());
        let whole = SipHasher24::new_with_keys(DIGEST_KEY.0, DIGEST_KEY.1)
            .hash(&bytes)
            .as_u128();
        assert_eq!(digest(&[b"abc", b""]), whole);
        // Where one part ends and the next begins is part of what is hashed.
        assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
        let key = hex(whole);
        assert_eq!(key.len(), 32);
        assert!(
            key.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert_eq!(hex(1), format!("{}1", "0".repeat(31)));
        // The value, as an independent SipHash-2-4-128 (checked against the algorithm's
        // reference vector) gives it: an iteration's fingerprint is the same in every process
        // and every release until this line changes.
        assert_eq!(
            fingerprint(" done ", &[], &none()),
            "61c8fe2c5f200d0cf93785bd2e4577a3"
        );
    }

    /// The canonical form and call key as they were made before they were written in place
    /// (a filtered copy of the arguments, a `String` per key and scalar): the specification
    /// the in-place writer must match byte for byte.
    fn canonical_by_copy(v: &Value) -> String {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let items: Vec<String> = keys
                    .into_iter()
                    .map(|k| {
                        format!(
                            "{}:{}",
                            Value::String(k.clone()),
                            canonical_by_copy(&map[k])
                        )
                    })
                    .collect();
                format!("{{{}}}", items.join(","))
            }
            Value::Array(items) => format!(
                "[{}]",
                items
                    .iter()
                    .map(canonical_by_copy)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            other => other.to_string(),
        }
    }

    fn call_key_by_copy(call: &ToolCallRecord, identity: &CallIdentity) -> String {
        let arguments = match (identity.get(&call.name), &call.arguments) {
            (Some(keys), Value::Object(map)) => Value::Object(
                map.iter()
                    .filter(|(k, _)| keys.iter().any(|key| key == *k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            (_, other) => other.clone(),
        };
        let (kind, text) = match &call.outcome {
            ToolOutcome::Result(t) => ("result", t.as_str()),
            ToolOutcome::Error(t) => ("error", t.as_str()),
        };
        hex(digest(&[
            call.name.as_bytes(),
            canonical_by_copy(&arguments).as_bytes(),
            kind.as_bytes(),
            text.as_bytes(),
        ]))
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            // Backslashes, quotes, every C0 control, non-ASCII: each escaped its own way.
            r#"[a-z\\"\x00-\x1f\u{e9}\u{1f980}]{0,8}"#.prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map(r#"[a-e\\"\n]{0,3}"#, inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn the_in_place_canonical_form_is_the_one_made_by_copy(v in json_value()) {
            prop_assert_eq!(canonical_json(&v), canonical_by_copy(&v));
            let mut identity = CallIdentity::new();
            identity.insert("t".into(), vec!["a".into(), "\"".into(), "missing".into()]);
            for name in ["t", "other"] {
                let c = call(name, v.clone(), "r");
                prop_assert_eq!(call_key(&c, &identity), call_key_by_copy(&c, &identity));
            }
        }
    }

    #[test]
    fn key_order_does_not_change_a_call() {
        let a: Value =
            serde_json::from_str(r#"{"path":"a.md","content":"x","n":{"b":1,"a":2}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"n":{"a":2,"b":1},"content":"x","path":"a.md"}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(
            fingerprint("", &[call("write_file", a, "ok")], &none()),
            fingerprint("", &[call("write_file", b, "ok")], &none())
        );
    }

    #[test]
    fn reordered_parallel_calls_are_the_same_iteration() {
        let x = call("read_file", json!({"path": "a"}), "A");
        let y = call("read_file", json!({"path": "b"}), "B");
        assert_eq!(
            fingerprint("t", &[x.clone(), y.clone()], &none()),
            fingerprint("t", &[y, x], &none())
        );
    }

    #[test]
    fn different_arguments_results_or_text_are_progress() {
        let base = fingerprint(
            "t",
            &[call(
                "write_file",
                json!({"path": "a", "content": "1"}),
                "ok",
            )],
            &none(),
        );
        for other in [
            fingerprint(
                "t",
                &[call(
                    "write_file",
                    json!({"path": "a", "content": "2"}),
                    "ok",
                )],
                &none(),
            ),
            fingerprint(
                "t",
                &[call(
                    "write_file",
                    json!({"path": "a", "content": "1"}),
                    "changed",
                )],
                &none(),
            ),
            fingerprint(
                "u",
                &[call(
                    "write_file",
                    json!({"path": "a", "content": "1"}),
                    "ok",
                )],
                &none(),
            ),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn an_error_and_a_result_with_the_same_text_differ() {
        let ok = call("t", json!({}), "x");
        let mut err = ok.clone();
        err.outcome = ToolOutcome::Error("x".into());
        assert_ne!(call_key(&ok, &none()), call_key(&err, &none()));
    }

    #[test]
    fn a_tool_s_identity_arguments_ignore_cosmetic_ones() {
        let mut identity = CallIdentity::new();
        identity.insert("search".into(), vec!["query".into()]);
        let a = call("search", json!({"query": "q", "why": "first try"}), "r");
        let b = call("search", json!({"query": "q", "why": "second try"}), "r");
        assert_eq!(call_key(&a, &identity), call_key(&b, &identity));
        assert_ne!(call_key(&a, &none()), call_key(&b, &none()));
    }

    #[test]
    fn a_streak_counts_consecutive_equal_fingerprints_only() {
        let mut s = StallState::default();
        s.observe("a".into());
        s.observe("a".into());
        assert_eq!(s.repeats, 2);
        s.observe("b".into());
        assert_eq!(s.repeats, 1);
        s.observe("b".into());
        s.observe("b".into());
        assert_eq!(s.repeats, 3);
    }
}
