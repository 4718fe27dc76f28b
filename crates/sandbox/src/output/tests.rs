use super::*;
use crate::redactor::{
    Redactor, json_may_hold_secrets, redact_json_secrets, redact_secrets, register_secret,
};
use proptest::prelude::*;

/// Texts near the shapes: their words and characters, cut and mixed, with case changes,
/// the Kelvin sign, JSON escapes and other bytes.
fn near_shapes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"api".to_vec()),
        Just(b"API".to_vec()),
        Just(b"Ap".to_vec()),
        Just(b"key".to_vec()),
        Just(b"KeY".to_vec()),
        Just("\u{212A}ey".as_bytes().to_vec()),
        Just("\u{212A}".as_bytes().to_vec()),
        Just(b"key_".to_vec()),
        Just(b"sk-".to_vec()),
        Just(b"bearer".to_vec()),
        Just(b"BeArEr".to_vec()),
        Just(b"beare".to_vec()),
        Just(b"\\n".to_vec()),
        Just(vec![0xff, 0xfe]),
        prop::collection::vec(prop::sample::select(b"_-*+/= \"aBz09kKeyY".to_vec()), 0..6),
        prop::collection::vec(
            prop::sample::select(
                b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/".to_vec()
            ),
            0..45
        ),
    ];
    prop::collection::vec(piece, 0..8).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_hand_scan_is_the_loose_shapes_set(text in near_shapes()) {
        prop_assert_eq!(
            may_hold_a_shape(&text),
            LOOSE_SHAPES.as_ref().unwrap().is_match(&text)
        );
    }

    #[test]
    fn the_hand_scan_finds_base64_runs_wherever_they_lie(
        runs in prop::collection::vec((0usize..6, prop_oneof![0usize..50, 38usize..43]), 0..12)
    ) {
        // Runs of letters, digits, `+` and `/` of every length near 40, at every
        // offset (the first one also at the start), between separators of up to five
        // bytes: the probes at every 40th byte must find exactly the runs the set finds.
        let mut text = Vec::new();
        for (gap, len) in runs {
            text.extend(std::iter::repeat_n(b' ', gap));
            text.extend((0..len).map(|i| b"aZ9+/q"[i % 6]));
        }
        prop_assert_eq!(
            may_hold_a_shape(&text),
            LOOSE_SHAPES.as_ref().unwrap().is_match(&text)
        );
    }

    #[test]
    fn every_text_a_shape_matches_passes_the_hand_scan(text in near_shapes()) {
        let text = String::from_utf8_lossy(&text);
        if ANY_SHAPE.as_ref().unwrap().is_match(&text) {
            prop_assert!(may_hold_a_shape(text.as_bytes()));
        }
    }
}

#[test]
fn the_hand_scan_finds_each_shape_and_passes_plain_text() {
    for text in [
        "my API-Key is here",
        "apikey",
        "api_\u{212A}EY",
        "x sk-abcdefghijkl y",
        "Authorization: Bearer x",
        "key_0123456789abcdef",
        "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/tuv",
    ] {
        assert!(may_hold_a_shape(text.as_bytes()), "{text}");
    }
    for text in [
        "Read the files the tool calls name, one after the other.",
        "sk-short",
        "key_short",
        "api key",
        "bear",
        "File 7.\nSome notes of a small project.",
    ] {
        assert!(!may_hold_a_shape(text.as_bytes()), "{text}");
    }
}

#[test]
fn a_base64_run_of_40_is_found_at_every_offset_and_one_of_39_never() {
    // Every alignment of a run against the probes at every 40th byte, behind a short
    // run of 20 that the first probe lands in or not (so the next probe is placed from
    // a run's end too).
    for len in [39, 40, 41] {
        let text: Vec<u8> = (0..len).map(|i| b"aZ9+/q"[i % 6]).collect();
        assert_eq!(may_hold_a_shape(&text), len >= 40, "a run of {len} alone");
    }
    for lead in 0..40 {
        for offset in 0..85 {
            for len in [39, 40, 41] {
                let mut text = vec![b' '; lead];
                text.extend([b'x'; 20]);
                text.extend(std::iter::repeat_n(b' ', offset + 1));
                text.extend((0..len).map(|i| b"aZ9+/q"[i % 6]));
                text.push(b' ');
                assert_eq!(
                    may_hold_a_shape(&text),
                    len >= 40,
                    "a run of {len} after {lead} + 20 + {offset} bytes"
                );
            }
        }
    }
}

#[test]
fn a_word_shape_is_found_at_every_offset_against_the_chunks_and_a_near_miss_never() {
    // Each shape (and a near miss of it) at every position across three chunks of the
    // word scan, in filler that begins shapes without finishing them, with the shape
    // ending the text or followed by a space: the scan must agree with the set.
    let shapes: [&[u8]; 10] = [
        b"api_key",
        b"APIKEY",
        "api-\u{212A}ey".as_bytes(),
        b"Bearer",
        b"sk-abcdefghijkl",
        b"key_abcdefghijklmnop",
        b"api_kez",
        b"Beare",
        b"sk-abcdefghijk",
        b"key_abcdefghijklmno",
    ];
    for filler in [&b"x"[..], b"token label ke ap be sk key api "] {
        for shape in shapes {
            for offset in 0..3 * WORD_CHUNK + 3 {
                for tail in [&b""[..], b" "] {
                    let mut text: Vec<u8> = filler.iter().copied().cycle().take(offset).collect();
                    if text.last().is_some_and(u8::is_ascii_alphanumeric) {
                        text.pop();
                        text.push(b' ');
                    }
                    text.extend_from_slice(shape);
                    text.extend_from_slice(tail);
                    let expected = LOOSE_SHAPES.as_ref().unwrap().is_match(&text);
                    assert_eq!(
                        may_hold_a_shape(&text),
                        expected,
                        "{:?} at {offset}",
                        String::from_utf8_lossy(&text)
                    );
                }
            }
        }
    }
    // The near misses are misses, the shapes are found (so the loop above tests both).
    assert!(!may_hold_a_shape(b"x Beare sk-abcdefghijk api_kez"));
    assert!(may_hold_a_shape(b"x Bearer"));
}

const RANDOM_B64: &str = "q8ZL3vX0mP9sR2tYwK7bN4cJ1hGfD6eA5uT+Io/Wx=";

#[test]
fn patterns_compile() {
    assert!(API_KEY_ASSIGNMENT.is_some());
    assert!(SK_KEY.is_some());
    assert!(BEARER.is_some());
    assert!(KEY_UNDERSCORE.is_some());
    assert!(BASE64_RUN.is_some());
    assert!(ANY_SHAPE.is_some());
    assert!(LOOSE_SHAPES.is_some());
}

#[test]
fn after_megabytes_of_text_the_answers_are_the_same() {
    let texts = [
        "plain words, nothing secret",
        "Authorization: Bearer abc123def456",
        "x sk-abcdefghijkl y",
        "/Users/Bob/Library/Caches/MyApp2/Data/Store/Item42/blob",
    ];
    // Plain text full of bytes that can start a word shape ("api", "bear", "sk", "ke").
    let plain = "api key bear sk-short key_short abcdefghij ".repeat(100_000);
    assert!(plain.len() > 4 << 20);
    assert!(!json_may_hold_secrets(plain.as_bytes()));
    assert_eq!(redact_secrets(&plain), plain);
    let judged: Vec<bool> = texts
        .iter()
        .map(|t| json_may_hold_secrets(t.as_bytes()))
        .collect();
    assert_eq!(judged, [false, true, true, true]);
    let redacted: Vec<String> = texts
        .iter()
        .map(|t| redact_secrets(t).into_owned())
        .collect();
    assert_eq!(
        redacted,
        [
            texts[0],
            "Authorization: Bearer [REDACTED]",
            "x [REDACTED] y",
            texts[3]
        ]
    );
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
fn keeps_long_absolute_paths_but_not_a_key_inside_one() {
    for path in [
        "/Users/Bob/Library/Caches/MyApp2/Data/Store/Item42/blob",
        "/home/runner/work/MyRepo/MyRepo/target/debug/build/ring9f3aB2c1/out",
        "/var/folders/x7/k2Lm9Qp4R8sT1vW3yZ6bC0dF/T/tmpXyZ12abc/run/logs",
    ] {
        assert_eq!(redact_secrets(path), path);
        let said = format!("cannot read {path}: not found");
        assert_eq!(redact_secrets(&said), said);
    }
    // A random key of its own length inside a path is still one.
    let key = RANDOM_B64.trim_end_matches('=').replace(['/', '+'], "Q");
    let path = format!("/srv/keys/{key}/current");
    assert_eq!(redact_secrets(&path), REDACTED);
    // A key with slashes in it, not at its start, is judged whole as before.
    let aws_like = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY3ZqPk8mNv2Lq";
    assert_eq!(
        redact_secrets(&format!("secret {aws_like}")),
        "secret [REDACTED]"
    );
}

#[test]
fn keeps_hex_digests_and_paths() {
    let sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    assert_eq!(redact_secrets(sha), sha);
    let path = "/home/user/projects/SomethingLong/src/components/Header2/index";
    assert_eq!(redact_secrets(path), path);
}

#[test]
fn redacts_masked_and_prefixed_sk_keys() {
    // OpenAI echoes a refused key with its middle masked.
    assert_eq!(
        redact_secrets("Incorrect API key provided: sk-proj-abc*****************xyz. You can"),
        "Incorrect API key provided: [REDACTED]. You can"
    );
    assert_eq!(
        redact_secrets("x-api-key sk-ant-api03-AbCdEf012345"),
        "x-api-key [REDACTED]"
    );
    // Not a key: part of a longer word.
    assert_eq!(
        redact_secrets("task-abcdefghijklmnop"),
        "task-abcdefghijklmnop"
    );
}

#[test]
fn redacts_bearer_tokens_but_not_prose() {
    assert_eq!(
        redact_secrets("Authorization: Bearer abc123def456ghi"),
        "Authorization: Bearer [REDACTED]"
    );
    assert_eq!(
        redact_secrets("uses Bearer authentication"),
        "uses Bearer authentication"
    );
}

#[test]
fn redacts_api_key_values_in_any_spelling_but_not_placeholders() {
    assert_eq!(
        redact_secrets(r#"{"api_key": "hunter2hunter2"}"#),
        r#"{"api_key": "[REDACTED]"}"#
    );
    assert_eq!(
        redact_secrets("https://h/v1?api-key=abc123&x=1"),
        "https://h/v1?api-key=[REDACTED]&x=1"
    );
    for placeholder in [
        "export OPENAI_API_KEY=<your key>",
        "OPENAI_API_KEY=$OPENAI_API_KEY",
        "[llm] api_key_env = \"MY_KEY\"",
    ] {
        assert_eq!(redact_secrets(placeholder), placeholder);
    }
}

#[test]
fn known_values_are_redacted_anywhere() {
    let mut r = Redactor::new();
    assert!(r.add_value("  plain-token-Zq81x0  "));
    assert!(!r.add_value("plain-token-Zq81x0"), "known already");
    assert_eq!(r.known_values(), 1);
    assert_eq!(
        r.redact("a plain-token-Zq81x0 and xplain-token-Zq81x0y"),
        "a [REDACTED] and x[REDACTED]y"
    );
    // Unknown to a fresh redactor, and not of any key shape.
    assert_eq!(
        Redactor::new().redact("plain-token-Zq81x0"),
        "plain-token-Zq81x0"
    );
}

#[test]
fn short_values_are_not_secrets() {
    let mut r = Redactor::new();
    assert!(!r.add_value("k"));
    assert!(!r.add_value("1234567"));
    assert!(!r.add_value("        "));
    assert_eq!(r.known_values(), 0);
    assert_eq!(r.redact("k is a letter"), "k is a letter");
}

#[test]
fn a_value_containing_another_is_replaced_whole() {
    let mut r = Redactor::new();
    r.add_value("abcdefgh");
    r.add_value("abcdefgh-longer");
    assert_eq!(r.redact("x abcdefgh-longer y"), "x [REDACTED] y");
}

#[test]
fn json_strings_are_redacted_and_keys_kept() {
    let mut r = Redactor::new();
    r.add_value("plain-token-Zq81x0");
    let mut v = serde_json::json!({
        "error": "refused plain-token-Zq81x0",
        "nested": [{"k": "sk-abcdefghijklmnop1234"}],
        "n": 3
    });
    r.redact_json(&mut v);
    assert_eq!(
        v,
        serde_json::json!({
            "error": "refused [REDACTED]",
            "nested": [{"k": "[REDACTED]"}],
            "n": 3
        })
    );
}

#[test]
fn registered_values_reach_the_process_wide_redactor() {
    let value = "process-wide-Qx7Lm2Pz9";
    assert_eq!(redact_secrets(value), value);
    assert!(register_secret(value));
    assert_eq!(redact_secrets(&format!("<{value}>")), "<[REDACTED]>");
    let mut v = serde_json::json!([value]);
    redact_json_secrets(&mut v);
    assert_eq!(v, serde_json::json!(["[REDACTED]"]));
}

#[test]
fn debug_never_shows_values() {
    let mut r = Redactor::new();
    r.add_value("plain-token-Zq81x0");
    let shown = format!("{r:?}");
    assert!(!shown.contains("Zq81x0") && shown.contains('1'), "{shown}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// The line check is a superset of the redaction: whenever redacting a string would
    /// change it, the check fires on the serialized line holding it (escapes included).
    #[test]
    fn a_line_that_passes_the_check_holds_nothing_to_redact(
        pieces in proptest::collection::vec(proptest::sample::select(vec![
            "Bearer", "bearer", " ", "\n", "\t", "\"", "\\", "é", "sk-", "sk-proj-",
            "abcdefghijklmnop", "ABCDEFGH12345678", "api_key", "API-KEY", "apikey", "=",
            ": ", "'", "key_", "0123456789abcdef", "q8ZL3vX0mP9sR2tYwK7b", "N4cJ1hGfD6eA5uT+Io/W",
            "/tmp/a.txt", "x", "\u{1}", "my-secret-value-1", "clé-secrète-42", "clé-",
        ]), 0..12)
    ) {
        let text: String = pieces.concat();
        let mut redactor = Redactor::new();
        redactor.add_value("my-secret-value-1");
        redactor.add_value("clé-secrète-42");
        let changed = matches!(redactor.redact(&text), Cow::Owned(_));
        let line = serde_json::to_vec(&serde_json::json!({"content": text})).unwrap();
        proptest::prop_assert!(!changed || redactor.json_may_hold_secrets(&line), "{text:?}");
    }
}

#[test]
fn plain_lines_pass_the_check_and_a_value_with_an_escaped_character_fails_every_line() {
    let line = br#"{"event":"tool_result","content":"File 3. Some notes of a small project."}"#;
    let mut redactor = Redactor::new();
    assert!(!redactor.json_may_hold_secrets(line));
    redactor.add_value("my-secret-value-1");
    assert!(!redactor.json_may_hold_secrets(line));
    assert!(redactor.json_may_hold_secrets(br#"{"a":"my-secret-value-1"}"#));
    redactor.add_value("quote\"in-a-secret");
    assert!(redactor.json_may_hold_secrets(line));
}
