//! Citation checking: an answer may cite only the `[S#]` labels of the sources it was given.

use std::collections::BTreeMap;

/// Check the `[S#]` citations of `answer` against `labels`: returns the answer with unknown
/// labels removed, the valid labels in order of first use, and the unknown ones.
pub fn check_citations(
    answer: &str,
    labels: &BTreeMap<String, String>,
) -> (String, Vec<String>, Vec<String>) {
    let mut out = String::with_capacity(answer.len());
    let mut valid: Vec<String> = Vec::new();
    let mut invalid: Vec<String> = Vec::new();
    let mut rest = answer;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let inner = &after[..close];
        let parts: Vec<&str> = inner.split([',', ';']).map(str::trim).collect();
        let is_citation = !parts.is_empty()
            && parts.iter().all(|p| {
                p.len() > 1 && p.starts_with('S') && p[1..].chars().all(|c| c.is_ascii_digit())
            });
        if !is_citation {
            out.push('[');
            rest = after;
            continue;
        }
        let mut kept: Vec<&str> = Vec::new();
        for p in parts {
            if labels.contains_key(p) {
                kept.push(p);
                if !valid.iter().any(|v| v == p) {
                    valid.push(p.to_string());
                }
            } else if !invalid.iter().any(|v| v == p) {
                invalid.push(p.to_string());
            }
        }
        if !kept.is_empty() {
            out.push('[');
            out.push_str(&kept.join(", "));
            out.push(']');
        } else if out.ends_with(' ') && after[close + 1..].starts_with(['.', ',', ';', ' ']) {
            out.pop();
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    (out, valid, invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_to_unknown_labels_are_dropped_and_reported() {
        let labels: BTreeMap<String, String> = [("S1", "a"), ("S2", "b")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (text, valid, invalid) = check_citations(
            "Lift grows [S2]. Drag too [S9]. Both [S1, S7] matter [S2][S1]. See [note].",
            &labels,
        );
        assert_eq!(
            text,
            "Lift grows [S2]. Drag too. Both [S1] matter [S2][S1]. See [note]."
        );
        assert_eq!(valid, ["S2", "S1"]);
        assert_eq!(invalid, ["S9", "S7"]);
    }
}
