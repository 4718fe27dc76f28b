//! `mcp__<server>__<tool>`: the names MCP tools get in a run, and back.
//!
//! Model APIs accept function names of `[A-Za-z0-9_-]{1,64}`; a server's tool name may hold
//! anything, so it is mapped to that alphabet (and the original kept for the call).

use crate::McpError;

/// The prefix every MCP tool's name starts with.
pub const PREFIX: &str = "mcp__";
/// Longest name model APIs accept for a function.
pub const MAX_NAME_LEN: usize = 64;

fn valid_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Check a configured server name: letters, digits, `_` and `-`, no `__` (the separator).
///
/// # Errors
/// When the name cannot appear in a tool name.
pub fn check_server_name(name: &str) -> Result<(), McpError> {
    if name.is_empty() || !name.chars().all(valid_char) || name.contains("__") {
        return Err(McpError::Config(format!(
            "[mcp.servers.{name}]: a server name may hold only letters, digits, '_' and '-', \
             and not '__' (it becomes part of the tool names mcp__<server>__<tool>)"
        )));
    }
    Ok(())
}

/// The run's name for `tool` of `server`: `mcp__<server>__<tool>`, with every character
/// outside `[A-Za-z0-9_-]` replaced by `_`, cut to [`MAX_NAME_LEN`].
pub fn tool_name(server: &str, tool: &str) -> String {
    let mapped: String = tool
        .chars()
        .map(|c| if valid_char(c) { c } else { '_' })
        .collect();
    let mut name = format!("{PREFIX}{server}__{mapped}");
    name.truncate(MAX_NAME_LEN);
    name
}

/// The server a run's tool name belongs to (`mcp__files__read` → `files`), if it is an MCP
/// tool's name.
pub fn server_of(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PREFIX)?;
    let (server, _) = rest.split_once("__")?;
    (!server.is_empty()).then_some(server)
}

/// Whether `pattern` (an allowlist entry) names `name`: equal, or `mcp__<server>__*` for
/// every tool of that server.
pub fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) if pattern.starts_with(PREFIX) && prefix.ends_with("__") => {
            name.starts_with(prefix)
        }
        _ => pattern == name,
    }
}

/// `allowlist` with every `mcp__<server>__*` entry replaced by the `registered` tool names it
/// matches (none when the server gave no tools); other entries are kept as they are.
pub fn expand<'a>(
    allowlist: impl IntoIterator<Item = String>,
    registered: impl IntoIterator<Item = &'a str> + Clone,
) -> Vec<String> {
    let mut out = Vec::new();
    for entry in allowlist {
        if entry.starts_with(PREFIX) && entry.ends_with("__*") {
            out.extend(
                registered
                    .clone()
                    .into_iter()
                    .filter(|name| matches(&entry, name))
                    .map(str::to_string),
            );
        } else {
            out.push(entry);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_mapped_and_capped() {
        assert_eq!(tool_name("files", "read"), "mcp__files__read");
        assert_eq!(
            tool_name("t", "tool.with spaces"),
            "mcp__t__tool_with_spaces"
        );
        let long = tool_name("s", &"x".repeat(100));
        assert_eq!(long.len(), MAX_NAME_LEN);
        assert_eq!(server_of("mcp__files__read"), Some("files"));
        assert_eq!(server_of("mcp__files__a__b"), Some("files"));
        assert_eq!(server_of("read_file"), None);
        assert_eq!(server_of("mcp____x"), None);
    }

    #[test]
    fn wildcards_cover_one_server_only() {
        assert!(matches("mcp__files__*", "mcp__files__read"));
        assert!(!matches("mcp__files__*", "mcp__filesystem__read"));
        assert!(!matches("mcp__files__*", "read_file"));
        assert!(matches("read_file", "read_file"));
        assert!(!matches("read_*", "read_file"));
        let registered = [
            "mcp__files__read",
            "mcp__files__write",
            "mcp__git__log",
            "bash",
        ];
        assert_eq!(
            expand(
                [
                    "mcp__files__*".to_string(),
                    "bash".to_string(),
                    "mcp__web__*".to_string()
                ],
                registered
            ),
            ["mcp__files__read", "mcp__files__write", "bash"]
        );
    }

    #[test]
    fn server_names_that_would_break_the_mapping_are_refused() {
        assert!(check_server_name("files-1_a").is_ok());
        for bad in ["", "a__b", "a.b", "a b"] {
            assert!(check_server_name(bad).is_err(), "{bad}");
        }
    }
}
