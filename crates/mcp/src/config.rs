//! `[mcp.servers.<name>]`: which MCP servers a run may use, how to reach them, and how much
//! their tools are trusted.

use std::collections::BTreeMap;

use lsm_sandbox::RiskLevel;
use serde::{Deserialize, Serialize};

use crate::McpError;

/// The whole `[mcp]` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// Servers by name; the name is the middle part of `mcp__<server>__<tool>`.
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One MCP server: a program started over stdio (`command`) or an HTTP endpoint (`url`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The program to start (stdio transport). Exactly one of `command` and `url`.
    pub command: Option<String>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables the program gets, besides `PATH`, `HOME` and `LANG`; nothing
    /// else of ours is passed (no API keys). A value `"${NAME}"` is read from our own
    /// environment, so a secret need not be written into the file.
    pub env: BTreeMap<String, String>,
    /// The streamable-HTTP endpoint (`http://127.0.0.1:8000/mcp`). Exactly one of `command`
    /// and `url`.
    pub url: Option<String>,
    /// Longest wait for the server to start, list its tools, or answer one call. A server
    /// that takes longer is stopped, the call gets an error result, and the next call starts
    /// it again.
    pub timeout_seconds: f64,
    /// Risk level of the server's tools (default `exec`: they run code we do not control).
    pub risk: RiskLevel,
    /// Whether a person must approve each call of the server's tools (default `true`).
    /// `[sandbox] require_user_permission` / `require_permission_by_risk` still take
    /// precedence, as for every tool.
    pub needs_permission: bool,
    /// Per-tool overrides, by the server's own tool name.
    pub tools: BTreeMap<String, ToolOverride>,
    /// Whether the server is used at all.
    pub enabled: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            timeout_seconds: 30.0,
            risk: RiskLevel::Exec,
            needs_permission: true,
            tools: BTreeMap::new(),
            enabled: true,
        }
    }
}

/// `[mcp.servers.<name>.tools.<tool>]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolOverride {
    /// This tool's risk level instead of the server's.
    pub risk: Option<RiskLevel>,
    /// Whether this tool asks a person first, instead of the server's setting.
    pub needs_permission: Option<bool>,
    /// The tool is handled outside `lsm` (deferred): offered to the model, never called on
    /// the server by `lsm`; a call of it pauses the run until its result is supplied
    /// (`lsm runs resume RUN --tool-result ID=FILE`).
    pub deferred: bool,
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Start `command args…` and talk over its stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// Streamable HTTP at this URL.
    Http {
        /// The endpoint.
        url: String,
    },
}

impl ServerConfig {
    /// How to reach the server.
    ///
    /// # Errors
    /// When neither or both of `command` and `url` are set.
    pub fn transport(&self, server: &str) -> Result<Transport, McpError> {
        match (&self.command, &self.url) {
            (Some(command), None) if !command.trim().is_empty() => Ok(Transport::Stdio {
                command: command.clone(),
                args: self.args.clone(),
            }),
            (None, Some(url)) if url.starts_with("http://") || url.starts_with("https://") => {
                Ok(Transport::Http { url: url.clone() })
            }
            (None, Some(url)) => Err(McpError::Config(format!(
                "[mcp.servers.{server}] url = \"{url}\" must start with http:// or https://"
            ))),
            _ => Err(McpError::Config(format!(
                "[mcp.servers.{server}] needs exactly one of `command` (a program started over \
                 stdio) and `url` (a streamable-HTTP endpoint)"
            ))),
        }
    }

    /// The risk level of `tool` (the server's own name for it).
    pub fn risk_of(&self, tool: &str) -> RiskLevel {
        self.tools
            .get(tool)
            .and_then(|t| t.risk)
            .unwrap_or(self.risk)
    }

    /// Whether `tool` is deferred (handled outside `lsm`).
    pub fn deferred(&self, tool: &str) -> bool {
        self.tools.get(tool).is_some_and(|t| t.deferred)
    }

    /// Whether `tool` asks a person first by default.
    pub fn needs_permission_of(&self, tool: &str) -> bool {
        self.tools
            .get(tool)
            .and_then(|t| t.needs_permission)
            .unwrap_or(self.needs_permission)
    }
}

impl McpConfig {
    /// Check every server's settings.
    ///
    /// # Errors
    /// The first problem, naming the server and key.
    pub fn validate(&self) -> Result<(), McpError> {
        for (name, server) in &self.servers {
            crate::naming::check_server_name(name)?;
            server.transport(name)?;
            if !(server.timeout_seconds.is_finite() && server.timeout_seconds > 0.0) {
                return Err(McpError::Config(format!(
                    "[mcp.servers.{name}] timeout_seconds = {} must be a positive number of \
                     seconds",
                    server.timeout_seconds
                )));
            }
        }
        Ok(())
    }

    /// The enabled servers, by name.
    pub fn enabled(&self) -> impl Iterator<Item = (&String, &ServerConfig)> {
        self.servers.iter().filter(|(_, s)| s.enabled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpConfig, String> {
        let c: McpConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn a_stdio_server_with_overrides_is_read_and_defaults_need_permission() {
        let c = parse(
            "[servers.files]\ncommand = \"mcp-files\"\nargs = [\"--root\", \".\"]\n\
             env = { TOKEN = \"${MY_TOKEN}\" }\n\
             [servers.files.tools.read]\nrisk = \"read_only\"\nneeds_permission = false\n",
        )
        .unwrap();
        let s = &c.servers["files"];
        assert_eq!(
            s.transport("files").unwrap(),
            Transport::Stdio {
                command: "mcp-files".into(),
                args: vec!["--root".into(), ".".into()]
            }
        );
        assert_eq!(s.risk_of("read"), RiskLevel::ReadOnly);
        assert!(!s.needs_permission_of("read"));
        assert_eq!(s.risk_of("write"), RiskLevel::Exec);
        assert!(!s.deferred("write"));
        assert!(s.needs_permission_of("write"));
        assert!(s.enabled);
    }

    #[test]
    fn bad_servers_are_refused_with_the_key_named() {
        let e = parse("[servers.x]\nargs = []\n").unwrap_err();
        assert!(e.contains("[mcp.servers.x] needs exactly one of"), "{e}");
        let e = parse("[servers.x]\ncommand = \"a\"\nurl = \"http://h/mcp\"\n").unwrap_err();
        assert!(e.contains("exactly one"), "{e}");
        let e = parse("[servers.x]\nurl = \"ftp://h\"\n").unwrap_err();
        assert!(e.contains("http://"), "{e}");
        let e = parse("[servers.x]\ncommand = \"a\"\ntimeout_seconds = 0\n").unwrap_err();
        assert!(e.contains("timeout_seconds"), "{e}");
        let e = parse("[servers.a__b]\ncommand = \"a\"\n").unwrap_err();
        assert!(e.contains("a__b"), "{e}");
        let e = parse("[servers.x]\ncommand = \"a\"\ncomand = \"b\"\n").unwrap_err();
        assert!(e.contains("comand"), "{e}");
    }
}
