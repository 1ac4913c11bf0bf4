//! MCP (the Model Context Protocol): the tools of MCP servers as kit tools, and kit tools (or a
//! whole agent) served to MCP clients. Feature `mcp`.
//!
//! kit speaks MCP through [`rmcp`], the official Rust SDK, re-exported here so your code and
//! kit agree on one version. rmcp changes its API every few months; kit pins it exactly
//! (`=3.11.0`) and moves the pin deliberately.
//!
//! ## Using a server's tools
//!
//! An [`McpClient`] is a connection to one server: a child process spoken to over stdio
//! ([`McpClient::stdio`]), a Streamable HTTP URL ([`McpClient::http`]), or any rmcp transport
//! ([`McpClient::connect_with`]). Its [`tools`](McpClient::tools) are ordinary kit [`Tool`]s:
//!
//! * the server's `inputSchema` is the tool's schema, and a model's arguments are checked
//!   against it before anything is sent (a bad call is answered by kit, with what to fix);
//! * results map to tool results: text, images, embedded text resources, `structuredContent`
//!   (as JSON text when there is no text), and `isError: true` as an error result;
//! * a timeout, a server that crashed or closed the connection, and a protocol error each
//!   become an error result saying what happened and what the model can do — never a panic
//!   or a run that hangs; a server that crashed is started (or reached) again on the next
//!   call, at most [`max_restarts`](McpClientBuilder::max_restarts) times;
//! * calls go through the agent's middleware (guardrails, review, limits) like any tool call,
//!   and each is a trace run named `tools/call <tool> @ <server>`, inside the tool's run, which
//!   carries `mcp_server` and `mcp_tool` in its metadata and the tag `mcp`.
//!
//! A server may change its tool list while it runs (`notifications/tools/list_changed`).
//! [`McpClient::tools`] lists again after such a notice; an [`McpToolset`] — a middleware —
//! shows each model call the list the servers have now.
//!
//! **Protocol versions.** The client asks for the stateless 2026-07-28 revision first
//! (`server/discover`) and falls back to the `initialize` handshake of 2025-11-25 when the
//! server does not know it, as most servers of the TypeScript and Python SDKs do today. On a
//! 2026-07-28 connection it subscribes to tool-list changes (`subscriptions/listen`) before
//! `connect` returns; older servers send them unasked. Servers that ask the client for input
//! mid-call (sampling, elicitation) are declined: kit's client advertises neither.
//!
//! ## What a hostile server cannot do
//!
//! A message larger than [`max_message_bytes`](McpClientBuilder::max_message_bytes) is dropped
//! unread (stdio) or refused (HTTP); a tool list longer than
//! [`max_tools`](McpClientBuilder::max_tools) or than 64 pages is an error; descriptions are cut
//! to 4096 characters and names to what providers accept; results longer than
//! [`max_result_chars`](McpClientBuilder::max_result_chars) are cut with a marker; a
//! child's stderr is kept only in its last 2 KiB; and every request has a timeout.
//!
//! ## Serving kit tools
//!
//! An [`McpServer`] serves kit tools, or an agent as one tool, over stdio
//! ([`serve_stdio`](McpServer::serve_stdio)), Streamable HTTP
//! ([`serve_http`](McpServer::serve_http), with connection limits), or any rmcp transport
//! ([`serve`](McpServer::serve)).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use kit::mcp::{McpClient, McpServer};
//! use kit::testing::ScriptedModel;
//! use kit::tool::ToolError;
//! use kit::{Agent, Message, ToolCall};
//!
//! /// Looks up the weather of a city.
//! #[kit::tool]
//! async fn weather(city: String) -> Result<String, ToolError> {
//!     Ok(format!("Sunny in {city}."))
//! }
//!
//! // A server kit did not have to write: here, kit itself, in-process.
//! let (client_io, server_io) = tokio::io::duplex(64 * 1024);
//! let _serving = McpServer::new("weather").tool(Weather).serve(server_io);
//! let client = McpClient::connect_with("weather", client_io).await?;
//! let agent = Agent::builder()
//!     .model(ScriptedModel::new([
//!         Message::assistant_with_tool_calls("", vec![ToolCall::new("weather", serde_json::json!({"city": "Oslo"}))]),
//!         Message::assistant("It is sunny in Oslo."),
//!     ]))
//!     .tools(client.tools().await?)
//!     .build()?;
//! let out = agent.invoke("Weather in Oslo?").await?;
//! assert_eq!(out.state().final_text(), "It is sunny in Oslo.");
//! # Ok(()) }
//! ```
//!
//! [`Tool`]: crate::tool::Tool

mod client;
mod connection;
mod error;
mod http;
mod server;
mod tools;
mod toolset;
mod transport;

pub use client::{McpClient, McpClientBuilder};
pub use error::{McpError, StderrTail};
pub use http::{McpHttpConfig, McpHttpServer};
pub use rmcp;
pub use server::{McpHandler, McpServer, McpServing};
pub use toolset::McpToolset;
