//! `MemoryConfig`: the settings of persistent memory (`[agents.memory]` in `lsm.toml`) and
//! the store they describe.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::store::{MemoryStore, StoreLayout};

/// Persistent memory's settings (`[agents.memory]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Register the memory tools and inject standing context in agent runs.
    pub enabled: bool,
    /// Most memories in one standing block.
    pub limit: usize,
    /// The project database (default `<agents_folder>/project_memory.db`).
    pub project_db: Option<PathBuf>,
    /// The global database (default: the user's data folder, see
    /// [`default_global_db`](crate::default_global_db)).
    pub global_db: Option<PathBuf>,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            enabled: false,
            limit: 8,
            project_db: None,
            global_db: None,
        }
    }
}

/// A `[memory]` setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryConfigError {
    /// `limit = 0`: standing memory would always be empty. Set `enabled = false` instead.
    #[error("limit must be at least 1 (set enabled = false to turn memory off)")]
    ZeroLimit,
}

impl MemoryConfig {
    /// Check the settings.
    ///
    /// # Errors
    /// A zero `limit`, with what to do instead.
    pub fn validate(&self) -> Result<(), MemoryConfigError> {
        if self.limit == 0 {
            return Err(MemoryConfigError::ZeroLimit);
        }
        Ok(())
    }

    /// The store these settings describe, for `agents_folder`.
    pub fn store(&self, agents_folder: &Path) -> MemoryStore {
        let mut layout = StoreLayout::new(agents_folder);
        if let Some(p) = &self.project_db {
            layout = layout.with_project_db(p.clone());
        }
        if let Some(p) = &self.global_db {
            layout = layout.with_global_db(Some(p.clone()));
        }
        MemoryStore::new(layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_limit_is_refused_and_the_store_uses_the_configured_files() {
        let mut c = MemoryConfig::default();
        assert_eq!(c.validate(), Ok(()));
        c.limit = 0;
        assert_eq!(c.validate(), Err(MemoryConfigError::ZeroLimit));
        assert!(
            MemoryConfigError::ZeroLimit
                .to_string()
                .contains("at least 1")
        );
        let dir = tempfile::tempdir().unwrap();
        c.global_db = Some(dir.path().join("g.db"));
        c.project_db = Some(dir.path().join("p.db"));
        let layout = c.store(&dir.path().join("Agents")).layout().clone();
        assert_eq!(layout.global_db, Some(dir.path().join("g.db")));
        assert_eq!(layout.project_db, dir.path().join("p.db"));
    }
}
