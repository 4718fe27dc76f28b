//! Choosing the next token: allowed set (from the grammar, if any), repetition penalty,
//! greedy or seeded sampling; and the loop detector that ends free text which repeats itself.

use std::collections::HashMap;

/// Tokens looked back at by the repetition penalty.
pub const PENALTY_WINDOW: usize = 64;

/// Length of the token sequence whose second occurrence counts as a loop in free text.
pub const LOOP_NGRAM: usize = 12;

/// Sampling settings of one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// 0: always the most likely token.
    pub temperature: f32,
    /// Divides a positive logit (multiplies a negative one) of a recently seen token.
    pub repeat_penalty: f32,
}

/// A small seeded generator (xorshift64*): repeatable runs without another dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u32) -> Self {
        Rng(u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number in [0, 1).
    #[allow(clippy::cast_precision_loss)] // 53 bits fit an f64 exactly
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (v >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Apply the repetition penalty to `logits` for the tokens in `recent`.
pub fn penalize(logits: &mut [f32], recent: &[u32], penalty: f32) {
    if penalty == 1.0 {
        return;
    }
    let mut seen: Vec<u32> = recent.to_vec();
    seen.sort_unstable();
    seen.dedup();
    for t in seen {
        if let Some(l) = usize::try_from(t).ok().and_then(|i| logits.get_mut(i)) {
            *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
        }
    }
}

/// The chosen token among those `allowed` says yes to (all when it is `None`); `None` when
/// nothing is allowed.
pub fn choose(
    logits: &[f32],
    allowed: Option<&dyn Fn(u32) -> bool>,
    sampling: Sampling,
    rng: &mut Rng,
) -> Option<u32> {
    let ok = |i: usize| {
        let Ok(t) = u32::try_from(i) else {
            return false;
        };
        allowed.is_none_or(|f| f(t)) && logits[i].is_finite()
    };
    if sampling.temperature <= 0.0 {
        let mut best: Option<(usize, f32)> = None;
        for (i, &l) in logits.iter().enumerate() {
            if ok(i) && best.is_none_or(|(_, b)| l > b) {
                best = Some((i, l));
            }
        }
        return best.and_then(|(i, _)| u32::try_from(i).ok());
    }
    // Top-40 by logit, softmax at the temperature, then one draw.
    let mut top: Vec<(usize, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(i, _)| ok(*i))
        .map(|(i, &l)| (i, l))
        .collect();
    top.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
    top.truncate(40);
    let max = top.first()?.1;
    let weights: Vec<f64> = top
        .iter()
        .map(|(_, l)| f64::from((l - max) / sampling.temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut draw = rng.next_f64() * total;
    for ((i, _), w) in top.iter().zip(&weights) {
        draw -= w;
        if draw <= 0.0 {
            return u32::try_from(*i).ok();
        }
    }
    top.last().and_then(|(i, _)| u32::try_from(*i).ok())
}

/// Detects free text that starts repeating itself: the moment a sequence of [`LOOP_NGRAM`]
/// tokens occurs a second time.
#[derive(Debug, Default)]
pub struct LoopDetector {
    seen: HashMap<Vec<u32>, usize>,
}

impl LoopDetector {
    /// `tokens` is everything generated so far (the newest last). When its last
    /// [`LOOP_NGRAM`] tokens occurred before, the number of tokens to keep: up to the start
    /// of the repetition.
    pub fn check(&mut self, tokens: &[u32]) -> Option<usize> {
        if tokens.len() < LOOP_NGRAM {
            return None;
        }
        let start = tokens.len() - LOOP_NGRAM;
        let gram = tokens[start..].to_vec();
        match self.seen.get(&gram) {
            // Keep everything before the second occurrence.
            Some(_) => Some(start),
            None => {
                self.seen.insert(gram, start);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GREEDY: Sampling = Sampling {
        temperature: 0.0,
        repeat_penalty: 1.0,
    };

    #[test]
    fn greedy_takes_the_best_allowed_token() {
        let logits = [0.1, 3.0, 2.0, f32::NEG_INFINITY];
        let mut rng = Rng::new(1);
        assert_eq!(choose(&logits, None, GREEDY, &mut rng), Some(1));
        let not_one = |t: u32| t != 1;
        assert_eq!(choose(&logits, Some(&not_one), GREEDY, &mut rng), Some(2));
        let only_three = |t: u32| t == 3;
        assert_eq!(choose(&logits, Some(&only_three), GREEDY, &mut rng), None);
    }

    #[test]
    fn sampling_is_repeatable_and_stays_in_the_allowed_set() {
        let logits: Vec<f32> = (0..100).map(|i| (i % 7) as f32).collect();
        let s = Sampling {
            temperature: 0.8,
            repeat_penalty: 1.0,
        };
        let even = |t: u32| t % 2 == 0;
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..20)
                .map(|_| choose(&logits, Some(&even), s, &mut rng).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert!(draw(7).iter().all(|t| t % 2 == 0));
    }

    #[test]
    fn the_penalty_lowers_recent_tokens() {
        let mut logits = [2.0, -2.0, 2.0];
        penalize(&mut logits, &[0, 1, 0], 2.0);
        assert_eq!(logits, [1.0, -4.0, 2.0]);
    }

    #[test]
    fn a_repeated_ngram_is_cut_at_its_second_start() {
        let mut d = LoopDetector::default();
        // A 5-token phrase repeated: "a b c d e a b c d e a b c ..."
        let phrase = [10, 11, 12, 13, 14];
        let mut tokens = Vec::new();
        let mut cut = None;
        for i in 0..40 {
            tokens.push(phrase[i % 5]);
            if let Some(keep) = d.check(&tokens) {
                cut = Some((tokens.len(), keep));
                break;
            }
        }
        let (at, keep) = cut.expect("the loop is detected");
        assert_eq!(at, 17, "the first 12-gram seen twice ends at token 17");
        assert_eq!(keep, 5, "one copy of the phrase is kept");
        let mut fresh = LoopDetector::default();
        let prose: Vec<u32> = (0..200).collect();
        for n in 1..=prose.len() {
            assert_eq!(fresh.check(&prose[..n]), None);
        }
    }
}
