//! [`Sandbox::inspect_file`]: a confined look at a file for the harness's own checks.

use super::Sandbox;
use crate::ToolError;

/// What [`Sandbox::inspect_file`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inspection {
    /// Nothing is there.
    Missing,
    /// A regular file: its size, and its text when it is UTF-8 and small enough.
    File {
        /// Size in bytes.
        bytes: u64,
        /// The content, when read.
        text: Option<String>,
    },
    /// Outside the read roots, not a regular file, or unreadable: why.
    Unusable(String),
}

impl Sandbox {
    /// Look at the file `raw` for the harness's own checks (a task contract's file
    /// conditions): confined exactly like a read tool's path — the read roots, relative to
    /// the working directory, opened through the root's handle, a named pipe never waited
    /// for — but with no permission gate, rate limit or record, since nothing found here is
    /// handed to a model. The text is read when the file is at most `max_text_bytes` and
    /// UTF-8. Blocking: call it off the async runtime's workers.
    pub fn inspect_file(&self, raw: &str, max_text_bytes: u64) -> Inspection {
        let path = match self.paths.confine(raw, crate::PathAccess::Read) {
            Ok(path) => path,
            Err(reason) => return Inspection::Unusable(reason.to_string()),
        };
        let not_found = |e: &ToolError| matches!(e, ToolError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound);
        let info = match path.info() {
            Ok(info) => info,
            Err(e) if not_found(&e) => return Inspection::Missing,
            Err(e) => return Inspection::Unusable(e.to_string()),
        };
        if info.kind != crate::EntryKind::File {
            return Inspection::Unusable(format!(
                "{} is not a regular file",
                path.shown().display()
            ));
        }
        let text = if info.len <= max_text_bytes {
            use std::io::Read;
            let mut bytes = Vec::new();
            match path.open_read().and_then(|f| {
                f.take(max_text_bytes)
                    .read_to_end(&mut bytes)
                    .map_err(|e| ToolError::io(path.shown(), e))
            }) {
                Ok(_) => String::from_utf8(bytes).ok(),
                Err(e) => return Inspection::Unusable(e.to_string()),
            }
        } else {
            None
        };
        Inspection::File {
            bytes: info.len,
            text,
        }
    }
}
