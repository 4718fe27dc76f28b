//! Citation checking: an answer may cite only the `[S#]` labels of the sources it was given.
//! An answer that cites none is matched to its sources by its words ([`attribute`]).

use std::collections::{BTreeMap, HashSet};

use super::types::Source;
use crate::store::analyze;

/// Least share of an answer's distinct terms a source must hold to be named as its source.
const ATTRIBUTION_SHARE: f64 = 0.6;

/// Least number of an answer's terms a source must hold to be named as its source.
const ATTRIBUTION_MIN_TERMS: usize = 3;

/// Most sources named for an answer that cites none.
const ATTRIBUTION_MAX: usize = 2;

/// The labels of the sources an answer that cites none was drawn from, judged by its words.
///
/// The answer is judged whole and sentence by sentence (a sentence ends at `.`, `!` or `?`
/// before white space, or at a line break): a source is named when its text holds at least
/// 60 % of one such part's distinct terms (analyzed as the index analyzes text: stemmed,
/// stop words out), and at least three of them; best first (the most terms held by one
/// part), at most two. Small models answer from their sources without writing `[S#]`
/// markers, and often add a sentence of their own; judging sentences too names the source
/// a sentence repeats even when another sentence is made up, and names none for an answer
/// no part of which the sources hold.
pub fn attribute(answer: &str, sources: &[&Source]) -> Vec<String> {
    let mut parts: Vec<Vec<String>> = vec![analyze(answer)];
    let sentences: Vec<&str> = sentences(answer).collect();
    if sentences.len() > 1 {
        parts.extend(sentences.into_iter().map(analyze));
    }
    parts.retain(|terms| terms.len() >= ATTRIBUTION_MIN_TERMS);
    if parts.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(usize, &str)> = sources
        .iter()
        .filter_map(|s| {
            let held: HashSet<String> = analyze(&s.text).into_iter().collect();
            let best = parts
                .iter()
                .filter_map(|terms| {
                    let shared = terms.iter().filter(|t| held.contains(*t)).count();
                    #[allow(clippy::cast_precision_loss)] // term counts are small
                    let share = shared as f64 / terms.len() as f64;
                    (shared >= ATTRIBUTION_MIN_TERMS && share >= ATTRIBUTION_SHARE)
                        .then_some(shared)
                })
                .max()?;
            Some((best, s.label.as_str()))
        })
        .collect();
    scored.sort_by_key(|s| std::cmp::Reverse(s.0));
    scored
        .into_iter()
        .take(ATTRIBUTION_MAX)
        .map(|(_, label)| label.to_string())
        .collect()
}

/// The sentences of `text`: split after `.`, `!` or `?` followed by white space, and at
/// line breaks; empty pieces dropped.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split('\n').flat_map(|line| {
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if matches!(c, '.' | '!' | '?')
                && chars.peek().is_some_and(|(_, next)| next.is_whitespace())
            {
                pieces.push(&line[start..=i]);
                start = i + 1;
            }
        }
        pieces.push(&line[start..]);
        pieces.into_iter().map(str::trim).filter(|p| !p.is_empty())
    })
}

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

    fn source(label: &str, text: &str) -> Source {
        Source {
            label: label.into(),
            chunk_id: format!("{label}-chunk"),
            path: format!("{label}.md"),
            ext: "md".into(),
            content_type: "text".into(),
            heading: String::new(),
            chunk_index: 0,
            score: 1.0,
            relevance: 1.0,
            text: text.into(),
        }
    }

    #[test]
    fn an_answer_without_markers_is_matched_to_the_source_it_repeats() {
        let mascot = source(
            "S1",
            "The project's mascot is an orange crab named Pinchy. Pinchy appears on stickers.",
        );
        let office = source(
            "S2",
            "The team's office is on the fourth floor of the old mill.",
        );
        let sources = [&mascot, &office];
        assert_eq!(
            attribute(
                "The project's mascot is an orange crab named Pinchy.",
                &sources
            ),
            ["S1"]
        );
        // An answer the sources do not hold names none.
        assert!(
            attribute(
                "The mascot is a purple dragon called Spike from Mars.",
                &sources
            )
            .is_empty()
        );
        // Too few words to judge.
        assert!(attribute("Pinchy.", &sources).is_empty());
    }

    #[test]
    fn a_sentence_the_sources_hold_names_its_source_beside_a_made_up_one() {
        let release = source(
            "S1",
            "A new version is released every six weeks, on a Tuesday. Each release is \
             announced on the mailing list.",
        );
        let office = source(
            "S2",
            "The team's office is on the fourth floor of the old mill.",
        );
        let sources = [&office, &release];
        // The second sentence is made up; judged whole, the answer holds too few of the
        // source's terms (the rule before sentences were judged named no source).
        let answer = "A new version is released every six weeks, on a Tuesday. Releases \
                      are scheduled to be delivered by 2018-39 (the date of the last update \
                      of the calendar server).";
        assert_eq!(attribute(answer, &sources), ["S1"]);
        // A numbered list: each item is a sentence.
        let listed = "The sources say:\n\n1. The release schedule is announced on the \
                      mailing list.\n2. Something about a purple dragon from Mars.";
        assert_eq!(attribute(listed, &sources), ["S1"]);
        // No sentence the sources hold: no source.
        let made_up = "The mascot is a purple dragon. It lives on Mars with seven cats.";
        assert!(attribute(made_up, &sources).is_empty());
    }

    #[test]
    fn sentences_end_at_stops_before_white_space_and_at_line_breaks() {
        let got: Vec<&str> =
            sentences("One two. Three v1.2 four! Five?\n\n- Six seven\nEight.").collect();
        assert_eq!(
            got,
            [
                "One two.",
                "Three v1.2 four!",
                "Five?",
                "- Six seven",
                "Eight."
            ]
        );
    }

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
