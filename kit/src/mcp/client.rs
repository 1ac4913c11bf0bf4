//! A connection to one MCP server, and its tools as kit tools.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, PaginatedRequestParams};
use rmcp::transport::IntoTransport;
use rmcp::{RoleClient, ServiceError};
use tokio::sync::watch;

use super::McpError;
use super::connection::{Connection, open, open_endpoint};
use super::tools::to_kit_tools;
use super::transport::Endpoint;
use crate::tool::Tool;

/// The limits and timeouts of a client. Every field has a default that suits a local server.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) connect_timeout: Duration,
    pub(crate) call_timeout: Duration,
    pub(crate) max_message_bytes: usize,
    pub(crate) max_result_chars: usize,
    pub(crate) max_tools: usize,
    pub(crate) prefix_tool_names: bool,
    pub(crate) max_restarts: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            connect_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            max_message_bytes: 8 * 1024 * 1024,
            max_result_chars: 100_000,
            max_tools: 512,
            prefix_tool_names: false,
            max_restarts: 3,
        }
    }
}

/// The most pages of `tools/list` read (a server that always sends a next cursor stops here).
const MAX_LIST_PAGES: usize = 64;

/// A connection to one MCP server. Cheap to clone; the connection (and a child-process
/// server) ends when the last clone and the last of its tools are dropped, or at
/// [`close`](Self::close).
///
/// Make one with [`McpClient::stdio`] or [`McpClient::http`] and
/// [`connect`](McpClientBuilder::connect), then take its [`tools`](Self::tools) into an
/// agent, or its [`toolset`](Self::toolset) to follow the server's tool list as it changes.
///
/// ```no_run
/// use kit::mcp::McpClient;
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), kit::mcp::McpError> {
/// let files = McpClient::stdio("files", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"])
///     .call_timeout(Duration::from_secs(20))
///     .connect()
///     .await?;
/// let weather = McpClient::http("weather", "http://127.0.0.1:8000/mcp")
///     .bearer_token("…")
///     .connect()
///     .await?;
/// let mut tools = files.tools().await?;
/// tools.extend(weather.tools().await?);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.inner.name)
            .finish_non_exhaustive()
    }
}

/// What the tools of a client share.
pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) options: Options,
    /// Where the server is, to start it again after a crash (`Given`: it cannot be).
    endpoint: Endpoint,
    conn: Mutex<Arc<Connection>>,
    /// Held while a connection is replaced, so one crash is one restart.
    restarting: tokio::sync::Mutex<()>,
    restarts: AtomicU32,
    closed: AtomicBool,
    changes: watch::Sender<u64>,
    /// The server's tools as last listed, and the count of list changes then. (The server's
    /// definitions, not kit tools: those hold this client, and would keep it alive forever.)
    cache: tokio::sync::Mutex<Option<(u64, Arc<[rmcp::model::Tool]>)>>,
}

/// How to connect to a server: where it is, and the client's limits. From
/// [`McpClient::stdio`] or [`McpClient::http`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `.connect().await`"]
pub struct McpClientBuilder {
    name: String,
    endpoint: Endpoint,
    options: Options,
}

impl McpClientBuilder {
    /// Sets an environment variable of a child-process server (it also inherits this
    /// process's environment).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let Endpoint::Stdio { env, .. } = &mut self.endpoint {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// The working directory of a child-process server.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        if let Endpoint::Stdio { cwd, .. } = &mut self.endpoint {
            *cwd = Some(dir.into());
        }
        self
    }

    /// Adds an HTTP header to every request to an HTTP server.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Endpoint::Http { headers, .. } = &mut self.endpoint {
            headers.insert(name.into(), value.into());
        }
        self
    }

    /// Sends `Authorization: Bearer <token>` to an HTTP server.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        if let Endpoint::Http { bearer, .. } = &mut self.endpoint {
            *bearer = Some(token.into());
        }
        self
    }

    /// How long connecting (and the handshake) may take, and each listing of tools
    /// (default 30 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.options.connect_timeout = timeout;
        self
    }

    /// How long one tool call may take (default 60 s); a call past it is cancelled on the
    /// server and answered with an error result.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.options.call_timeout = timeout;
        self
    }

    /// The largest message taken from the server, in bytes (default 8 MiB). Over stdio a larger
    /// message is dropped unread, and the call it answered ends at its timeout; over HTTP the
    /// response is refused.
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.options.max_message_bytes = bytes.max(1024);
        self
    }

    /// The most characters of a tool result shown to the model (default 100 000); longer
    /// results are cut with a visible marker.
    pub fn max_result_chars(mut self, chars: usize) -> Self {
        self.options.max_result_chars = chars;
        self
    }

    /// The most tools taken from the server (default 512); listing more is an error.
    pub fn max_tools(mut self, max: usize) -> Self {
        self.options.max_tools = max;
        self
    }

    /// Names each tool `<server>_<tool>`, so servers with tools of the same name can serve one
    /// agent (default: the server's names, as langchain-mcp-adapters does).
    pub fn prefix_tool_names(mut self, prefix: bool) -> Self {
        self.options.prefix_tool_names = prefix;
        self
    }

    /// How many times a server that crashed (or closed the connection) is started again, on
    /// the next call after the crash (default 3; 0 never). The call that was running when it
    /// crashed is answered with an error either way: its outcome is unknown. A server given
    /// to [`connect_with`](Self::connect_with) is never restarted.
    pub fn max_restarts(mut self, restarts: u32) -> Self {
        self.options.max_restarts = restarts;
        self
    }

    /// Connects over `transport` (an in-process server on a `tokio::io::duplex` pair, a
    /// socket, a transport of your own) with this builder's limits and timeouts, instead of its
    /// endpoint. Over a byte stream the message limit is rmcp's (16 MiB): wrap the stream in
    /// `rmcp::transport::async_rw::AsyncRwTransport::with_max_line_length` for another.
    pub async fn connect_with<T, E, A>(self, transport: T) -> Result<McpClient, McpError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let changes = watch::Sender::new(0u64);
        let conn = open(&self.name, transport, &self.options, None, &changes).await?;
        Ok(McpClient::assemble(
            self.name,
            Endpoint::Given,
            self.options,
            conn,
            changes,
        ))
    }

    /// Starts (or reaches) the server and completes the MCP handshake.
    pub async fn connect(self) -> Result<McpClient, McpError> {
        let changes = watch::Sender::new(0u64);
        let conn = open_endpoint(&self.name, &self.endpoint, &self.options, &changes).await?;
        Ok(McpClient::assemble(
            self.name,
            self.endpoint,
            self.options,
            conn,
            changes,
        ))
    }
}

impl McpClient {
    /// A server run as a child process, spoken to over its stdin and stdout.
    pub fn stdio<I, S>(
        name: impl Into<String>,
        program: impl Into<String>,
        args: I,
    ) -> McpClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        McpClientBuilder {
            name: name.into(),
            endpoint: Endpoint::Stdio {
                program: program.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: Vec::new(),
                cwd: None,
            },
            options: Options::default(),
        }
    }

    /// A server reached over Streamable HTTP at `url` (e.g. `http://127.0.0.1:8000/mcp`).
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> McpClientBuilder {
        McpClientBuilder {
            name: name.into(),
            endpoint: Endpoint::Http {
                url: url.into(),
                headers: HashMap::new(),
                bearer: None,
            },
            options: Options::default(),
        }
    }

    /// A builder with no endpoint: set limits and timeouts, then
    /// [`connect_with`](McpClientBuilder::connect_with) a transport.
    pub fn builder(name: impl Into<String>) -> McpClientBuilder {
        McpClientBuilder {
            name: name.into(),
            endpoint: Endpoint::Given,
            options: Options::default(),
        }
    }

    /// A server over any rmcp transport: an in-process server on a `tokio::io::duplex` pair,
    /// a socket, or a transport of your own. Default limits and timeouts.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::mcp::McpError> {
    /// use kit::mcp::{McpClient, McpServer};
    /// use kit::tool::Tool;
    ///
    /// let ping = Tool::from_fn("ping", "Replies pong.", serde_json::json!({"type": "object"}),
    ///     |_, _| async { Ok::<_, kit::tool::ToolError>("pong") });
    /// let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    /// let _serving = McpServer::new("demo").tool(ping).serve(server_io);
    /// let client = McpClient::connect_with("demo", client_io).await?;
    /// let tools = client.tools().await?;
    /// assert_eq!(tools[0].name(), "ping");
    /// # Ok(()) }
    /// ```
    pub async fn connect_with<T, E, A>(
        name: impl Into<String>,
        transport: T,
    ) -> Result<McpClient, McpError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        McpClient::builder(name).connect_with(transport).await
    }

    fn assemble(
        name: String,
        endpoint: Endpoint,
        options: Options,
        conn: Connection,
        changes: watch::Sender<u64>,
    ) -> McpClient {
        McpClient {
            inner: Arc::new(Inner {
                name,
                options,
                endpoint,
                conn: Mutex::new(Arc::new(conn)),
                restarting: tokio::sync::Mutex::new(()),
                restarts: AtomicU32::new(0),
                closed: AtomicBool::new(false),
                changes,
                cache: tokio::sync::Mutex::new(None),
            }),
        }
    }

    /// The server's name (as given to kit; it names the trace runs of its calls).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// What the server said about itself in the handshake: the protocol version agreed, its
    /// name, version, capabilities and instructions.
    pub fn server_info(&self) -> Option<rmcp::model::ServerPeerInfo> {
        self.inner
            .current()
            .service
            .peer_info()
            .map(|info| (*info).clone())
    }

    /// How many times the server has said its tool list changed
    /// (`notifications/tools/list_changed`).
    pub fn list_changes(&self) -> u64 {
        *self.inner.changes.borrow()
    }

    /// Waits until the server has said its tool list changed more than `seen` times (see
    /// [`list_changes`](Self::list_changes)), at most `timeout`; true when it has.
    pub async fn wait_for_list_change(&self, seen: u64, timeout: Duration) -> bool {
        let mut changes = self.inner.changes.subscribe();
        matches!(
            tokio::time::timeout(timeout, changes.wait_for(|n| *n > seen)).await,
            Ok(Ok(_))
        )
    }

    /// The server's tools as kit tools. Listed once and kept until the server says its list
    /// changed; then listed again.
    pub async fn tools(&self) -> Result<Vec<Tool>, McpError> {
        self.inner.tools().await
    }

    /// The server's tools as a middleware that follows the server's list: each model call sees
    /// the tools the server has now. See [`McpToolset`](super::McpToolset).
    pub async fn toolset(&self) -> Result<super::McpToolset, McpError> {
        super::McpToolset::new(vec![self.clone()]).await
    }

    /// The process id of a child-process server, while it runs.
    pub fn process_id(&self) -> Option<u32> {
        self.inner.current().child.as_ref().and_then(|c| c.id())
    }

    /// How many times the server was started again after a crash.
    pub fn restarts(&self) -> u32 {
        self.inner.restarts.load(Ordering::SeqCst)
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Ends the connection (and stops a child-process server).
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.current().close();
    }
}

impl Inner {
    /// The live connection (or the dead one, until a call restarts it).
    pub(crate) fn current(&self) -> Arc<Connection> {
        match self.conn.lock() {
            Ok(conn) => conn.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Starts the server again in place of `dead`, within `max_restarts`; `Err` says why not.
    async fn restart(&self, dead: &Arc<Connection>) -> Result<Arc<Connection>, String> {
        let _one_at_a_time = self.restarting.lock().await;
        let current = self.current();
        if !Arc::ptr_eq(&current, dead) && !current.dead() {
            return Ok(current);
        }
        if self.closed.load(Ordering::SeqCst) {
            return Err("the client was closed".to_string());
        }
        if matches!(self.endpoint, Endpoint::Given) {
            return Err("kit cannot start it again (it was given as a transport)".to_string());
        }
        let done = self.restarts.load(Ordering::SeqCst);
        if done >= self.options.max_restarts {
            return Err(format!(
                "it was started again {done} times already, the most `max_restarts` allows"
            ));
        }
        self.restarts.fetch_add(1, Ordering::SeqCst);
        tracing::warn!(server = %self.name, "restarting the MCP server after it stopped");
        match open_endpoint(&self.name, &self.endpoint, &self.options, &self.changes).await {
            Ok(conn) => {
                let conn = Arc::new(conn);
                match self.conn.lock() {
                    Ok(mut slot) => *slot = conn.clone(),
                    Err(poisoned) => *poisoned.into_inner() = conn.clone(),
                }
                // The new process may list other tools.
                self.changes.send_modify(|n| *n += 1);
                Ok(conn)
            }
            Err(e) => Err(format!("starting it again failed: {e}")),
        }
    }

    /// The current kit tools, listed again when the server said the list changed.
    pub(crate) async fn tools(self: &Arc<Self>) -> Result<Vec<Tool>, McpError> {
        let remote = self.definitions().await?;
        Ok(to_kit_tools(self, &remote))
    }

    async fn definitions(&self) -> Result<Arc<[rmcp::model::Tool]>, McpError> {
        let mut cache = self.cache.lock().await;
        let generation = *self.changes.borrow();
        if let Some((seen, tools)) = cache.as_ref()
            && *seen == generation
        {
            return Ok(tools.clone());
        }
        let listed = tokio::time::timeout(self.options.connect_timeout, self.list_all()).await;
        let remote: Arc<[rmcp::model::Tool]> = match listed {
            Ok(result) => result?.into(),
            Err(_) => {
                return Err(McpError::Timeout {
                    server: self.name.clone(),
                    method: "tools/list",
                    timeout: self.options.connect_timeout,
                });
            }
        };
        *cache = Some((generation, remote.clone()));
        Ok(remote)
    }

    async fn list_all(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let mut all = Vec::new();
        let mut bytes = 0usize;
        let mut cursor = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let conn = self.current();
            let page = conn.service.list_tools(params).await.map_err(|e| {
                if matches!(
                    e,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                ) {
                    conn.mark_broken();
                }
                McpError::Request {
                    server: self.name.clone(),
                    method: "tools/list",
                    message: crate::text::clip(&e.to_string(), 1000),
                    stderr: conn.tail(),
                }
            })?;
            bytes = page
                .tools
                .iter()
                .fold(bytes, |sum, t| sum.saturating_add(tool_bytes(t)));
            all.extend(page.tools);
            // Every model call sends the list, so the pages together are held to what one
            // message may hold.
            if bytes > self.options.max_message_bytes {
                return Err(McpError::Limit {
                    server: self.name.clone(),
                    message: format!(
                        "its tool list takes more than {} bytes of names, descriptions and \
                         schemas; raise `max_message_bytes` if that is expected",
                        self.options.max_message_bytes
                    ),
                });
            }
            if all.len() > self.options.max_tools {
                return Err(McpError::Limit {
                    server: self.name.clone(),
                    message: format!(
                        "it lists more than {} tools; raise `max_tools` if that is expected",
                        self.options.max_tools
                    ),
                });
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(all),
            }
        }
        Err(McpError::Limit {
            server: self.name.clone(),
            message: format!("its tool list went on for more than {MAX_LIST_PAGES} pages"),
        })
    }

    /// The protocol version agreed with the server.
    pub(crate) fn protocol_version(&self) -> Option<String> {
        self.current()
            .service
            .peer_info()
            .map(|info| info.protocol_version.to_string())
    }

    /// Whether a crashed server would be started again.
    fn may_restart(&self) -> bool {
        !matches!(self.endpoint, Endpoint::Given)
            && !self.closed.load(Ordering::SeqCst)
            && self.restarts.load(Ordering::SeqCst) < self.options.max_restarts
    }

    /// One `tools/call`, with the timeout; `Err` is the text the model sees.
    pub(crate) async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, String> {
        let tool = params.name.to_string();
        let server = &self.name;
        let mut conn = self.current();
        if conn.dead() {
            conn = match self.restart(&conn).await {
                Ok(conn) => conn,
                Err(why) => {
                    return Err(format!(
                        "the MCP server `{server}` is not running (it exited or closed the \
                         connection) and {why}, so `{tool}` cannot be called now; answer \
                         without it, or tell the user the tool is unavailable.{}",
                        conn.tail()
                    ));
                }
            };
        }
        let timeout = self.options.call_timeout;
        match tokio::time::timeout(timeout, conn.service.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(e))) => Err(format!(
                "the MCP server `{server}` refused the call to `{tool}`: {} (JSON-RPC code {}). \
                 Check the tool name and the arguments against its schema, then call it again.",
                crate::text::clip(&e.message, 1000),
                e.code.0
            )),
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                conn.mark_broken();
                let next = if self.may_restart() {
                    "kit starts the server again for the next call, so you may check and retry"
                } else {
                    "answer without the tool or tell the user it is unavailable"
                };
                Err(format!(
                    "the MCP server `{server}` closed the connection during the call to \
                     `{tool}` (it may have crashed); the call's outcome is unknown. Do not \
                     assume it took effect; {next}.{}",
                    conn.tail()
                ))
            }
            Ok(Err(e)) => Err(format!(
                "the MCP server `{server}` failed the call to `{tool}`: {}",
                crate::text::clip(&e.to_string(), 1000)
            )),
            Err(_) => Err(format!(
                "the MCP server `{server}` did not answer the call to `{tool}` within {timeout:?} \
                 (or its answer was over the client's {} byte message limit); the call was \
                 cancelled. Try again with a smaller request, or do without this tool.",
                self.options.max_message_bytes
            )),
        }
    }
}

/// About the bytes of a listed tool: its name, description and input schema.
fn tool_bytes(tool: &rmcp::model::Tool) -> usize {
    let schema: usize = tool
        .input_schema
        .iter()
        .map(|(k, v)| k.len().saturating_add(crate::json::approx_len(v)))
        .fold(0, usize::saturating_add);
    tool.name
        .len()
        .saturating_add(tool.description.as_deref().map_or(0, str::len))
        .saturating_add(schema)
}
