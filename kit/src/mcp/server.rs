//! kit tools, or a whole kit agent, served over MCP to any MCP client.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::IntoTransport;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use super::McpError;
use crate::agent::Agent;
use crate::graph::Outcome;
use crate::message::{Content, ContentPart, ImageSource, ToolCall};
use crate::tool::{IntoTool, Tool, ToolContext, ToolError};
use crate::trace::TraceOptions;

/// kit tools (or an agent, as one tool) served over MCP: stdio, Streamable HTTP, or any rmcp
/// transport.
///
/// Each call is validated against the tool's schema and run like a call from an agent (a
/// failure is a result with `isError: true`, never a dropped connection), as a trace run with
/// `mcp_server` in its metadata. Tools run outside any agent: [`ToolContext::detached`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::mcp::McpError> {
/// use kit::mcp::{McpClient, McpServer};
/// use kit::tool::ToolError;
///
/// /// Adds two integers.
/// #[kit::tool]
/// async fn add(a: i64, b: i64) -> Result<i64, ToolError> {
///     Ok(a + b)
/// }
///
/// let (client_io, server_io) = tokio::io::duplex(64 * 1024);
/// let serving = McpServer::new("calculator").tool(Add).serve(server_io);
/// let client = McpClient::connect_with("calculator", client_io).await?;
/// assert_eq!(client.tools().await?[0].name(), "add");
/// serving.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use = "a server does nothing until it is served"]
pub struct McpServer {
    name: String,
    version: String,
    instructions: Option<String>,
    tools: Vec<Tool>,
    max_concurrent_calls: usize,
}

/// [`McpServer::max_concurrent_calls`] unless set.
const DEFAULT_MAX_CONCURRENT_CALLS: usize = 64;

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .field(
                "tools",
                &self.tools.iter().map(Tool::name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl McpServer {
    /// A server named `name` (what clients see in the handshake), with no tools yet.
    pub fn new(name: impl Into<String>) -> Self {
        McpServer {
            name: name.into(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            instructions: None,
            tools: Vec::new(),
            max_concurrent_calls: DEFAULT_MAX_CONCURRENT_CALLS,
        }
    }

    /// The most tool calls run at once, over every client of this server (default 64). A
    /// call past it is answered at once with an error result saying the server is busy: a
    /// client may send requests faster than tools finish (each of an agent tool is a whole
    /// run), and each waiting one would hold its arguments and a task.
    pub fn max_concurrent_calls(mut self, calls: usize) -> Self {
        self.max_concurrent_calls = calls.max(1);
        self
    }

    /// The version clients see (default: kit's).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Instructions for the client's model, sent in the handshake.
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// Serves a tool (a later tool of the same name replaces it).
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        let tool = tool.into_tool();
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
        self
    }

    /// Serves these tools.
    pub fn tools<I, T>(self, tools: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: IntoTool,
    {
        tools.into_iter().fold(self, McpServer::tool)
    }

    /// Serves a whole agent as one tool, named after the agent, taking `{"input": "<task>"}`
    /// and answering with the agent's final text. Each call is a fresh run (no thread); a run
    /// that pauses for human input is an error result, since an MCP call cannot answer it.
    pub fn agent(self, agent: Agent, description: impl Into<String>) -> Self {
        self.tool(agent_tool(agent, description.into()))
    }

    /// Serves one client on `transport` (a `tokio::io::duplex` half, a socket,
    /// `(stdin, stdout)`, ...), in a background task: the handshake happens as the client
    /// makes it. The returned handle keeps serving until the client disconnects, or it is
    /// closed or dropped; [`wait`](McpServing::wait) reports a failed handshake.
    pub fn serve<T, E, A>(self, transport: T) -> McpServing
    where
        T: IntoTransport<RoleServer, E, A> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
        A: 'static,
    {
        let handler = self.handler();
        let task = tokio::spawn(async move {
            let running = handler
                .serve(transport)
                .await
                .map_err(|e| McpError::Serve(format!("the MCP handshake failed: {e}")))?;
            running
                .waiting()
                .await
                .map(|_| ())
                .map_err(|e| McpError::Serve(format!("the server task failed: {e}")))
        });
        McpServing { task: Some(task) }
    }

    /// Serves on this process's stdin and stdout until the client disconnects: the way an MCP
    /// host (an IDE, a desktop app) runs a server it launched. Write logs to stderr, never to
    /// stdout.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        self.serve((tokio::io::stdin(), tokio::io::stdout()))
            .wait()
            .await
    }

    pub(crate) fn handler(self) -> McpHandler {
        let index = self
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name().to_string(), i))
            .collect();
        McpHandler {
            inner: Arc::new(Shared {
                name: self.name,
                version: self.version,
                instructions: self.instructions,
                tools: self.tools,
                index,
                calls: Arc::new(tokio::sync::Semaphore::new(self.max_concurrent_calls)),
                max_calls: self.max_concurrent_calls,
            }),
        }
    }
}

/// A server serving one client, in the background. Dropping it stops serving.
pub struct McpServing {
    task: Option<tokio::task::JoinHandle<Result<(), McpError>>>,
}

impl std::fmt::Debug for McpServing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServing").finish_non_exhaustive()
    }
}

impl McpServing {
    /// Waits until the client disconnects; `Err` when the handshake failed.
    pub async fn wait(mut self) -> Result<(), McpError> {
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|e| McpError::Serve(format!("the server task failed: {e}")))?,
            None => Ok(()),
        }
    }

    /// Stops serving.
    pub async fn close(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for McpServing {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

struct Shared {
    name: String,
    version: String,
    instructions: Option<String>,
    tools: Vec<Tool>,
    index: HashMap<String, usize>,
    /// Permits for the calls running now.
    calls: Arc<tokio::sync::Semaphore>,
    max_calls: usize,
}

/// The rmcp [`ServerHandler`] of an [`McpServer`] (what [`McpServer::http_service`] serves).
#[derive(Clone)]
pub struct McpHandler {
    inner: Arc<Shared>,
}

impl McpHandler {
    fn mcp_tools(&self) -> Vec<rmcp::model::Tool> {
        self.inner.tools.iter().map(to_mcp_tool).collect()
    }
}

fn to_mcp_tool(tool: &Tool) -> rmcp::model::Tool {
    let schema = match tool.parameters() {
        Value::Object(map) => map.clone(),
        _ => json!({"type": "object"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    };
    rmcp::model::Tool::new(
        tool.name().to_string(),
        tool.description().to_string(),
        Arc::new(schema),
    )
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                self.inner.name.clone(),
                self.inner.version.clone(),
            ));
        if let Some(text) = &self.inner.instructions {
            info = info.with_instructions(text.clone());
        }
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.mcp_tools()))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let i = *self.inner.index.get(name)?;
        self.inner.tools.get(i).map(to_mcp_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = self
            .inner
            .index
            .get(request.name.as_ref())
            .and_then(|&i| self.inner.tools.get(i))
        else {
            let names: Vec<&str> = self.inner.tools.iter().map(Tool::name).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "there is no tool `{}`; the tools are [{}]",
                    request.name,
                    names.join(", ")
                ),
                None,
            ));
        };
        let Ok(_running) = self.inner.calls.clone().try_acquire_owned() else {
            return Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                ContentBlock::text(format!(
                    "the server is busy: {} tool calls are running, its most at once; try \
                     again when one has finished",
                    self.inner.max_calls
                )),
            ])));
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        let call = ToolCall::new(tool.name(), args);
        let options = TraceOptions::new().metadata("mcp_server", self.inner.name.clone());
        let run = tool.execute_traced(&call, ToolContext::detached(), &options);
        let result = tokio::select! {
            done = run => match done {
                Ok(execution) => to_call_result(&execution.message.content, execution.message.is_error()),
                Err(_) => CallToolResult::error(vec![ContentBlock::text(
                    "the tool paused for human input, which an MCP call cannot give",
                )]),
            },
            () = context.ct.cancelled() => CallToolResult::error(vec![ContentBlock::text(
                "the call was cancelled by the client",
            )]),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// A tool result as an MCP result.
fn to_call_result(content: &Content, is_error: bool) -> CallToolResult {
    let blocks = match content {
        Content::Text(t) => vec![ContentBlock::text(t.clone())],
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } => Some(ContentBlock::text(text.clone())),
                ContentPart::Image {
                    source: ImageSource::Base64 { media_type, data },
                } => Some(ContentBlock::image(data.clone(), media_type.clone())),
                ContentPart::Image {
                    source: ImageSource::Url { url },
                } => Some(ContentBlock::text(format!("[image: {url}]"))),
                _ => None,
            })
            .collect(),
    };
    if is_error {
        CallToolResult::error(blocks)
    } else {
        CallToolResult::success(blocks)
    }
}

/// An agent as a tool taking `{"input": "<task>"}`.
fn agent_tool(agent: Agent, description: String) -> Tool {
    let name = agent.name().to_string();
    let agent = Arc::new(agent);
    Tool::from_fn(
        name,
        description,
        json!({
            "type": "object",
            "properties": {
                "input": {"type": "string", "description": "The task for the agent, in words."}
            },
            "required": ["input"],
            "additionalProperties": false
        }),
        move |args, _ctx| {
            let agent = agent.clone();
            async move {
                let input = args
                    .get("input")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                match agent.invoke(input).await {
                    Ok(Outcome::Done(state)) => Ok(state.final_text()),
                    Ok(Outcome::Interrupted(_)) => Err(ToolError::new(
                        "the agent paused for human input, which an MCP call cannot give; \
                         serve an agent that does not need review",
                    )),
                    Err(e) => Err(ToolError::new(format!("the agent failed: {e}"))),
                }
            }
        },
    )
}
