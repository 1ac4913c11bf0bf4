//! An [`McpServer`] over Streamable HTTP: rmcp's HTTP service, served by hyper within limits.
//!
//! * **Stateless.** Each POST is answered on its own (JSON when it can be); no session is kept
//!   between requests, so a flood of clients costs no memory once they are answered.
//! * **Connection limit.** At most [`McpHttpConfig::max_connections`] connections are served at
//!   once; one more is closed at once.
//! * **Header read timeout.** A request's head must arrive within
//!   [`McpHttpConfig::header_read_timeout`] (slow-header attacks).
//! * **Body limit.** A POST body over [`McpHttpConfig::max_body_bytes`] is answered `413`.
//! * **Hosts.** Only `Host` headers in [`McpHttpConfig::allowed_hosts`] are served (loopback by
//!   default), against DNS rebinding; list your public hostname to serve beyond loopback.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::{McpError, McpServer};

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
        let service = self.http_service(&config);
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, service, config, stopped));
        Ok(McpHttpServer {
            addr,
            url: format!("http://{addr}/mcp"),
            stop,
            task: Some(task),
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    service: StreamableHttpService<super::McpHandler, LocalSessionManager>,
    config: McpHttpConfig,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow_and_update() {
                    break;
                }
            }
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %e, "the MCP server could not accept a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    tracing::debug!("MCP connection refused: max_connections reached");
                    drop(stream);
                    continue;
                };
                let service = service.clone();
                let header_timeout = config.header_read_timeout;
                let mut stop = stop.clone();
                connections.spawn(async move {
                    let _permit = permit;
                    let _ = stream.set_nodelay(true);
                    let mut builder = hyper::server::conn::http1::Builder::new();
                    builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
                    let conn = builder.serve_connection(
                        TokioIo::new(stream),
                        TowerToHyperService::new(service),
                    );
                    tokio::pin!(conn);
                    tokio::select! {
                        result = conn.as_mut() => {
                            if let Err(e) = result {
                                tracing::trace!(error = %e, "MCP connection ended with an error");
                            }
                        }
                        _ = async { let _ = stop.wait_for(|s| *s).await; } => {
                            conn.as_mut().graceful_shutdown();
                            let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
                        }
                    }
                });
                while connections.try_join_next().is_some() {}
            }
        }
    }
    let drained = async { while connections.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(Duration::from_secs(6), drained).await;
    connections.abort_all();
}
