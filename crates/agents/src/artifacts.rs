//! Artifact file names (seed 000 §2.3). Creating the file is [`crate::AgentCore`]'s: it is the
//! only part of this crate that touches the file system.

use chrono::{DateTime, Utc};

/// The longest sanitized artifact name, in bytes, so a long topic cannot exceed a file
/// system's name limit (255 bytes) once the timestamp and suffix are added.
pub const MAX_ARTIFACT_NAME_BYTES: usize = 120;

/// `name` made safe for a file name, exactly as seed 000 §2.3: every character that is not a
/// word character (Unicode letter or digit, `_`) or `-` becomes `_`, then leading and trailing
/// `_` are stripped. Beyond the seed: the result is cut to [`MAX_ARTIFACT_NAME_BYTES`] (on a
/// character boundary), and an empty result becomes `artifact`.
pub fn sanitize_artifact_name(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut safe = replaced.trim_matches('_').to_string();
    if safe.len() > MAX_ARTIFACT_NAME_BYTES {
        let mut cut = MAX_ARTIFACT_NAME_BYTES;
        while !safe.is_char_boundary(cut) {
            cut -= 1;
        }
        safe.truncate(cut);
        safe = safe.trim_end_matches('_').to_string();
    }
    if safe.is_empty() {
        "artifact".to_string()
    } else {
        safe
    }
}

/// `<sanitized name>_<YYYYMMDD_HHMMSS><suffix>` for the UTC time `now`
/// (`"some topic name"`, `".md"` → `some_topic_name_20240315_143022.md`).
pub fn artifact_filename_at(name: &str, suffix: &str, now: DateTime<Utc>) -> String {
    format!(
        "{}_{}{}",
        sanitize_artifact_name(name),
        now.format("%Y%m%d_%H%M%S"),
        suffix
    )
}
