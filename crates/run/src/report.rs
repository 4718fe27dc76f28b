//! The run's report (seed 003's `WorkerTurnReport`): read from the `complete` control tool's
//! arguments, with every finding's evidence checked against what the run really has — the
//! call ids of its successful tool calls, and the paths, URLs and source ids those calls
//! named or returned ([`evidence_keys`], folded into [`crate::RunState::evidence`]; the run's
//! report is [`crate::RunState::turn_report`]). A
//! reference that points at nothing is dropped and listed, like an unknown `[S#]` citation.

use std::collections::BTreeSet;

use lsm_phase::{Finding, TurnReport};
use serde_json::Value;

/// Most evidence keys a run keeps.
pub const MAX_EVIDENCE_KEYS: usize = 10_000;
/// Most findings, learnings or escalations a report keeps (each list).
const MAX_ITEMS: usize = 50;
/// Longest text of one item, in characters.
const MAX_TEXT: usize = 2_000;

/// The keys whose string values name a source.
const SOURCE_KEYS: [&str; 6] = ["path", "url", "chunk_id", "source", "source_id", "file"];

fn clip(text: &str) -> String {
    text.trim().chars().take(MAX_TEXT).collect()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(clip))
                .filter(|s| !s.is_empty())
                .take(MAX_ITEMS)
                .collect()
        })
        .unwrap_or_default()
}

/// The report the model gave in a `complete` call, its evidence checked against `evidence`.
/// Lenient: a missing list is empty, a confidence outside 0..1 is clamped (missing: 0.5).
pub fn from_arguments(arguments: &Value, evidence: &BTreeSet<String>) -> TurnReport {
    let mut dropped = Vec::new();
    let findings = arguments
        .get("findings")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|f| {
                    let claim = clip(f.get("claim").and_then(Value::as_str)?);
                    (!claim.is_empty()).then_some((claim, f))
                })
                .take(MAX_ITEMS)
                .map(|(claim, f)| {
                    let confidence = f
                        .get("confidence")
                        .and_then(Value::as_f64)
                        .filter(|c| c.is_finite())
                        .unwrap_or(0.5)
                        .clamp(0.0, 1.0);
                    let mut evidence_refs = Vec::new();
                    for r in strings(f.get("evidence_refs")) {
                        if evidence.contains(&r) {
                            evidence_refs.push(r);
                        } else {
                            dropped.push(r);
                        }
                    }
                    Finding {
                        claim,
                        confidence,
                        evidence_refs,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    TurnReport {
        summary: arguments
            .get("summary")
            .and_then(Value::as_str)
            .map(clip)
            .unwrap_or_default(),
        success: true,
        findings,
        learnings: strings(arguments.get("learnings")),
        escalations: strings(arguments.get("escalations")),
        dropped_evidence: dropped,
    }
}

/// What a successful call of a tool with `arguments`, answering `content`, lets a finding cite:
/// the source-naming values of its arguments and, when the answer is JSON, of its answer.
pub fn evidence_keys(arguments: &Value, content: &str) -> Vec<String> {
    let mut keys = Vec::new();
    collect(arguments, &mut keys, 1);
    if let Ok(v) = serde_json::from_str::<Value>(content) {
        collect(&v, &mut keys, 6);
    }
    keys
}

fn collect(v: &Value, out: &mut Vec<String>, depth: u32) {
    match v {
        Value::Object(map) => {
            for (k, item) in map {
                match item {
                    Value::String(s) if SOURCE_KEYS.contains(&k.as_str()) && !s.is_empty() => {
                        out.push(s.clone());
                    }
                    Value::Number(n) if k == "chunk_id" => out.push(n.to_string()),
                    _ if depth > 0 => collect(item, out, depth - 1),
                    _ => {}
                }
            }
        }
        Value::Array(items) if depth > 0 => {
            for item in items {
                collect(item, out, depth - 1);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn evidence_is_kept_only_when_the_run_has_it() {
        let evidence: BTreeSet<String> = ["call_1_0", "notes.md", "docs/a.md#3"]
            .into_iter()
            .map(String::from)
            .collect();
        let r = from_arguments(
            &json!({"summary": " Read the notes. ",
                    "findings": [
                        {"claim": "Soil holds carbon", "confidence": 1.7,
                         "evidence_refs": ["call_1_0", "notes.md", "made-up.md"]},
                        {"claim": "  "},
                        {"claim": "Tillage loses it", "evidence_refs": ["docs/a.md#3"]}],
                    "learnings": ["read before writing", 3],
                    "escalations": []}),
            &evidence,
        );
        assert_eq!(r.summary, "Read the notes.");
        assert!(r.success);
        assert_eq!(r.findings.len(), 2, "an empty claim is not a finding");
        assert_eq!(r.findings[0].confidence, 1.0, "clamped");
        assert_eq!(r.findings[0].evidence_refs, ["call_1_0", "notes.md"]);
        assert_eq!(r.findings[1].confidence, 0.5, "missing: 0.5");
        assert_eq!(r.dropped_evidence, ["made-up.md"]);
        assert_eq!(r.learnings, ["read before writing"]);
    }

    #[test]
    fn a_tool_call_s_sources_are_citable() {
        let mut keys = evidence_keys(
            &json!({"path": "notes.md", "content": "x"}),
            r#"{"answer": "a", "sources": [{"label": "S1", "path": "docs/a.md", "chunk_id": 7},
                {"url": "https://example.org/x"}]}"#,
        );
        keys.sort();
        assert_eq!(
            keys,
            ["7", "docs/a.md", "https://example.org/x", "notes.md"]
        );
        assert!(evidence_keys(&json!({}), "plain text").is_empty());
    }
}
