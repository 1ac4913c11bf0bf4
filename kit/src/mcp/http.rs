//! An [`McpServer`] over Streamable HTTP: rmcp's HTTP service, served by hyper within limits.
//!
//! * **Stateless.** Each POST is answered on its own (JSON when it can be); no session is kept
//!   between requests, so a flood of clients costs no memory once they are answered.
//! * **Served by kit's listener**, the worker server's too: at most
//!   [`McpHttpConfig::max_connections`] connections at once (one more is answered `503` and
//!   closed); a request's head must arrive within [`McpHttpConfig::header_read_timeout`]
//!   (slow-header attacks) and its body within [`McpHttpConfig::body_read_timeout`] (a client
//!   trickling bytes); a connection on which nothing moves for
//!   [`McpHttpConfig::idle_timeout`] is closed.
//! * **Body limit.** A POST body over [`McpHttpConfig::max_body_bytes`] is answered `413`.
//! * **Hosts.** Only `Host` headers in [`McpHttpConfig::allowed_hosts`] are served (loopback by
//!   default), against DNS rebinding; list your public hostname to serve beyond loopback.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::service::TowerToHyperService;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::{McpError, McpServer};
use crate::listen::{Limits, WithBodyDeadline, serve};

/// The limits of [`McpServer::serve_http`]. Start from the defaults and change what you need:
///
/// ```
/// let mut config = kit::mcp::McpHttpConfig::default();
/// config.allowed_hosts.push("mcp.example.com".into()); // served beyond loopback
/// config.max_connections = 64;
/// assert_eq!(config.max_body_bytes, 4 * 1024 * 1024);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct McpHttpConfig {
    /// Connections served at once (default 256).
    pub max_connections: usize,
    /// How long a request's head may take to arrive (default 10 s).
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive, from its head (default 30 s).
    pub body_read_timeout: Duration,
    /// How long a connection may move no byte either way before it is closed (default 60 s).
    pub idle_timeout: Duration,
    /// The largest request body, in bytes (default 4 MiB).
    pub max_body_bytes: usize,
    /// The `Host` values served (default: `localhost`, `127.0.0.1`, `::1`).
    pub allowed_hosts: Vec<String>,
}

impl Default for McpHttpConfig {
    fn default() -> Self {
        McpHttpConfig {
            max_connections: 256,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_body_bytes: 4 * 1024 * 1024,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
        }
    }
}

/// A running Streamable HTTP server: [`shutdown`](Self::shutdown) stops it; dropping it does
/// too.
#[derive(Debug)]
pub struct McpHttpServer {
    addr: SocketAddr,
    url: String,
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl McpHttpServer {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL clients connect to (`http://<addr>/mcp`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stops accepting connections and waits for the open ones to close.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for McpHttpServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

impl McpServer {
    /// rmcp's Streamable HTTP service for this server (a tower service), to mount in a router
    /// of your own; [`serve_http`](Self::serve_http) serves it with kit's connection limits.
    pub fn http_service(
        self,
        config: &McpHttpConfig,
    ) -> StreamableHttpService<super::McpHandler, LocalSessionManager> {
        let handler = self.handler();
        let mut http = StreamableHttpServerConfig::default()
            .with_max_request_body_bytes(config.max_body_bytes);
        http.legacy_session_mode = false;
        http.json_response = true;
        http.allowed_hosts.clone_from(&config.allowed_hosts);
        StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            http,
        )
    }

    /// Serves over Streamable HTTP on `listener`, at the path `/mcp` (any path is served), in
    /// the background.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use kit::mcp::{McpClient, McpHttpConfig, McpServer};
    ///
    /// let ping = kit::tool::Tool::from_fn("ping", "Replies pong.", serde_json::json!({"type": "object"}),
    ///     |_, _| async { Ok::<_, kit::tool::ToolError>("pong") });
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = McpServer::new("demo").tool(ping).serve_http(listener, McpHttpConfig::default())?;
    /// let client = McpClient::http("demo", server.url()).connect().await?;
    /// assert_eq!(client.tools().await?.len(), 1);
    /// server.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn serve_http(
        self,
        listener: TcpListener,
        config: McpHttpConfig,
    ) -> Result<McpHttpServer, McpError> {
        let addr = listener
            .local_addr()
            .map_err(|e| McpError::Serve(format!("the listener has no address: {e}")))?;
        let service = WithBodyDeadline {
            inner: TowerToHyperService::new(self.http_service(&config)),
            timeout: config.body_read_timeout,
        };
        let limits = Limits {
            max_connections: config.max_connections,
            header_read_timeout: config.header_read_timeout,
            idle_timeout: config.idle_timeout,
            overloaded: "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32000,\"message\":\
                         \"the MCP server serves its maximum number of connections; retry \
                         shortly\"}}",
        };
        let (stop, stopped) = watch::channel(false);
        // Open connections get 6 seconds to finish once the server stops.
        let drain = Some(Duration::from_secs(6));
        let task = tokio::spawn(serve(listener, service, limits, stopped, drain));
        Ok(McpHttpServer {
            addr,
            url: format!("http://{addr}/mcp"),
            stop,
            task: Some(task),
        })
    }
}
