//! Retrieval profiles and the pieces of post-retrieval: reciprocal-rank fusion, near-duplicate
//! removal (MinHash), MMR diversity with a per-file cap, and relevance.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use tantivy::DocAddress;

use crate::error::{KbError, Result};
use crate::store::{Hit, dot};

/// How candidates are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// BM25 only.
    Lexical,
    /// Dense vectors only (lexical when there is no embedder).
    DenseOnly,
    /// Dense and BM25 rankings fused by weighted reciprocal rank (k = 60).
    HybridRrf,
    /// `hybrid_rrf`, then the LLM re-orders the best candidates.
    LlmRerank,
}

impl Profile {
    /// Every profile.
    pub const ALL: [Profile; 4] = [
        Profile::Lexical,
        Profile::DenseOnly,
        Profile::HybridRrf,
        Profile::LlmRerank,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Lexical => "lexical",
            Profile::DenseOnly => "dense_only",
            Profile::HybridRrf => "hybrid_rrf",
            Profile::LlmRerank => "llm_rerank",
        }
    }

    /// Parse a wire name.
    ///
    /// # Errors
    /// [`KbError::InvalidRequest`] listing the profiles.
    pub fn parse(name: &str) -> Result<Self> {
        Profile::ALL
            .into_iter()
            .find(|p| p.as_str() == name)
            .ok_or_else(|| {
                KbError::InvalidRequest(format!(
                    "unknown retrieval_profile '{name}'; use one of: {}",
                    Profile::ALL.map(Profile::as_str).join(", ")
                ))
            })
    }

    /// Whether it needs dense vectors.
    pub fn uses_dense(self) -> bool {
        !matches!(self, Profile::Lexical)
    }
}

/// Weighted reciprocal-rank fusion: `Σ weight / (k + rank)` with 1-based ranks. Returns the
/// fused list, best first (ties by address for determinism).
pub fn rrf(rankings: &[(&[Hit], f32)], k: f32) -> Vec<Hit> {
    let mut scores: HashMap<DocAddress, f32> = HashMap::new();
    for (hits, weight) in rankings {
        for (rank, hit) in hits.iter().enumerate() {
            *scores.entry(hit.addr).or_insert(0.0) += weight / (k + rank as f32 + 1.0);
        }
    }
    let mut out: Vec<Hit> = scores
        .into_iter()
        .map(|(addr, score)| Hit { addr, score })
        .collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.addr.cmp(&b.addr)));
    out
}

/// Number of MinHash functions.
const MINHASH_PERMUTATIONS: usize = 64;

/// Odd multipliers and offsets of the MinHash functions (splitmix64 of the slot number).
const MULTIPLIERS: [u32; MINHASH_PERMUTATIONS] = constants(1);
const OFFSETS: [u32; MINHASH_PERMUTATIONS] = constants(2);

const fn constants(seed: u64) -> [u32; MINHASH_PERMUTATIONS] {
    let mut out = [0u32; MINHASH_PERMUTATIONS];
    let mut i = 0;
    while i < MINHASH_PERMUTATIONS {
        let mut z = (i as u64 + seed * 1000).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out[i] = ((z ^ (z >> 31)) as u32) | 1;
        i += 1;
    }
    out
}

/// A MinHash signature of a text's word 3-shingles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinHash(Vec<u32>);

impl MinHash {
    /// The signature of `text` (lower-cased words; texts under three words use the words).
    pub fn of(text: &str) -> Self {
        // One hash per word, lower-cased on the fly, without allocating.
        let words: Vec<u64> = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(|w| {
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for c in w.chars().flat_map(char::to_lowercase) {
                    h ^= u64::from(c);
                    h = h.wrapping_mul(0x0000_0100_0000_01b3);
                }
                h
            })
            .collect();
        let shingles: Vec<u64> = if words.len() < 3 {
            words
        } else {
            words
                .windows(3)
                .map(|w| w[0].rotate_left(21) ^ w[1].rotate_left(42) ^ w[2] ^ 0x9E37_79B9_7F4A_7C15)
                .collect()
        };
        let mut sig = [u32::MAX; MINHASH_PERMUTATIONS];
        for s in shingles {
            let s = (s ^ (s >> 32)) as u32;
            // One 32-bit multiply-xorshift hash per slot, independent of the others, so the
            // loop runs eight slots per vector instruction.
            for (slot, (a, b)) in sig.iter_mut().zip(MULTIPLIERS.iter().zip(&OFFSETS)) {
                let h = (s ^ b).wrapping_mul(*a);
                *slot = (*slot).min(h ^ (h >> 15));
            }
        }
        MinHash(sig.to_vec())
    }

    /// Estimated Jaccard similarity of the shingle sets.
    pub fn similarity(&self, other: &MinHash) -> f32 {
        if self.0.is_empty() {
            return 0.0;
        }
        let same = self.0.iter().zip(&other.0).filter(|(a, b)| a == b).count();
        same as f32 / self.0.len() as f32
    }
}

/// Indices of the items to keep: an item whose estimated Jaccard similarity with a better
/// (earlier) kept item reaches `threshold` is a near-duplicate and dropped.
pub fn near_duplicates_removed(texts: &[&str], threshold: f32) -> Vec<usize> {
    let sigs: Vec<MinHash> = texts.iter().map(|t| MinHash::of(t)).collect();
    let mut kept: Vec<usize> = Vec::new();
    for i in 0..texts.len() {
        if kept
            .iter()
            .all(|&j| sigs[i].similarity(&sigs[j]) < threshold)
        {
            kept.push(i);
        }
    }
    kept
}

/// One item MMR chooses among.
#[derive(Debug, Clone)]
pub struct MmrItem<'a> {
    /// Relevance to the query, normalized to 0..1.
    pub relevance: f32,
    /// The item's vector (unit length), when it has one.
    pub vector: Option<&'a [f32]>,
    /// Its words (for similarity when there are no vectors).
    pub words: HashSet<String>,
    /// Its file (for the per-file cap).
    pub file: &'a str,
}

fn similarity(a: &MmrItem<'_>, b: &MmrItem<'_>) -> f32 {
    match (a.vector, b.vector) {
        (Some(x), Some(y)) => dot(x, y),
        _ => {
            let inter = a.words.intersection(&b.words).count();
            let union = a.words.len() + b.words.len() - inter;
            if union == 0 {
                0.0
            } else {
                inter as f32 / union as f32
            }
        }
    }
}

/// Maximal marginal relevance: pick up to `k` items, each maximizing
/// `λ·relevance − (1−λ)·max similarity to those already picked`, never more than
/// `max_per_file` of one file (0: no cap). Returns indices in pick order.
pub fn mmr(items: &[MmrItem<'_>], k: usize, lambda: f32, max_per_file: usize) -> Vec<usize> {
    let mut picked: Vec<usize> = Vec::new();
    let mut per_file: HashMap<&str, usize> = HashMap::new();
    let mut remaining: Vec<usize> = (0..items.len()).collect();
    while picked.len() < k && !remaining.is_empty() {
        let mut best: Option<(usize, f32)> = None;
        for (pos, &i) in remaining.iter().enumerate() {
            if max_per_file > 0 && per_file.get(items[i].file).copied().unwrap_or(0) >= max_per_file
            {
                continue;
            }
            let redundancy = picked
                .iter()
                .map(|&j| similarity(&items[i], &items[j]))
                .fold(0.0f32, f32::max);
            let score = lambda * items[i].relevance - (1.0 - lambda) * redundancy;
            if best.is_none_or(|(_, s)| score > s) {
                best = Some((pos, score));
            }
        }
        let Some((pos, _)) = best else { break };
        let i = remaining.remove(pos);
        *per_file.entry(items[i].file).or_insert(0) += 1;
        picked.push(i);
    }
    picked
}

/// The share of the query's analyzed terms that occur in `text` (0..1): the relevance of a
/// chunk when there are no vectors. Retrieval counts the same from the postings
/// (`Snapshot::term_matches`); this is the definition, kept for its test.
#[cfg(test)]
fn term_coverage(query_terms: &[String], text: &str) -> f32 {
    if query_terms.is_empty() {
        return 0.0;
    }
    let terms: HashSet<String> = crate::store::analyze(text).into_iter().collect();
    let hit = query_terms.iter().filter(|t| terms.contains(*t)).count();
    hit as f32 / query_terms.len() as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(seg: u32, doc: u32, score: f32) -> Hit {
        Hit {
            addr: DocAddress::new(seg, doc),
            score,
        }
    }

    #[test]
    fn rrf_rewards_agreement_and_respects_weights() {
        let dense = [hit(0, 1, 0.9), hit(0, 2, 0.8), hit(0, 3, 0.7)];
        let lexical = [hit(0, 3, 12.0), hit(0, 2, 10.0), hit(0, 4, 9.0)];
        let fused = rrf(&[(&dense, 0.7), (&lexical, 0.3)], 60.0);
        let order: Vec<u32> = fused.iter().map(|h| h.addr.doc_id).collect();
        // 2 is second in both; 3 is first in lexical but third in dense.
        assert_eq!(order[0], 2);
        assert_eq!(order.len(), 4);
        let expected = 0.7 / 62.0 + 0.3 / 62.0;
        assert!((fused[0].score - expected).abs() < 1e-6);
        // With all the weight on lexical, its order wins.
        let lex_only = rrf(&[(&dense, 0.0), (&lexical, 1.0)], 60.0);
        assert_eq!(lex_only[0].addr.doc_id, 3);
    }

    #[test]
    fn near_duplicates_are_dropped_keeping_the_better() {
        let a = "the quick brown fox jumps over the lazy dog near the river bank today";
        let b = "the quick brown fox jumps over the lazy dog near the river bank today!";
        let c = "an entirely different sentence about supersonic wing flutter analysis";
        assert_eq!(near_duplicates_removed(&[a, b, c], 0.8), [0, 2]);
        assert!(MinHash::of(a).similarity(&MinHash::of(c)) < 0.2);
    }

    #[test]
    fn mmr_prefers_diversity_and_caps_per_file() {
        let words = |s: &str| s.split(' ').map(str::to_string).collect::<HashSet<_>>();
        let items = vec![
            MmrItem {
                relevance: 1.0,
                vector: None,
                words: words("a b c d"),
                file: "f1",
            },
            MmrItem {
                relevance: 0.95,
                vector: None,
                words: words("a b c d"),
                file: "f2",
            },
            MmrItem {
                relevance: 0.7,
                vector: None,
                words: words("x y z w"),
                file: "f3",
            },
            MmrItem {
                relevance: 0.6,
                vector: None,
                words: words("p q r s"),
                file: "f1",
            },
        ];
        assert_eq!(mmr(&items, 3, 0.7, 0), [0, 2, 3]);
        assert_eq!(mmr(&items, 4, 1.0, 1), [0, 1, 2]);
    }

    #[test]
    fn coverage_counts_query_terms_found() {
        let q = crate::store::analyze("boundary layer transition");
        assert!((term_coverage(&q, "The boundary layers of a plate") - 2.0 / 3.0).abs() < 1e-6);
        assert_eq!(term_coverage(&[], "x"), 0.0);
    }

    #[test]
    fn profiles_parse_and_unknown_names_list_the_choices() {
        for p in Profile::ALL {
            assert_eq!(Profile::parse(p.as_str()).unwrap(), p);
        }
        let e = Profile::parse("hyde").unwrap_err().to_string();
        assert!(e.contains("hybrid_rrf"), "{e}");
    }
}
