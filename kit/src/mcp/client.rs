//! A connection to one MCP server, and its tools as kit tools.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, ProtocolVersion, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceError};

use super::McpError;
use super::error::StderrTail;
use super::tools::to_kit_tool;
use super::transport::{ChildServer, Endpoint};
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
        }
    }
}

/// The most pages of `tools/list` read (a server that always sends a next cursor stops here).
const MAX_LIST_PAGES: usize = 64;

/// A connection to one MCP server. Cheap to clone; the connection (and a child-process
/// server) ends when the last clone is dropped, or at [`close`](Self::close).
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
    service: RunningService<RoleClient, Handler>,
    changes: tokio::sync::watch::Sender<u64>,
    child: Option<ChildServer>,
    cache: tokio::sync::Mutex<Option<(u64, Arc<[Tool]>)>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            child.kill();
        }
    }
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

    /// Connects over `transport` (an in-process server on a `tokio::io::duplex` pair, a
    /// socket, a transport of your own) with this builder's limits and timeouts, instead of its
    /// endpoint. Over a byte stream the message limit is rmcp's (16 MiB): wrap the stream in
    /// `rmcp::transport::async_rw::AsyncRwTransport::with_max_line_length` for another.
    pub async fn connect_with<T, E, A>(self, transport: T) -> Result<McpClient, McpError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        McpClient::start(self.name, transport, self.options, None).await
    }

    /// Starts (or reaches) the server and completes the MCP handshake.
    pub async fn connect(self) -> Result<McpClient, McpError> {
        let McpClientBuilder {
            name,
            endpoint,
            options,
        } = self;
        match endpoint {
            Endpoint::Given => Err(McpError::Connect {
                server: name,
                message: "no server was named: start from `McpClient::stdio` or \
                          `McpClient::http`, or pass the transport to `connect_with`"
                    .to_string(),
                stderr: StderrTail::default(),
            }),
            Endpoint::Stdio {
                program,
                args,
                env,
                cwd,
            } => {
                let (child, stdout, stdin) =
                    ChildServer::spawn(&name, &program, &args, &env, cwd.as_ref())?;
                let transport = AsyncRwTransport::new_client(stdout, stdin)
                    .with_max_line_length(options.max_message_bytes);
                McpClient::start(name, transport, options, Some(child)).await
            }
            Endpoint::Http {
                url,
                headers,
                bearer,
            } => {
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    let header = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                        .ok()
                        .zip(reqwest::header::HeaderValue::from_str(&v).ok());
                    match header {
                        Some((k, v)) => {
                            custom.insert(k, v);
                        }
                        None => {
                            return Err(McpError::Connect {
                                server: name,
                                message: format!(
                                    "the header `{k}` is not a valid HTTP header name and value"
                                ),
                                stderr: StderrTail::default(),
                            });
                        }
                    }
                }
                let mut config = StreamableHttpClientTransportConfig::with_uri(url)
                    .max_sse_event_size(options.max_message_bytes)
                    .max_json_response_size(options.max_message_bytes)
                    .custom_headers(custom);
                if let Some(token) = bearer {
                    config = config.auth_header(token);
                }
                let transport = StreamableHttpClientTransport::from_config(config);
                McpClient::start(name, transport, options, None).await
            }
        }
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
    /// // The server answers the handshake as the client makes it: run both at once.
    /// let (serving, client) = tokio::join!(
    ///     McpServer::new("demo").tool(ping).serve(server_io),
    ///     McpClient::connect_with("demo", client_io),
    /// );
    /// let (_serving, client) = (serving?, client?);
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
        McpClient::start(name.into(), transport, Options::default(), None).await
    }

    async fn start<T, E, A>(
        name: String,
        transport: T,
        options: Options,
        child: Option<ChildServer>,
    ) -> Result<McpClient, McpError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let changes = tokio::sync::watch::Sender::new(0u64);
        let handler = Handler {
            changes: changes.clone(),
        };
        // The stateless 2026-07-28 revision first (`server/discover`); the `initialize`
        // handshake of 2025-11-25 and older when the server does not know it.
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        };
        let started = tokio::time::timeout(
            options.connect_timeout,
            handler.serve_with_lifecycle(transport, lifecycle),
        )
        .await;
        let tail = || child.as_ref().map(ChildServer::tail).unwrap_or_default();
        let service = match started {
            Ok(Ok(service)) => service,
            Ok(Err(e)) => {
                return Err(McpError::Connect {
                    server: name,
                    message: e.to_string(),
                    stderr: tail(),
                });
            }
            Err(_) => {
                return Err(McpError::Timeout {
                    server: name,
                    method: "initialize",
                    timeout: options.connect_timeout,
                });
            }
        };
        // Subscribed before `connect` returns, so no change after it goes unseen.
        let subscribed = tokio::time::timeout(
            options.connect_timeout,
            listen_for_list_changes(&service, &changes),
        )
        .await;
        if subscribed.is_err() {
            tracing::debug!(server = %name, "the MCP server did not acknowledge a tool-list subscription");
        }
        Ok(McpClient {
            inner: Arc::new(Inner {
                name,
                options,
                service,
                changes,
                child,
                cache: tokio::sync::Mutex::new(None),
            }),
        })
    }

    /// The server's name (as given to kit; it names the trace runs of its calls).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// What the server said about itself in the handshake: the protocol version agreed, its
    /// name, version, capabilities and instructions.
    pub fn server_info(&self) -> Option<rmcp::model::ServerPeerInfo> {
        self.inner.service.peer_info().map(|info| (*info).clone())
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
        Ok(self.inner.tools().await?.to_vec())
    }

    /// The server's tools as a middleware that follows the server's list: each model call sees
    /// the tools the server has now. See [`McpToolset`](super::McpToolset).
    pub async fn toolset(&self) -> Result<super::McpToolset, McpError> {
        super::McpToolset::new(vec![self.clone()]).await
    }

    /// The process id of a child-process server, while it runs.
    pub fn process_id(&self) -> Option<u32> {
        self.inner.child.as_ref().and_then(ChildServer::id)
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Ends the connection (and stops a child-process server).
    pub async fn close(&self) {
        self.inner.service.cancellation_token().cancel();
        if let Some(child) = &self.inner.child {
            child.kill();
        }
    }
}

impl Inner {
    /// The current kit tools, listed again when the server said the list changed.
    pub(crate) async fn tools(self: &Arc<Self>) -> Result<Arc<[Tool]>, McpError> {
        let mut cache = self.cache.lock().await;
        let generation = *self.changes.borrow();
        if let Some((seen, tools)) = cache.as_ref()
            && *seen == generation
        {
            return Ok(tools.clone());
        }
        let listed = tokio::time::timeout(self.options.connect_timeout, self.list_all()).await;
        let remote = match listed {
            Ok(result) => result?,
            Err(_) => {
                return Err(McpError::Timeout {
                    server: self.name.clone(),
                    method: "tools/list",
                    timeout: self.options.connect_timeout,
                });
            }
        };
        let tools: Arc<[Tool]> = remote.iter().map(|t| to_kit_tool(self, t)).collect();
        *cache = Some((generation, tools.clone()));
        Ok(tools)
    }

    async fn list_all(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let mut all = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_LIST_PAGES {
            let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let page = self
                .service
                .list_tools(params)
                .await
                .map_err(|e| McpError::Request {
                    server: self.name.clone(),
                    method: "tools/list",
                    message: e.to_string(),
                    stderr: self.tail(),
                })?;
            all.extend(page.tools);
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
        self.service
            .peer_info()
            .map(|info| info.protocol_version.to_string())
    }

    fn tail(&self) -> StderrTail {
        self.child
            .as_ref()
            .map(ChildServer::tail)
            .unwrap_or_default()
    }

    /// One `tools/call`, with the timeout; `Err` is the text the model sees.
    pub(crate) async fn call_tool(
        &self,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, String> {
        let tool = params.name.to_string();
        let server = &self.name;
        if self.service.is_closed() || self.child.as_ref().is_some_and(ChildServer::exited) {
            return Err(format!(
                "the MCP server `{server}` is not running (it exited or closed the connection), \
                 so `{tool}` cannot be called now; answer without it, or tell the user the \
                 tool is unavailable.{}",
                self.tail()
            ));
        }
        let timeout = self.options.call_timeout;
        match tokio::time::timeout(timeout, self.service.call_tool(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(e))) => Err(format!(
                "the MCP server `{server}` refused the call to `{tool}`: {} (JSON-RPC code {}). \
                 Check the tool name and the arguments against its schema, then call it again.",
                crate::text::clip(&e.message, 1000),
                e.code.0
            )),
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                Err(format!(
                    "the MCP server `{server}` closed the connection during the call to \
                     `{tool}` (it may have crashed); the call's outcome is unknown. Do not \
                     assume it took effect; answer without the tool or tell the user it is \
                     unavailable.{}",
                    self.tail()
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

/// On a 2026-07-28 connection a server sends `notifications/tools/list_changed` only to a
/// `subscriptions/listen` subscription: open one when the server says its list can change,
/// and count what arrives on it. (Older servers send the notice unasked, to [`Handler`].)
async fn listen_for_list_changes(
    service: &RunningService<RoleClient, Handler>,
    changes: &tokio::sync::watch::Sender<u64>,
) {
    let Some(info) = service.peer_info() else {
        return;
    };
    let list_changes = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|t| t.list_changed)
        .unwrap_or(false);
    if info.protocol_version.has_initialize() || !list_changes {
        return;
    }
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = match service.peer().listen(filter).await {
        Ok(subscription) => subscription,
        Err(e) => {
            tracing::debug!(error = %e, "the MCP server refused a tool-list subscription");
            return;
        }
    };
    let changes = changes.clone();
    tokio::spawn(async move {
        while let Ok(Some(notification)) = subscription.next().await {
            if matches!(
                notification,
                ServerNotification::ToolListChangedNotification(_)
            ) {
                changes.send_modify(|n| *n += 1);
            }
        }
    });
}

/// The client side of the connection: counts the server's tool-list changes.
#[derive(Clone)]
struct Handler {
    changes: tokio::sync::watch::Sender<u64>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changes.send_modify(|n| *n += 1);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("kit", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}
