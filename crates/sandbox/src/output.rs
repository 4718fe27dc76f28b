//! What happens to a tool's text before the model sees it: secrets are redacted, then the
//! text is capped.
//!
//! The key shapes are here; the redaction step that applies them with the known values
//! ([`crate::Redactor`], [`crate::redact_secrets`]) is the program's only one: the harness's
//! records and the command line's output go through it too.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex, RegexSet};

/// Cap `text` at `max_bytes` (cut on a char boundary, so never more than `max_bytes` of the
/// original are kept), appending `\n[TRUNCATED n bytes]` where `n` is the number of bytes
/// removed. Text within the cap is returned unchanged.
pub fn cap_output(mut text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1; // terminates: 0 is always a char boundary
    }
    let removed = text.len() - cut;
    text.truncate(cut);
    text.push_str(&format!("\n[TRUNCATED {removed} bytes]"));
    text
}

/// The replacement for a secret.
pub const REDACTED: &str = "[REDACTED]";

/// The shortest value [`Redactor::add_value`] accepts as a secret. Shorter values (a test's
/// `OPENAI_API_KEY=k`, a placeholder) would blank out ordinary letters and words everywhere.
pub const MIN_SECRET_LEN: usize = 8;

/// `NAME_API_KEY = value`, `api-key: value`, `"api_key": "value"`: the name stays (it tells
/// the reader what was there), the value goes. A value starting with `<`, `$` or `[` is a
/// placeholder (`export OPENAI_API_KEY=<your key>`, `$OPENAI_API_KEY`, `[REDACTED]`) and stays.
const API_KEY_ASSIGNMENT_PATTERN: &str =
    r#"(?i)\b([a-z0-9_-]*api[_-]?key)(\s*["']?\s*[=:]\s*["']?)([^\s"'&,;<$\[][^\s"'&,;]*)"#;
/// OpenAI- and Anthropic-style keys (`sk-…`, `sk-proj-…`, `sk-ant-…`), also as servers echo
/// them with the middle masked (`sk-proj-abc*****xyz`).
const SK_KEY_PATTERN: &str = r"\bsk-[A-Za-z0-9_*-]{12,}";
/// `Authorization: Bearer <token>`: the word stays, the token goes ([`looks_like_token`]
/// decides, so that prose such as "Bearer authentication" is left alone).
const BEARER_PATTERN: &str = r"(?i)\b(bearer)(\s+)([A-Za-z0-9._~+/=-]{8,})";
/// `key_…` style keys.
const KEY_UNDERSCORE_PATTERN: &str = r"key_[A-Za-z0-9]{16,}";
/// Candidates for long base64 secrets; [`looks_like_base64_secret`] decides.
const BASE64_RUN_PATTERN: &str = r"[A-Za-z0-9+/]{40,}={0,2}";

static API_KEY_ASSIGNMENT: LazyLock<Option<Regex>> =
    LazyLock::new(|| compile(API_KEY_ASSIGNMENT_PATTERN));
static SK_KEY: LazyLock<Option<Regex>> = LazyLock::new(|| compile(SK_KEY_PATTERN));
static BEARER: LazyLock<Option<Regex>> = LazyLock::new(|| compile(BEARER_PATTERN));
static KEY_UNDERSCORE: LazyLock<Option<Regex>> = LazyLock::new(|| compile(KEY_UNDERSCORE_PATTERN));
static BASE64_RUN: LazyLock<Option<Regex>> = LazyLock::new(|| compile(BASE64_RUN_PATTERN));

/// All the shapes at once: one pass over a text tells whether any pattern can match, so the
/// common case (nothing secret-shaped: most tool output and every record line) costs one scan
/// instead of five.
static ANY_SHAPE: LazyLock<Option<RegexSet>> = LazyLock::new(|| {
    let patterns = [
        API_KEY_ASSIGNMENT_PATTERN,
        SK_KEY_PATTERN,
        BEARER_PATTERN,
        KEY_UNDERSCORE_PATTERN,
        BASE64_RUN_PATTERN,
    ];
    match RegexSet::new(patterns) {
        Ok(set) => Some(set),
        Err(err) => {
            tracing::error!(%err, "secret redaction patterns do not compile as a set");
            None
        }
    }
});

/// The loosened shapes as a regular-expression set: the specification [`may_hold_a_shape`]
/// implements by hand (a proptest compares the two).
#[cfg(test)]
static LOOSE_SHAPES: LazyLock<Option<regex::bytes::RegexSet>> = LazyLock::new(|| {
    let patterns = [
        r"(?i)api[_-]?key",
        r"sk-[A-Za-z0-9_*-]{12,}",
        r"(?i)bearer",
        KEY_UNDERSCORE_PATTERN,
        r"[A-Za-z0-9+/]{40,}",
    ];
    regex::bytes::RegexSet::new(patterns).ok()
});

/// Whether `bytes` holds a loosened form of any key shape: `(?i)api[_-]?key`, `sk-`
/// followed by 12 of `[A-Za-z0-9_*-]`, `(?i)bearer`, `key_` followed by 16 letters or digits,
/// or a run of 40 of `[A-Za-z0-9+/]` — each matches wherever its shape matches (in plain
/// text, and in the unescaped text of a string of serialized JSON: JSON escaping leaves
/// the characters of `sk-…`, `key_…` and base64 runs alone, and can break the word
/// boundaries and the whitespace of the other shapes, so those are reduced to their fixed
/// words). `false` means no shape can match, so the text holds nothing to redact by shape.
///
/// By hand over the bytes, exactly the loosened shapes' regular-expression set
/// ([`LOOSE_SHAPES`]; a test compares them), including `(?i)`'s one non-ASCII `k`, the
/// Kelvin sign.
///
/// Every text is scanned this way, never by the compiled set: the set costs 1.3 M
/// instructions to compile, and once built its lazy automaton was slower in time than a
/// table lookup a byte (a run of 200 model calls, 6 ms more CPU; docs/PERFORMANCE.md). The
/// scan is linear: a base64 run is looked for at every 40th byte only, and a word shape
/// only where three bytes can begin one.
pub(crate) fn may_hold_a_shape(bytes: &[u8]) -> bool {
    has_base64_run(bytes) || has_word_shape(bytes)
}

/// The shortest run of [`IN_RUN`] bytes that counts as base64.
const RUN: usize = 40;

/// Whether `bytes` holds a run of [`RUN`] bytes of `[A-Za-z0-9+/]`. Such a run covers one of
/// any [`RUN`] positions in a row, so one byte in [`RUN`] is looked at (a probe), and the run
/// through a probe measured: the next run that could be long enough starts past this one's
/// end, so the next probe is [`RUN`] bytes past that. About 1 byte in 40 looked at in prose.
fn has_base64_run(bytes: &[u8]) -> bool {
    let in_run = |b: &u8| BYTE_CLASS[usize::from(*b)] & IN_RUN != 0;
    let mut probe = RUN - 1;
    while let Some(b) = bytes.get(probe) {
        if !in_run(b) {
            probe += RUN;
            continue;
        }
        // Back to the byte after the last one not in a run (fewer than `RUN` bytes: the
        // probe before was not in this run), then on to this run's end.
        let start = bytes[..probe]
            .iter()
            .rposition(|b| !in_run(b))
            .map_or(0, |p| p + 1);
        let end = bytes[probe..]
            .iter()
            .position(|b| !in_run(b))
            .map_or(bytes.len(), |p| probe + p);
        if end - start >= RUN {
            return true;
        }
        probe = end + RUN;
    }
    false
}

/// Whether a word shape (`api…key`, `bearer`, `sk-…`, `key_…`) starts anywhere in `bytes`:
/// looked at closer only where its first three bytes can begin one
/// ([`may_begin_a_word_shape`]). Every shape is at least three bytes long, so the last two
/// positions cannot begin one.
///
/// The bytes are taken [`WORD_CHUNK`] positions at a time ([`shape_in_window`]); the last
/// positions, fewer than a chunk, in a copy padded with zero bytes, which cannot begin a
/// shape, so they take the same vector compares as the rest instead of a test per position.
fn has_word_shape(bytes: &[u8]) -> bool {
    let mut start = 0;
    while start + 2 < bytes.len() {
        let rest = &bytes[start..];
        let found = match rest
            .get(..WORD_CHUNK + 2)
            .and_then(|w| <&[u8; WORD_CHUNK + 2]>::try_from(w).ok())
        {
            Some(window) => shape_in_window(window, rest),
            None => {
                let mut window = [0u8; WORD_CHUNK + 2];
                window[..rest.len()].copy_from_slice(rest);
                shape_in_window(&window, rest)
            }
        };
        if found {
            return true;
        }
        start += WORD_CHUNK;
    }
    false
}

/// Whether a word shape starts at one of the first [`WORD_CHUNK`] positions of `rest`, whose
/// first bytes `window` holds (a zero byte after `rest`'s end). The three-byte test runs on
/// the whole window without a branch, which the compiler turns into vector compares; only a
/// window where it holds somewhere is looked at position by position ([`shape_at_a_candidate`]).
#[inline(always)]
fn shape_in_window(window: &[u8; WORD_CHUNK + 2], rest: &[u8]) -> bool {
    let any = (0..WORD_CHUNK).fold(false, |any, i| {
        any | may_begin_a_word_shape(window[i], window[i + 1], window[i + 2])
    });
    any && shape_at_a_candidate(window, rest)
}

/// [`shape_in_window`]'s closer look, out of line (few windows of a text need it): at each
/// position whose first byte can begin a shape, the three-byte test, then the shape itself.
#[cold]
#[inline(never)]
fn shape_at_a_candidate(window: &[u8; WORD_CHUNK + 2], rest: &[u8]) -> bool {
    (0..WORD_CHUNK).any(|i| {
        matches!(window[i] | 0x20, b'a' | b'b' | b'k' | b's')
            && may_begin_a_word_shape(window[i], window[i + 1], window[i + 2])
            && rest.get(i..).is_some_and(word_shape_at)
    })
}

/// Positions [`has_word_shape`] tests at once.
const WORD_CHUNK: usize = 32;

/// Whether the bytes `a b c` can begin a word shape: `api` and `bea` in any case (`| 0x20`
/// also lets a few other bytes through: [`word_shape_at`] decides), `sk-`, `key`. Written
/// with `&` and `|`, not `&&` and `||`, so it has no branch.
#[inline(always)]
fn may_begin_a_word_shape(a: u8, b: u8, c: u8) -> bool {
    let (la, lb, lc) = (a | 0x20, b | 0x20, c | 0x20);
    ((la == b'a') & (lb == b'p') & (lc == b'i'))
        | ((la == b'b') & (lb == b'e') & (lc == b'a'))
        | ((a == b's') & (b == b'k') & (c == b'-'))
        | ((a == b'k') & (b == b'e') & (c == b'y'))
}

/// [`BYTE_CLASS`]: a byte of a base64 run (`[A-Za-z0-9+/]`).
const IN_RUN: u8 = 1;
const BYTE_CLASS: [u8; 256] = {
    let mut class = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'+' || c == b'/' {
            class[b] |= IN_RUN;
        }
        b += 1;
    }
    class
};

/// Whether a word shape starts at `rest[0]`.
#[cold]
#[inline(never)]
fn word_shape_at(rest: &[u8]) -> bool {
    match rest.first() {
        Some(b'a' | b'A') => api_key_at(rest),
        Some(b'b' | b'B') => starts_with_ignore_case(rest, b"bearer"),
        Some(b's') => {
            rest.starts_with(b"sk-")
                && followed_by(&rest[3..], 12, |c| {
                    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'*' | b'-')
                })
        }
        Some(b'k') => {
            rest.starts_with(b"key_") && followed_by(&rest[4..], 16, |c| c.is_ascii_alphanumeric())
        }
        _ => false,
    }
}

/// `(?i)api[_-]?key` at the start of `rest`.
fn api_key_at(rest: &[u8]) -> bool {
    if !starts_with_ignore_case(rest, b"api") {
        return false;
    }
    let after = &rest[3..];
    key_at(after) || (matches!(after.first(), Some(b'_' | b'-')) && key_at(&after[1..]))
}

/// `(?i)key` at the start of `rest`: `k` is also the Kelvin sign (U+212A) under Unicode
/// case folding.
fn key_at(rest: &[u8]) -> bool {
    const KELVIN: &[u8] = "\u{212A}".as_bytes();
    let after_k = match rest.first() {
        Some(b'k' | b'K') => &rest[1..],
        _ if rest.starts_with(KELVIN) => &rest[KELVIN.len()..],
        _ => return false,
    };
    starts_with_ignore_case(after_k, b"ey")
}

fn starts_with_ignore_case(rest: &[u8], word: &[u8]) -> bool {
    rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word)
}

/// Whether the first `n` bytes of `rest` all are in `class`.
fn followed_by(rest: &[u8], n: usize, class: impl Fn(u8) -> bool) -> bool {
    rest.len() >= n && rest[..n].iter().all(|&c| class(c))
}

fn compile(pattern: &str) -> Option<Regex> {
    match Regex::new(pattern) {
        Ok(re) => Some(re),
        Err(err) => {
            // The patterns are constants covered by tests; this cannot happen in a release.
            tracing::error!(%pattern, %err, "secret redaction pattern does not compile");
            None
        }
    }
}

/// The key shapes (no known values).
pub(crate) fn redact_shapes(text: Cow<'_, str>) -> Cow<'_, str> {
    // The loosened shapes match wherever the shapes do: a text without them is left alone
    // before any regular expression is compiled or run.
    if !may_hold_a_shape(text.as_bytes())
        || ANY_SHAPE.as_ref().is_some_and(|set| !set.is_match(&text))
    {
        return text;
    }
    let mut out = text;
    if let Some(re) = API_KEY_ASSIGNMENT.as_ref() {
        out = replace(out, re, |caps: &Captures<'_>| {
            format!("{}{}{REDACTED}", &caps[1], &caps[2])
        });
    }
    for re in [SK_KEY.as_ref(), KEY_UNDERSCORE.as_ref()]
        .into_iter()
        .flatten()
    {
        out = replace(out, re, |_: &Captures<'_>| REDACTED.to_string());
    }
    if let Some(re) = BEARER.as_ref() {
        out = replace(out, re, |caps: &Captures<'_>| {
            if looks_like_token(&caps[3]) {
                format!("{}{}{REDACTED}", &caps[1], &caps[2])
            } else {
                caps[0].to_string()
            }
        });
    }
    if let Some(re) = BASE64_RUN.as_ref() {
        out = replace(out, re, |caps: &Captures<'_>| {
            let run = &caps[0];
            if looks_like_base64_secret(run) {
                REDACTED.to_string()
            } else {
                run.to_string()
            }
        });
    }
    out
}

/// Whether the word after `Bearer` is a token rather than prose: a digit in it, or too long
/// for a word.
fn looks_like_token(word: &str) -> bool {
    word.bytes().any(|b| b.is_ascii_digit()) || word.len() >= 24
}

/// Apply one pattern, keeping the text borrowed when nothing changed.
fn replace<'a>(
    text: Cow<'a, str>,
    re: &Regex,
    rep: impl FnMut(&Captures<'_>) -> String,
) -> Cow<'a, str> {
    let replaced = match re.replace_all(&text, rep) {
        Cow::Borrowed(_) => None,
        Cow::Owned(s) => Some(s),
    };
    match replaced {
        // The base64 closure may return every match unchanged; still an allocation, but the
        // content is equal, so keep the original (and its borrow) in that case.
        Some(s) if s != *text => Cow::Owned(s),
        _ => text,
    }
}

/// Whether a base64-alphabet run is random enough to be a key rather than a hash, an id or a
/// path: both letter cases and a digit, and at least 4.3 bits of entropy per character (random
/// base64 of 40 characters has about 4.8; hex can have at most 4.0; words and paths ~3.5–4).
fn looks_like_base64_secret(run: &str) -> bool {
    // A run that starts with a slash is an absolute path (a random key starts with one in
    // 1 of 64 cases, and then only its pieces between slashes would be judged): its names
    // are judged one by one, each as long as a secret must be. Judged whole, the many
    // different letters of a long path (`/Users/Bob/Library/Caches/MyApp2/…`) looked random.
    if run.starts_with('/') {
        return run
            .split('/')
            .any(|name| name.len() >= MIN_BASE64_SECRET && looks_random(name));
    }
    looks_random(run)
}

/// The shortest base64 run judged a secret (the `{40,}` of the run's pattern).
const MIN_BASE64_SECRET: usize = 40;

/// Upper- and lower-case letters and a digit, and a high character entropy.
fn looks_random(run: &str) -> bool {
    let body = run.trim_end_matches('=');
    let has_upper = body.bytes().any(|b| b.is_ascii_uppercase());
    let has_lower = body.bytes().any(|b| b.is_ascii_lowercase());
    let has_digit = body.bytes().any(|b| b.is_ascii_digit());
    has_upper && has_lower && has_digit && shannon_entropy(body) >= 4.3
}

fn shannon_entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[usize::from(b)] += 1;
    }
    let len = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / len;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests;
