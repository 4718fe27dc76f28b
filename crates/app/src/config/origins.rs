//! Where each setting came from: [`Source`] (the default, a file and line, a variable, a
//! `-c` flag, a command's option) and [`Origins`], the source of every key path of a layer or of the merged whole.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

/// Where one setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// Nothing set it.
    Default {
        /// Why this default, when it is not the plain one.
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// A configuration file.
    File {
        /// The file.
        path: PathBuf,
        /// Its line (from 1).
        line: usize,
    },
    /// An environment variable.
    Env {
        /// Its name.
        var: String,
    },
    /// A `-c key=value` flag.
    Flag {
        /// The flag as given.
        flag: String,
    },
    /// An option of the command that starts a run (`--max-tokens-budget 5000`): the top
    /// layer, over `-c`.
    Option {
        /// The option's name (`--max-tokens-budget`).
        flag: String,
    },
}

impl Source {
    /// The plain default.
    pub const DEFAULT: Source = Source::Default { note: None };
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default { note: None } => f.write_str("default"),
            Source::Default { note: Some(n) } => write!(f, "default ({n})"),
            Source::File { path, line } => write!(f, "{}:{line}", path.display()),
            Source::Env { var } => write!(f, "environment variable {var}"),
            Source::Flag { flag } => write!(f, "flag -c {flag}"),
            Source::Option { flag } => f.write_str(flag),
        }
    }
}

/// The origin of every value set by some layer, by key path (`["agents",
/// "max_tokens_budget"]`). A path not listed, nor under a listed one, is a default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Origins(pub(super) BTreeMap<Vec<String>, Source>);

/// Where each table of a file starts (its `[header]` or its key), for errors about a table.
pub(super) type TableLines = BTreeMap<Vec<String>, Source>;

impl Origins {
    /// Where the setting at `path` came from: its own entry, else the nearest entry above it
    /// (a whole table or array set at once), else the default.
    pub fn of(&self, path: &[String]) -> Source {
        (0..=path.len())
            .rev()
            .find_map(|n| self.0.get(&path[..n]))
            .cloned()
            .unwrap_or(Source::DEFAULT)
    }

    /// Where the setting named `dotted` (`agents.max_tokens_budget`) came from.
    pub fn of_key(&self, dotted: &str) -> Source {
        self.of(&dotted.split('.').map(str::to_string).collect::<Vec<_>>())
    }

    pub(super) fn set(&mut self, path: Vec<String>, source: Source) {
        // A value set now replaces whatever lower layers set at or under this path.
        self.0.retain(|p, _| !p.starts_with(&path));
        self.0.insert(path, source);
    }

    pub(super) fn merge(&mut self, later: &Origins) {
        for (path, source) in &later.0 {
            self.set(path.clone(), source.clone());
        }
    }
}
