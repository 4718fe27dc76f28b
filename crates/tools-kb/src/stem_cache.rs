//! A stemming token filter that remembers its answers.
//!
//! Snowball stemming is the most expensive step of analysing text for BM25, and text repeats
//! its words (a few thousand distinct words make up most of any document), so each analyzer
//! keeps the stems it has computed. The result is exactly tantivy's `Stemmer`'s; only the
//! work is shared. The memory is bounded: the cache is emptied when it reaches
//! [`MAX_ENTRIES`] words.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use rust_stemmers::Algorithm;
use tantivy::tokenizer::{Token, TokenFilter, TokenStream, Tokenizer};

/// Most words remembered by one analyzer before its cache is emptied.
pub const MAX_ENTRIES: usize = 64 * 1024;

/// A multiply-rotate hash over 8-byte words (the rustc/Firefox "Fx" hash): short keys and
/// no adversary (the words of the user's own documents), so speed is all that matters.
#[derive(Debug, Clone, Copy, Default)]
pub struct WordHasher(u64);

impl WordHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
}

/// Word → its stem, or `None` when the stem is the word itself (most words).
type StemMap = HashMap<String, Option<String>, BuildHasherDefault<WordHasher>>;

/// A Snowball stemmer, with a cache of stems per analyzer.
#[derive(Clone, Copy, Debug)]
pub struct CachedStemmer {
    algorithm: Algorithm,
}

impl CachedStemmer {
    /// The English stemmer (what tantivy's `Stemmer::new(Language::English)` runs).
    pub fn english() -> Self {
        CachedStemmer {
            algorithm: Algorithm::English,
        }
    }
}

impl TokenFilter for CachedStemmer {
    type Tokenizer<T: Tokenizer> = CachedStemmerFilter<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> CachedStemmerFilter<T> {
        CachedStemmerFilter {
            algorithm: self.algorithm,
            inner: tokenizer,
            cache: StemMap::default(),
        }
    }
}

/// The tokenizer [`CachedStemmer`] wraps around another; owns the cache.
#[derive(Clone)]
pub struct CachedStemmerFilter<T> {
    algorithm: Algorithm,
    inner: T,
    cache: StemMap,
}

impl<T: Tokenizer> Tokenizer for CachedStemmerFilter<T> {
    type TokenStream<'a> = CachedStemmerStream<'a, T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        if self.cache.len() >= MAX_ENTRIES {
            self.cache.clear();
        }
        CachedStemmerStream {
            tail: self.inner.token_stream(text),
            stemmer: rust_stemmers::Stemmer::create(self.algorithm),
            cache: &mut self.cache,
        }
    }
}

/// The token stream of [`CachedStemmerFilter`].
pub struct CachedStemmerStream<'a, T> {
    tail: T,
    stemmer: rust_stemmers::Stemmer,
    cache: &'a mut StemMap,
}

impl<T: TokenStream> TokenStream for CachedStemmerStream<'_, T> {
    fn advance(&mut self) -> bool {
        if !self.tail.advance() {
            return false;
        }
        let token = self.tail.token_mut();
        match self.cache.get(token.text.as_str()) {
            Some(Some(stem)) => {
                token.text.clear();
                token.text.push_str(stem);
            }
            Some(None) => {}
            None => {
                let stem = self.stemmer.stem(&token.text).into_owned();
                let changed = (stem != token.text).then_some(stem);
                if self.cache.len() < MAX_ENTRIES {
                    self.cache.insert(token.text.clone(), changed.clone());
                }
                if let Some(stem) = changed {
                    token.text = stem;
                }
            }
        }
        true
    }

    fn token(&self) -> &Token {
        self.tail.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.tail.token_mut()
    }
}

#[cfg(test)]
mod tests {
    use tantivy::tokenizer::{Language, LowerCaser, SimpleTokenizer, Stemmer, TextAnalyzer};

    use super::*;

    fn terms(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
        let mut stream = analyzer.token_stream(text);
        let mut out = Vec::new();
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }

    #[test]
    fn stems_exactly_as_tantivys_stemmer_twice_over() {
        let text = "Running runners ran; the boundary layers of flying wings, generously \
                    generalized. Running again: layers, wings, boundaries.";
        let mut plain = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(LowerCaser)
            .filter(Stemmer::new(Language::English))
            .build();
        let mut cached = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(LowerCaser)
            .filter(CachedStemmer::english())
            .build();
        let want = terms(&mut plain, text);
        assert!(want.contains(&"boundari".to_string()));
        // The second pass is served from the cache.
        assert_eq!(terms(&mut cached, text), want);
        assert_eq!(terms(&mut cached, text), want);
    }

    #[test]
    fn the_cache_stays_within_its_bound_and_keeps_stemming_after_a_reset() {
        let mut filter = CachedStemmer::english().transform(SimpleTokenizer::default());
        // More distinct words than the cache holds, in two texts.
        let words: Vec<String> = (0..MAX_ENTRIES + 100)
            .map(|i| format!("running{i}x"))
            .collect();
        for half in words.chunks(MAX_ENTRIES / 2 + 60) {
            let text = half.join(" ");
            let mut stream = filter.token_stream(&text);
            while stream.advance() {}
            assert!(filter.cache.len() <= MAX_ENTRIES, "{}", filter.cache.len());
        }
        let mut full = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(CachedStemmer::english())
            .build();
        let _ = terms(&mut full, &words.join(" "));
        assert_eq!(terms(&mut full, "runners running"), ["runner", "run"]);
    }
}
