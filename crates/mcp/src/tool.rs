//! [`McpTool`]: one tool of an MCP server as an lsm [`Tool`], so every call goes through the
//! sandbox (schema validation, permission gate, rate limit, timeout, output cap, redaction).

use std::sync::Arc;

use lsm_sandbox::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput};
use rmcp::model::{CallToolResult, ContentBlock, Tool as McpToolInfo};
use serde_json::{Value, json};

use crate::client::Connection;
use crate::naming;

/// Longest description of a server's tool passed on to the model (the rest is cut): it is
/// text from a program we do not control, and it costs tokens on every call.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// A server's tool, named `mcp__<server>__<tool>`.
pub struct McpTool {
    name: String,
    remote: String,
    description: String,
    parameters: Value,
    risk: RiskLevel,
    needs_permission: bool,
    deferred: bool,
    connection: Arc<Connection>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

/// Why a server's tool cannot be offered: its input schema does not compile. The tool is
/// left out of the listing with this reason; the server's other tools are offered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("its input schema does not compile: {message}")]
pub struct SchemaError {
    /// What the JSON Schema compiler said.
    pub message: String,
}

/// The parameters schema the sandbox validates against: the server's schema when it is an
/// object schema (a missing `type` with object keywords counts), else the server's schema
/// under a required `input` property, so that the arguments are always a JSON object (as
/// MCP sends them). Err: why the schema cannot be used at all (it does not compile).
pub fn parameters_for(schema: &serde_json::Map<String, Value>) -> Result<Value, SchemaError> {
    let object_keywords = ["properties", "required", "additionalProperties"];
    let params = match schema.get("type") {
        Some(Value::String(t)) if t == "object" => Value::Object(schema.clone()),
        None if schema.is_empty() || object_keywords.iter().any(|k| schema.contains_key(*k)) => {
            let mut s = schema.clone();
            s.insert("type".into(), json!("object"));
            Value::Object(s)
        }
        _ => json!({
            "type": "object",
            "properties": { "input": Value::Object(schema.clone()) },
            "required": ["input"],
            "additionalProperties": false
        }),
    };
    jsonschema::validator_for(&params).map_err(|e| SchemaError {
        message: e.to_string(),
    })?;
    Ok(params)
}

impl McpTool {
    /// The tool `info` of the server behind `connection`, with the server's (or the tool's
    /// overridden) risk and permission default.
    ///
    /// # Errors
    /// When its input schema cannot be used (the reason, for the listing).
    pub fn new(info: &McpToolInfo, connection: Arc<Connection>) -> Result<Self, SchemaError> {
        let remote = info.name.to_string();
        let parameters = parameters_for(&info.input_schema)?;
        let config = connection.config();
        let mut description: String = info
            .description
            .as_deref()
            .unwrap_or("")
            .chars()
            .take(MAX_DESCRIPTION_CHARS)
            .collect();
        if description.trim().is_empty() {
            description = format!(
                "Tool '{remote}' of the MCP server '{}'.",
                connection.server()
            );
        }
        Ok(McpTool {
            name: naming::tool_name(connection.server(), &remote),
            risk: config.risk_of(&remote),
            needs_permission: config.needs_permission_of(&remote),
            deferred: config.deferred(&remote),
            remote,
            description,
            parameters,
            connection,
        })
    }

    /// The server's own name for the tool.
    pub fn remote_name(&self) -> &str {
        &self.remote
    }
}

/// The text the model sees for a result: the text blocks joined, other kinds named, the
/// structured content when there is nothing else.
pub fn result_text(result: &CallToolResult) -> String {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(_) => "[image content omitted]".to_string(),
            ContentBlock::Audio(_) => "[audio content omitted]".to_string(),
            ContentBlock::Resource(_) => "[embedded resource omitted]".to_string(),
            ContentBlock::ResourceLink(r) => format!("[resource link: {}]", r.uri),
            _ => "[content of an unknown kind omitted]".to_string(),
        })
        .collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    parts.join("\n")
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn risk(&self) -> RiskLevel {
        self.risk
    }

    fn needs_permission(&self) -> bool {
        self.needs_permission
    }

    fn deferred(&self) -> bool {
        self.deferred
    }

    async fn execute(&self, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments = match ctx.args {
            Value::Object(map) => map,
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "the arguments must be a JSON object, got {other}"
                )));
            }
        };
        let result = self
            .connection
            .call(&self.remote, arguments)
            .await
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let text = result_text(&result);
        if result.is_error == Some(true) {
            return Err(ToolError::Failed(format!(
                "the MCP tool '{}' reported an error: {text}",
                self.remote
            )));
        }
        Ok(ToolOutput::text(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ServerConfig, ToolOverride};

    #[test]
    fn a_tool_the_configuration_defers_says_so_and_the_others_do_not() {
        let mut config = ServerConfig {
            command: Some("mcp-ops".into()),
            ..ServerConfig::default()
        };
        config.tools.insert(
            "deploy".into(),
            ToolOverride {
                deferred: true,
                ..ToolOverride::default()
            },
        );
        let connection = Arc::new(Connection::new("ops", config));
        let tool = |name: &str| {
            let info = McpToolInfo::new(
                name.to_string(),
                "x".to_string(),
                Arc::new(serde_json::Map::new()),
            );
            McpTool::new(&info, Arc::clone(&connection)).unwrap()
        };
        assert!(tool("deploy").deferred());
        assert_eq!(tool("deploy").name(), "mcp__ops__deploy");
        assert!(!tool("status").deferred());
    }
}
