//! Errors of the MCP client and server.

/// What went wrong talking to an MCP server, or serving one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A setting of `[mcp.servers.<name>]` cannot be used.
    #[error("{0}")]
    Config(String),
    /// The server could not be started or connected to.
    #[error("MCP server '{server}' could not be started: {reason}")]
    Start {
        /// The configured server name.
        server: String,
        /// Why.
        reason: String,
    },
    /// The server did not answer in time; it has been stopped and starts again on the next
    /// call.
    #[error(
        "MCP server '{server}' did not answer within {seconds} s; it was stopped and will be \
         started again on the next call (raise [mcp.servers.{server}] timeout_seconds if it \
         needs longer)"
    )]
    Timeout {
        /// The configured server name.
        server: String,
        /// The limit that was exceeded.
        seconds: f64,
    },
    /// The connection broke (the server exited or closed its output); it starts again on the
    /// next call.
    #[error(
        "MCP server '{server}' stopped responding ({reason}); it will be started again on the \
         next call"
    )]
    Disconnected {
        /// The configured server name.
        server: String,
        /// What the transport said.
        reason: String,
    },
    /// The server answered with an MCP error.
    #[error("MCP server '{server}' returned an error: {message}")]
    Remote {
        /// The configured server name.
        server: String,
        /// The server's message.
        message: String,
    },
    /// Serving over MCP failed.
    #[error("MCP server: {0}")]
    Serve(String),
}
