//! Keeping secrets off the terminal and out of the logs: the API keys the configuration names
//! are registered with the program's one redactor ([`lsm_sandbox::Redactor`], process-wide
//! through [`lsm_sandbox::register_secret`]), and everything this program prints — errors,
//! `--json` output, log lines — goes through [`lsm_sandbox::redact_secrets`].
//!
//! The person's own folders are registered too: in them only known values are replaced, so
//! the paths this program prints stay whole.
//!
//! The run records are redacted by the harness with the same redactor, and every HTTP
//! provider scrubs its own key from the errors it builds; this is the last line before the
//! terminal.

use std::borrow::Cow;
use std::io::Write;

use lsm_sandbox::redact_secrets;

/// Variables that hold a provider key when the configuration names none.
const DEFAULT_KEY_VARS: [&str; 2] = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"];

/// Whether a variable's name says it holds a secret (`…API_KEY`, `…_TOKEN`, `…_SECRET`).
fn names_a_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.ends_with("API_KEY") || upper.ends_with("_TOKEN") || upper.ends_with("_SECRET")
}

/// Register the values of the default key variables and of every variable whose name says
/// it holds a secret, from `vars` (the process environment). Values shorter than
/// [`lsm_sandbox::MIN_SECRET_LEN`] are ignored by the redactor.
pub fn register_environment(vars: impl Iterator<Item = (String, String)>) {
    for (name, value) in vars {
        if DEFAULT_KEY_VARS.contains(&name.as_str()) || names_a_secret(&name) {
            lsm_sandbox::register_secret(&value);
        }
    }
}

/// Register the values of the key variables `names` (those the configuration names: see
/// `Config::key_vars`), read with `env`.
pub fn register_vars<'a>(
    names: impl IntoIterator<Item = &'a str>,
    env: &dyn Fn(&str) -> Option<String>,
) {
    for var in names {
        if let Some(value) = env(var) {
            lsm_sandbox::register_secret(&value);
        }
    }
}

/// Make `folders` (the working folder, the agents folder) the person's own to the redactor:
/// the paths this program prints are made from them, so their names are kept whatever they
/// look like (`mktemp -d`'s `tmp.Gxya19JcmM`); a known key in one is still replaced. The
/// key shapes judge the rest of every text, and everything from outside.
pub fn register_own_folders<'a>(folders: impl IntoIterator<Item = &'a std::path::Path>) {
    for folder in folders {
        if let Some(folder) = folder.to_str() {
            lsm_sandbox::register_own_folder(folder);
        }
    }
}

/// `text`, redacted, for the terminal.
pub fn clean(text: &str) -> Cow<'_, str> {
    redact_secrets(text)
}

/// `value` with every string redacted, as one line of JSON for stdout. Redacting the
/// serialized text instead could cut an escaped quote in half and break the document.
pub fn clean_json(mut value: serde_json::Value) -> String {
    lsm_sandbox::redact_json_secrets(&mut value);
    value.to_string()
}

/// `value` with every string redacted, pretty-printed for stdout.
pub fn clean_json_pretty(mut value: serde_json::Value) -> String {
    lsm_sandbox::redact_json_secrets(&mut value);
    serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string())
}

/// A JSON document's text (a run summary as written), redacted. Unchanged in the usual case
/// (the harness redacted it when writing it); otherwise the document is redacted string by
/// string and printed pretty, so it stays valid JSON.
pub fn clean_json_text(text: &str) -> Cow<'_, str> {
    if let Cow::Borrowed(same) = redact_secrets(text) {
        return Cow::Borrowed(same);
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(mut value) => {
            lsm_sandbox::redact_json_secrets(&mut value);
            serde_json::to_string_pretty(&value).map_or_else(
                |_| Cow::Owned(redact_secrets(text).into_owned()),
                Cow::Owned,
            )
        }
        Err(_) => Cow::Owned(redact_secrets(text).into_owned()),
    }
}

/// A log writer that redacts what it is given before it reaches `inner`. The subscriber
/// makes one per event and writes the whole formatted line into it; the line is redacted
/// and written when the writer is flushed or dropped, so a secret is never split across two
/// redactions.
pub struct RedactingWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
}

impl<W: Write> RedactingWriter<W> {
    /// A writer in front of `inner`.
    pub fn new(inner: W) -> Self {
        RedactingWriter {
            inner,
            buf: Vec::new(),
        }
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            let text = String::from_utf8_lossy(&self.buf);
            let clean = redact_secrets(&text);
            self.inner.write_all(clean.as_bytes())?;
            self.buf.clear();
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        // Nowhere to report a failed log write.
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_recognised() {
        for name in [
            "OPENAI_API_KEY",
            "MY_GATEWAY_API_KEY",
            "HF_TOKEN",
            "X_SECRET",
        ] {
            assert!(names_a_secret(name), "{name}");
        }
        for name in [
            "HOME",
            "LSM_LLM_MODEL",
            "TOKENIZERS_PARALLELISM",
            "KEY_PATH",
        ] {
            assert!(!names_a_secret(name), "{name}");
        }
    }

    #[test]
    fn environment_and_configured_keys_are_redacted() {
        register_environment(
            [
                (
                    "OPENAI_API_KEY".to_string(),
                    "env-secret-Ab12Cd34".to_string(),
                ),
                ("HOME".to_string(), "/home/someone-not-secret".to_string()),
            ]
            .into_iter(),
        );
        let mut config = crate::config::Config::default();
        config.llm.normal = Some(crate::config::TierConfig {
            settings: crate::config::LlmSettings {
                api_key_env: Some("MY_TIER_VAR".into()),
                ..Default::default()
            },
            ..Default::default()
        });
        assert_eq!(config.key_vars(), ["MY_TIER_VAR"]);
        register_vars(config.key_vars(), &|name: &str| {
            (name == "MY_TIER_VAR").then(|| "tier-secret-Ef56Gh78".to_string())
        });
        assert_eq!(
            clean("a env-secret-Ab12Cd34 b tier-secret-Ef56Gh78 c /home/someone-not-secret"),
            "a [REDACTED] b [REDACTED] c /home/someone-not-secret"
        );
    }

    #[test]
    fn json_output_stays_valid_json_when_redacted() {
        // An escaped quote right after a key-shaped value: text redaction would eat the
        // backslash and end the string early.
        let v = serde_json::json!({"error": "api_key=abc\\\"def sk-abcdefghijklmnop1234"});
        let line = clean_json(v.clone());
        let back: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert!(!line.contains("sk-abcdefghijklmnop1234"), "{line}");
        assert!(back["error"].as_str().unwrap().contains("[REDACTED]"));
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        let cleaned = clean_json_text(&pretty);
        let back: serde_json::Value = serde_json::from_str(&cleaned).unwrap();
        assert!(!cleaned.contains("sk-abcdefghijklmnop1234"), "{cleaned}");
        assert!(back["error"].as_str().unwrap().contains("[REDACTED]"));
        let plain = "{\n  \"run_id\": \"r1\"\n}";
        assert!(matches!(clean_json_text(plain), Cow::Borrowed(_)));
    }

    #[test]
    fn the_log_writer_redacts_whole_lines() {
        let mut out = Vec::new();
        {
            let mut w = RedactingWriter::new(&mut out);
            w.write_all(b"retrying: Incorrect API key provided: sk-test-")
                .unwrap();
            w.write_all(b"SECRETSECRET1234567890.\n").unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "retrying: Incorrect API key provided: [REDACTED].\n"
        );
    }
}
