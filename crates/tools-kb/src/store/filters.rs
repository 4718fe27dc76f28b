//! Path and extension filters, applied inside retrieval (lexical and dense alike).

use serde::{Deserialize, Serialize};

/// Filters on path and extension, applied inside retrieval (never after truncation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Filters {
    /// Keep chunks whose path contains this text (case-insensitive).
    pub path_contains: Option<String>,
    /// Keep only these extensions (no dot, e.g. `["md", "txt"]`); empty: all.
    pub ext_allow: Vec<String>,
    /// Drop these extensions.
    pub ext_deny: Vec<String>,
}

impl Filters {
    /// Whether no filter is set.
    pub fn is_empty(&self) -> bool {
        self.path_contains.as_deref().is_none_or(str::is_empty)
            && self.ext_allow.is_empty()
            && self.ext_deny.is_empty()
    }

    pub(super) fn normalized_exts(list: &[String]) -> Vec<String> {
        list.iter()
            .map(|e| e.trim().trim_start_matches('.').to_ascii_lowercase())
            .filter(|e| !e.is_empty())
            .collect()
    }

    /// Whether a chunk with this lower-case path and extension passes.
    pub fn accepts(&self, path_lc: &str, ext: &str) -> bool {
        if let Some(needle) = self.path_contains.as_deref().filter(|s| !s.is_empty())
            && !path_lc.contains(&needle.to_lowercase())
        {
            return false;
        }
        let allow = Self::normalized_exts(&self.ext_allow);
        if !allow.is_empty() && !allow.iter().any(|a| a == ext) {
            return false;
        }
        !Self::normalized_exts(&self.ext_deny)
            .iter()
            .any(|d| d == ext)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_accept_by_path_and_extension() {
        let f = Filters {
            path_contains: Some("Notes".into()),
            ext_allow: vec![".MD".into()],
            ext_deny: vec![],
        };
        assert!(f.accepts("/home/x/notes/a.md", "md"));
        assert!(!f.accepts("/home/x/docs/a.md", "md"));
        assert!(!f.accepts("/home/x/notes/a.txt", "txt"));
        let deny = Filters {
            ext_deny: vec!["txt".into()],
            ..Default::default()
        };
        assert!(!deny.accepts("a.txt", "txt"));
        assert!(deny.accepts("a.md", "md"));
    }
}
