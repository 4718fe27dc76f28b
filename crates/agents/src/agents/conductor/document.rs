//! The conductor's final document: the numbered findings, the citations the answer makes of
//! them, and the evidence listed after it.

use std::collections::BTreeMap;

use super::{Item, Numbered, Status};
use crate::parse::clip;

/// Every finding of the items that ran, numbered F1, F2, … in agenda order.
pub(super) fn numbered_findings(items: &[Item]) -> Vec<Numbered> {
    let mut out = Vec::new();
    for item in items {
        if let Status::Done(o) | Status::Failed(o) = &item.status {
            for f in &o.report.findings {
                out.push(Numbered {
                    label: format!("F{}", out.len() + 1),
                    item: item.id.clone(),
                    finding: f.clone(),
                });
            }
        }
    }
    out
}

pub(super) fn findings_text(findings: &[Numbered]) -> String {
    if findings.is_empty() {
        return "(none)\n".to_string();
    }
    findings
        .iter()
        .map(|n| {
            format!(
                "[{}] {} (from {}, confidence {:.2})\n",
                n.label,
                clip(&n.finding.claim, 300),
                n.item,
                n.finding.confidence
            )
        })
        .collect()
}

/// The `[F#]` labels `text` cites, in order, once each.
fn cited_labels(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("[F") {
        let after = &rest[start + 2..];
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && after[digits.len()..].starts_with(']') {
            let label = format!("F{digits}");
            if !out.contains(&label) {
                out.push(label);
            }
        }
        rest = &rest[start + 2..];
    }
    out
}

/// The saved report: the model's text with citations of unknown findings removed (and said
/// so), then the cited findings with their evidence, then the escalations.
pub(super) fn final_document(
    task: &str,
    body: &str,
    findings: &[Numbered],
    items: &[Item],
) -> String {
    let known: BTreeMap<&str, &Numbered> = findings.iter().map(|n| (n.label.as_str(), n)).collect();
    let mut text = body.trim().to_string();
    let mut unknown = Vec::new();
    for label in cited_labels(body) {
        if !known.contains_key(label.as_str()) {
            text = text.replace(&format!("[{label}]"), "");
            unknown.push(label);
        }
    }
    let cited: Vec<&Numbered> = cited_labels(&text)
        .iter()
        .filter_map(|l| known.get(l.as_str()).copied())
        .collect();
    let mut doc = String::new();
    if !text.starts_with('#') {
        doc.push_str(&format!("# {task}\n\n"));
    }
    doc.push_str(&text);
    doc.push_str("\n\n## Findings cited\n\n");
    if cited.is_empty() {
        doc.push_str("None.\n");
    }
    for n in &cited {
        let evidence = if n.finding.evidence_refs.is_empty() {
            "no evidence given".to_string()
        } else {
            n.finding.evidence_refs.join(", ")
        };
        doc.push_str(&format!(
            "- [{}] {} — from {}, confidence {:.2}; evidence: {evidence}\n",
            n.label, n.finding.claim, n.item, n.finding.confidence
        ));
    }
    if !unknown.is_empty() {
        doc.push_str(&format!(
            "\n_Citations of findings that do not exist were removed: {}._\n",
            unknown.join(", ")
        ));
    }
    let escalations: Vec<String> = items
        .iter()
        .flat_map(|i| match &i.status {
            Status::Failed(o) => {
                let mut lines: Vec<String> = o
                    .report
                    .escalations
                    .iter()
                    .map(|e| format!("{} ({}): {e}", i.id, o.stop_reason))
                    .collect();
                if lines.is_empty() {
                    lines.push(format!("{}: the worker ended {}", i.id, o.stop_reason));
                }
                lines
            }
            Status::Done(o) => o
                .report
                .escalations
                .iter()
                .map(|e| format!("{}: {e}", i.id))
                .collect(),
            Status::Skipped(why) => vec![format!("{}: {why}", i.id)],
            Status::Pending => Vec::new(),
        })
        .collect();
    if !escalations.is_empty() {
        doc.push_str("\n## Escalations\n\n");
        for e in escalations {
            doc.push_str(&format!("- {e}\n"));
        }
    }
    doc
}
