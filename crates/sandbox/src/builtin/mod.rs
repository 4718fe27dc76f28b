//! Built-in file and shell tools. IMPLEMENTATION PENDING.

use crate::ToolRegistry;

/// A registry holding every built-in tool.
pub fn registry() -> ToolRegistry {
    ToolRegistry::new()
}
