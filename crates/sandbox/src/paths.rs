//! Path confinement. IMPLEMENTATION PENDING (sandbox helper).

use std::path::{Path, PathBuf};

use crate::{PathAccess, SandboxConfigError};

/// The read and write allowlists, resolved once.
#[derive(Debug)]
pub(crate) struct PathPolicy {}

impl PathPolicy {
    pub(crate) fn new(
        _read: &[PathBuf],
        _write: &[PathBuf],
        _working_dir: &Path,
    ) -> Result<Self, SandboxConfigError> {
        Ok(PathPolicy {})
    }

    /// Resolve `raw` (relative to the working dir) and confine it. Err: the reason.
    pub(crate) fn check(&self, _raw: &str, _access: PathAccess) -> Result<PathBuf, String> {
        Err("path checks are not implemented yet".into())
    }
}
