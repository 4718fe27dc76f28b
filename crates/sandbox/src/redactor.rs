//! The program's one redaction step ([`Redactor`]) and its process-wide instance
//! ([`register_secret`], [`redact_secrets`]): known secret values, the key shapes of
//! [`crate::output`], and the person's own folders, in which the shapes are not looked for.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::sync::{LazyLock, PoisonError, RwLock};

use crate::output::{MIN_SECRET_LEN, REDACTED, may_hold_a_shape, redact_shapes};

/// The one redaction step of the program: known secret values (the API keys the
/// configuration names, as read from the environment) and the usual key shapes.
///
/// Every string that leaves the process — tool output for the model, run records, logs, the
/// terminal — goes through [`Redactor::redact`], usually through the process-wide instance
/// behind [`redact_secrets`] (values registered with [`register_secret`]).
///
/// The person's own folders ([`Redactor::add_own_folder`]) are the exception to the shapes:
/// the program composes the paths it prints from them, so a name in one that looks random
/// (`mktemp -d`'s `tmp.Gxya19JcmM`) is kept; only known values are replaced in them.
///
/// `Debug` shows how many values it knows, never the values.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Known secret values, longest first (so a value that contains another is replaced
    /// whole).
    values: Vec<Known>,
    /// The person's own folders, as given.
    own_folders: Vec<String>,
    /// Each own folder as it reads once the known values are replaced in it, longest first:
    /// what is looked for in a text whose known values are replaced already.
    own_forms: Vec<Known>,
}

/// One known secret value, with its searcher built once: every record line and every
/// tool's text is searched for each value (SIMD `memmem`, not a fresh two-way search each
/// time).
#[derive(Clone)]
struct Known {
    text: String,
    finder: memchr::memmem::Finder<'static>,
    /// The value holds a character JSON escapes (a quote, a backslash, a control character): in
    /// serialized JSON it could hide behind its escape.
    escapes_in_json: bool,
}

impl Known {
    fn new(text: &str) -> Self {
        Known {
            text: text.to_string(),
            finder: memchr::memmem::Finder::new(text.as_bytes()).into_owned(),
            escapes_in_json: text
                .chars()
                .any(|c| c == '"' || c == '\\' || u32::from(c) < 0x20),
        }
    }

    fn is_in(&self, haystack: &[u8]) -> bool {
        self.finder.find(haystack).is_some()
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("known_values", &self.values.len())
            .field("own_folders", &self.own_folders.len())
            .finish()
    }
}

impl Redactor {
    /// A redactor that knows no values yet (it still redacts the key shapes).
    pub fn new() -> Self {
        Redactor::default()
    }

    /// Know `value` (trimmed) as a secret: it is replaced wherever it occurs. Returns whether
    /// it was added: values shorter than [`MIN_SECRET_LEN`] and values already known are not.
    pub fn add_value(&mut self, value: &str) -> bool {
        let value = value.trim();
        if value.chars().count() < MIN_SECRET_LEN || self.values.iter().any(|v| v.text == value) {
            return false;
        }
        self.values.push(Known::new(value));
        self.values.sort_by_key(|v| Reverse(v.text.len()));
        self.refresh_own_forms();
        true
    }

    /// Know `folder` as one of the person's own (the working folder, the agents folder): the
    /// paths the program prints are made from them, and their names are the person's or
    /// `mktemp`'s choice, not a server's secret. Wherever it stands in a text, only known
    /// values are replaced in it; the key shapes judge the rest of the text without it.
    /// Returns whether it was added: only absolute paths of at least [`MIN_SECRET_LEN`]
    /// characters are (`/` or `/tmp` would cut every text's base64 runs apart).
    pub fn add_own_folder(&mut self, folder: &str) -> bool {
        let folder = folder.trim_end_matches('/');
        if !folder.starts_with('/')
            || folder.chars().count() < MIN_SECRET_LEN
            || self.own_folders.iter().any(|f| f == folder)
        {
            return false;
        }
        self.own_folders.push(folder.to_string());
        self.refresh_own_forms();
        true
    }

    /// The own folders as a text holds them after [`Redactor::replace_values`].
    fn refresh_own_forms(&mut self) {
        let mut forms: Vec<Known> = self
            .own_folders
            .iter()
            .map(|f| Known::new(&self.replace_values(f)))
            .collect();
        forms.sort_by_key(|f| Reverse(f.text.len()));
        forms.dedup_by(|a, b| a.text == b.text);
        self.own_forms = forms;
    }

    /// How many secret values it knows.
    pub fn known_values(&self) -> usize {
        self.values.len()
    }

    /// `text` with every known value and every key shape replaced by `[REDACTED]`:
    /// `sk-…` keys (also masked ones), `Bearer` tokens, `key_…` keys, the value of
    /// `…api_key=value` / `api-key: value` (the name is kept), and long random base64 runs
    /// (≥ 40 characters).
    ///
    /// A base64 run is only treated as a secret when it looks random: upper- and lower-case
    /// letters and a digit, and a high character entropy. Without that filter every SHA-256
    /// hex digest (`hash_file`'s output), git commit id and long path would be redacted too.
    ///
    /// Returns `Cow::Borrowed` when nothing was redacted.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.shapes_outside_own_folders(self.replace_values(text))
    }

    /// `text` with every known value replaced.
    fn replace_values<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for value in &self.values {
            if value.is_in(out.as_bytes()) {
                out = Cow::Owned(out.replace(value.text.as_str(), REDACTED));
            }
        }
        out
    }

    /// The key shapes applied to `text` but for where an own folder stands in it: each piece
    /// between them is judged alone (a path's rest starts with `/`, so it is judged name by
    /// name).
    fn shapes_outside_own_folders<'a>(&self, text: Cow<'a, str>) -> Cow<'a, str> {
        if self.own_forms.is_empty() || !may_hold_a_shape(text.as_bytes()) {
            return redact_shapes(text);
        }
        let mut out = String::new();
        let mut changed = false;
        let mut pos = 0;
        while let Some((start, len)) = self.next_own_folder(&text, pos) {
            let piece = redact_shapes(Cow::Borrowed(&text[pos..start]));
            changed |= matches!(piece, Cow::Owned(_));
            out.push_str(&piece);
            out.push_str(&text[start..start + len]);
            pos = start + len;
        }
        if pos == 0 {
            return redact_shapes(text);
        }
        let rest = redact_shapes(Cow::Borrowed(&text[pos..]));
        if !changed && matches!(rest, Cow::Borrowed(_)) {
            return text;
        }
        out.push_str(&rest);
        Cow::Owned(out)
    }

    /// Where the first own folder stands in `text` from byte `from` on (the longest of those
    /// starting at the same byte): its start and length. Both are character boundaries: a
    /// UTF-8 text is found in UTF-8 only where its characters are.
    fn next_own_folder(&self, text: &str, from: usize) -> Option<(usize, usize)> {
        let rest = text.as_bytes().get(from..)?;
        self.own_forms
            .iter()
            .filter_map(|f| f.finder.find(rest).map(|at| (from + at, f.text.len())))
            .min_by_key(|&(start, len)| (start, Reverse(len)))
    }

    /// Redact every string in `value` (object keys stay: they are names, not data). `true`
    /// when anything was redacted.
    pub fn redact_json(&self, value: &mut serde_json::Value) -> bool {
        match value {
            serde_json::Value::String(s) => {
                if let Cow::Owned(clean) = self.redact(s) {
                    *s = clean;
                    return true;
                }
                false
            }
            serde_json::Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, v| self.redact_json(v) | changed),
            serde_json::Value::Object(map) => map
                .values_mut()
                .fold(false, |changed, v| self.redact_json(v) | changed),
            _ => false,
        }
    }
}

impl Redactor {
    /// Whether any string in `line` (serialized JSON) might hold something
    /// [`Redactor::redact_json`] would replace: `false` only when none can, so a caller may
    /// write such a line as it is and take the slow path (parse, redact, serialize) otherwise.
    /// A known value with a character JSON escapes could hide behind its escape, so with such
    /// a value every line is suspect.
    pub fn json_may_hold_secrets(&self, line: &[u8]) -> bool {
        if may_hold_a_shape(line) {
            return true;
        }
        // A value's bytes are found wherever they stand, whatever the bytes around them.
        self.values
            .iter()
            .any(|v| v.escapes_in_json || v.is_in(line))
    }
}

/// The process-wide redactor: what [`redact_secrets`] applies.
static PROCESS: LazyLock<RwLock<Redactor>> = LazyLock::new(|| RwLock::new(Redactor::new()));

/// Make `value` known as a secret to the process-wide redactor (see
/// [`Redactor::add_value`]): from now on [`redact_secrets`] replaces it wherever it occurs.
/// The program registers the API keys its configuration names as it reads them.
pub fn register_secret(value: &str) -> bool {
    // A panic while holding the lock cannot leave the list half-changed (push, then sort).
    PROCESS
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .add_value(value)
}

/// Make `folder` one of the person's own for the process-wide redactor (see
/// [`Redactor::add_own_folder`]): from now on [`redact_secrets`] keeps its names, but for
/// known values.
pub fn register_own_folder(folder: &str) -> bool {
    PROCESS
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .add_own_folder(folder)
}

/// Redact `text` with the process-wide redactor: every value given to [`register_secret`],
/// and the key shapes of [`Redactor::redact`]. Returns `Cow::Borrowed` when nothing was
/// redacted.
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    PROCESS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .redact(text)
}

/// [`Redactor::json_may_hold_secrets`] with the process-wide redactor.
pub fn json_may_hold_secrets(line: &[u8]) -> bool {
    PROCESS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .json_may_hold_secrets(line)
}

/// [`redact_secrets`] applied to every string in `value`; `true` when anything was redacted.
pub fn redact_json_secrets(value: &mut serde_json::Value) -> bool {
    PROCESS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .redact_json(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A folder's name: a word, `mktemp`'s shape (long ones too) or a content hash's.
    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z]{1,10}",
            "tmp\\.[A-Za-z0-9]{10,60}",
            "[A-Za-z0-9+_.-]{30,70}",
        ]
    }

    proptest! {
        /// A path the program prints, under one of the person's own folders, comes out as it
        /// went in whatever its names look like, but for a known key in it, which is replaced.
        #[test]
        fn a_path_under_an_own_folder_is_kept_but_for_a_known_key(
            mut names in proptest::collection::vec(name(), 1..5),
            key in "[A-Za-z0-9]{12,40}",
            key_at in proptest::option::of((0usize..5, 0usize..80)),
            agent in "[a-z]{3,12}",
            folder_first in any::<bool>(),
        ) {
            if let Some((i, at)) = key_at {
                let count = names.len();
                let name = &mut names[i % count];
                let at = at.min(name.len());
                name.insert_str(at, &key);
            }
            let folder = format!("/{}", names.join("/"));
            let shown = format!(
                "summary: {folder}/{agent}/logs/20261207_155023_95ad4c86/run_summary.json"
            );
            let mut redactor = Redactor::new();
            if folder_first {
                redactor.add_own_folder(&folder);
                redactor.add_value(&key);
            } else {
                redactor.add_value(&key);
                redactor.add_own_folder(&folder);
            }
            prop_assert_eq!(redactor.redact(&shown), shown.replace(&key, REDACTED));
        }
    }

    #[test]
    fn outside_an_own_folder_the_shapes_still_apply() {
        let mut redactor = Redactor::new();
        let folder = "/tmp/tmp.Gxya19JcmMaB3kQ7";
        assert!(redactor.add_own_folder(folder));
        assert!(
            !redactor.add_own_folder("/tmp"),
            "too short to be anyone's own"
        );
        assert!(!redactor.add_own_folder("relative/Folder/Name"));
        let path = format!("{folder}/Agents/general/logs/20261207_155023_95ad4c86");
        assert_eq!(redactor.redact(&path), path);
        // A key a tool printed next to the path, or a random name below it, is still one.
        let key = "q8ZL3vX0mP9sR2tYwK7bN4cJ1hGfD6eA5uTxIoWq";
        assert_eq!(
            redactor.redact(&format!("{path} token {key}")),
            format!("{path} token {REDACTED}")
        );
        // The rest of a path is one base64 run, judged name by name, and replaced whole.
        assert_eq!(
            redactor.redact(&format!("{folder}/{key}/x")),
            format!("{folder}{REDACTED}")
        );
        assert_eq!(
            redactor.redact("sk-abcdefghijklmnop1234"),
            REDACTED,
            "the shapes outside"
        );
    }
}
