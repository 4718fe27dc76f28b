//! What happens to a tool's text before the model sees it: secrets are redacted, then the
//! text is capped.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};

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
const REDACTED: &str = "[REDACTED]";

/// `NAME_API_KEY = value`: the name stays (it tells the reader what was there), the value goes.
static API_KEY_ASSIGNMENT: LazyLock<Option<Regex>> =
    LazyLock::new(|| compile(r"([A-Z0-9_]*API_KEY)(\s*=\s*)\S+"));
/// OpenAI-style keys.
static SK_KEY: LazyLock<Option<Regex>> = LazyLock::new(|| compile(r"sk-[A-Za-z0-9_-]{16,}"));
/// `key_…` style keys.
static KEY_UNDERSCORE: LazyLock<Option<Regex>> = LazyLock::new(|| compile(r"key_[A-Za-z0-9]{16,}"));
/// Candidates for long base64 secrets; [`looks_like_base64_secret`] decides.
static BASE64_RUN: LazyLock<Option<Regex>> = LazyLock::new(|| compile(r"[A-Za-z0-9+/]{40,}={0,2}"));

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

/// Replace secrets with `[REDACTED]`: `sk-…` keys, `key_…` keys, the value of
/// `…API_KEY=value` (the name is kept), and long base64 runs (≥ 40 characters).
///
/// A base64 run is only treated as a secret when it looks random: upper- and lower-case
/// letters and a digit, and a high character entropy. Without that filter every SHA-256 hex
/// digest (`hash_file`'s output), git commit id and long path would be redacted too.
///
/// Returns `Cow::Borrowed` when nothing was redacted.
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
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
mod tests {
    use super::*;

    const RANDOM_B64: &str = "q8ZL3vX0mP9sR2tYwK7bN4cJ1hGfD6eA5uT+Io/Wx=";

    #[test]
    fn patterns_compile() {
        assert!(API_KEY_ASSIGNMENT.is_some());
        assert!(SK_KEY.is_some());
        assert!(KEY_UNDERSCORE.is_some());
        assert!(BASE64_RUN.is_some());
    }

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(cap_output("hello".into(), 5), "hello");
        assert_eq!(cap_output(String::new(), 0), "");
    }

    #[test]
    fn cap_counts_removed_bytes() {
        assert_eq!(
            cap_output("abcdefghij".into(), 4),
            "abcd\n[TRUNCATED 6 bytes]"
        );
        assert_eq!(cap_output("abc".into(), 0), "\n[TRUNCATED 3 bytes]");
    }

    #[test]
    fn cap_cuts_on_char_boundary() {
        // 'é' is two bytes: a cap of 2 would split it, so only "a" is kept.
        let capped = cap_output("aéb".into(), 2);
        assert_eq!(capped, "a\n[TRUNCATED 3 bytes]");
    }

    #[test]
    fn nothing_to_redact_is_borrowed() {
        let text = "plain text with a path /usr/local/bin and sha 0123456789abcdef";
        assert!(matches!(redact_secrets(text), Cow::Borrowed(_)));
    }

    #[test]
    fn redacts_sk_keys() {
        let out = redact_secrets("token sk-abcdefghijklmnop1234 end");
        assert_eq!(out, "token [REDACTED] end");
        // Too short to be a key.
        assert_eq!(redact_secrets("sk-short"), "sk-short");
    }

    #[test]
    fn redacts_key_underscore() {
        assert_eq!(
            redact_secrets("id=key_ABCDEFGHIJ0123456789."),
            "id=[REDACTED]."
        );
    }

    #[test]
    fn redacts_api_key_value_and_keeps_name() {
        assert_eq!(
            redact_secrets("OPENAI_API_KEY=abc123 next"),
            "OPENAI_API_KEY=[REDACTED] next"
        );
        assert_eq!(redact_secrets("API_KEY = hunter2"), "API_KEY = [REDACTED]");
    }

    #[test]
    fn redacts_random_base64() {
        let text = format!("secret: {RANDOM_B64} done");
        assert_eq!(redact_secrets(&text), "secret: [REDACTED] done");
    }

    #[test]
    fn keeps_hex_digests_and_paths() {
        let sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(redact_secrets(sha), sha);
        let path = "/home/user/projects/SomethingLong/src/components/Header2/index";
        assert_eq!(redact_secrets(path), path);
    }
}
