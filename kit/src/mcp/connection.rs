//! One live connection to a server: the handshake, the child process behind it, and the
//! tool-list notices it brings.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProtocolVersion, ServerNotification,
    SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient};
use tokio::sync::watch;

use super::McpError;
use super::client::Options;
use super::error::StderrTail;
use super::transport::{ChildServer, Endpoint};

/// A handshake done: the rmcp service, and the child process when the server is one.
pub(crate) struct Connection {
    pub(crate) service: RunningService<RoleClient, Handler>,
    pub(crate) child: Option<ChildServer>,
    /// Set when a request found the connection closed, before rmcp's service has noticed.
    broken: AtomicBool,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            child.kill();
        }
    }
}

impl Connection {
    /// Whether the connection is gone: closed, or its process exited.
    pub(crate) fn dead(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
            || self.service.is_closed()
            || self.child.as_ref().is_some_and(ChildServer::exited)
    }

    /// Marks the connection dead: a request found it closed.
    pub(crate) fn mark_broken(&self) {
        self.broken.store(true, Ordering::SeqCst);
    }

    /// The end of a child's stderr (empty for other servers).
    pub(crate) fn tail(&self) -> StderrTail {
        self.child
            .as_ref()
            .map(ChildServer::tail)
            .unwrap_or_default()
    }

    /// Closes the connection and stops a child process.
    pub(crate) fn close(&self) {
        self.service.cancellation_token().cancel();
        if let Some(child) = &self.child {
            child.kill();
        }
    }
}

/// Starts (or reaches) the server at `endpoint` and completes the handshake.
pub(crate) async fn open_endpoint(
    name: &str,
    endpoint: &Endpoint,
    options: &Options,
    changes: &watch::Sender<u64>,
) -> Result<Connection, McpError> {
    match endpoint {
        Endpoint::Given => Err(McpError::Connect {
            server: name.to_string(),
            message: "no server was named: start from `McpClient::stdio` or `McpClient::http`, \
                      or pass the transport to `connect_with`"
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
                ChildServer::spawn(name, program, args, env, cwd.as_ref())?;
            let transport = AsyncRwTransport::new_client(stdout, stdin)
                .with_max_line_length(options.max_message_bytes);
            open(name, transport, options, Some(child), changes).await
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
                    .zip(reqwest::header::HeaderValue::from_str(v).ok());
                let Some((k, v)) = header else {
                    return Err(McpError::Connect {
                        server: name.to_string(),
                        message: format!(
                            "the header `{k}` is not a valid HTTP header name and value"
                        ),
                        stderr: StderrTail::default(),
                    });
                };
                custom.insert(k, v);
            }
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone())
                .max_sse_event_size(options.max_message_bytes)
                .max_json_response_size(options.max_message_bytes)
                .custom_headers(custom);
            if let Some(token) = bearer {
                config = config.auth_header(token.clone());
            }
            let transport = StreamableHttpClientTransport::from_config(config);
            open(name, transport, options, None, changes).await
        }
    }
}

/// Completes the handshake over `transport`.
pub(crate) async fn open<T, E, A>(
    name: &str,
    transport: T,
    options: &Options,
    child: Option<ChildServer>,
    changes: &watch::Sender<u64>,
) -> Result<Connection, McpError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let handler = Handler {
        changes: changes.clone(),
    };
    // The stateless 2026-07-28 revision first (`server/discover`); the `initialize` handshake
    // of 2025-11-25 and older when the server does not know it.
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
                server: name.to_string(),
                message: crate::text::clip(&e.to_string(), 1000),
                stderr: tail(),
            });
        }
        Err(_) => {
            return Err(McpError::Timeout {
                server: name.to_string(),
                method: "initialize",
                timeout: options.connect_timeout,
            });
        }
    };
    // Subscribed before `connect` returns, so no change after it goes unseen.
    let subscribed = tokio::time::timeout(
        options.connect_timeout,
        listen_for_list_changes(&service, changes),
    )
    .await;
    if subscribed.is_err() {
        tracing::debug!(server = %name, "the MCP server did not acknowledge a tool-list subscription");
    }
    Ok(Connection {
        service,
        child,
        broken: AtomicBool::new(false),
    })
}

/// On a 2026-07-28 connection a server sends `notifications/tools/list_changed` only to a
/// `subscriptions/listen` subscription: open one when the server says its list can change,
/// and count what arrives on it. (Older servers send the notice unasked, to [`Handler`].)
async fn listen_for_list_changes(
    service: &RunningService<RoleClient, Handler>,
    changes: &watch::Sender<u64>,
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

/// The client side of a connection: counts the server's tool-list changes.
#[derive(Clone)]
pub(crate) struct Handler {
    changes: watch::Sender<u64>,
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
