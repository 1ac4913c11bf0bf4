//! What can go wrong talking MCP: connecting, listing, serving.
//!
//! A failed *tool call* is not an [`McpError`]: it becomes an error tool result the model reads
//! (see [`McpClient`](super::McpClient)). `McpError` is for the program: a server that cannot be
//! started or reached, a handshake that failed, a tool list that could not be read.

use std::time::Duration;

/// A connection to an MCP server, or serving one, failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server's program could not be started.
    #[error(
        "could not start the MCP server `{server}` (`{program}`): {source}; check that the \
         program is installed and on PATH, or give its full path"
    )]
    Spawn {
        /// The server's name.
        server: String,
        /// The program that was run.
        program: String,
        /// Why it did not start.
        #[source]
        source: std::io::Error,
    },
    /// The handshake (`initialize`) failed: wrong URL, not an MCP server, or it exited.
    #[error("could not connect to the MCP server `{server}`: {message}{stderr}")]
    Connect {
        /// The server's name.
        server: String,
        /// What failed.
        message: String,
        /// The end of the server's stderr, when it is a child process that wrote any.
        stderr: StderrTail,
    },
    /// The server did not answer in time.
    #[error(
        "the MCP server `{server}` did not answer `{method}` within {timeout:?}; raise the \
         timeout if the server is slow to start, or check that it is running"
    )]
    Timeout {
        /// The server's name.
        server: String,
        /// The request that timed out.
        method: &'static str,
        /// The limit.
        timeout: Duration,
    },
    /// A request failed after the connection was made (the server closed it, or answered with
    /// an error).
    #[error("the MCP server `{server}` failed `{method}`: {message}{stderr}")]
    Request {
        /// The server's name.
        server: String,
        /// The request.
        method: &'static str,
        /// What failed.
        message: String,
        /// The end of the server's stderr, when it is a child process that wrote any.
        stderr: StderrTail,
    },
    /// The server broke one of kit's limits on what a server may send.
    #[error("the MCP server `{server}` sent too much: {message}")]
    Limit {
        /// The server's name.
        server: String,
        /// Which limit, and how to raise it.
        message: String,
    },
    /// Two servers of one toolset offer a tool of the same name.
    #[error(
        "the MCP servers `{first}` and `{second}` both offer a tool named `{tool}`; connect one \
         of them with `prefix_tool_names(true)` (its tools become `<server>_<tool>`)"
    )]
    DuplicateTool {
        /// The tool's name.
        tool: String,
        /// The server listed first.
        first: String,
        /// The other server.
        second: String,
    },
    /// Serving kit tools over MCP failed.
    #[error("serving MCP failed: {0}")]
    Serve(String),
}

/// The last lines a child-process server wrote to stderr, shown after an error (empty when
/// there are none).
#[derive(Debug, Clone, Default)]
pub struct StderrTail(pub String);

impl std::fmt::Display for StderrTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.trim().is_empty() {
            Ok(())
        } else {
            write!(f, " (the server's stderr ends with: {})", self.0.trim())
        }
    }
}
