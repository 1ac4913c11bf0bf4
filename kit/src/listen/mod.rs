//! kit's HTTP listener, shared by the worker server and the MCP server: connections accepted
//! within a limit, and closed when they stall or idle.
//!
//! * **Connection limit.** At most [`Limits::max_connections`] connections are served at
//!   once; one more is answered `503` with `Connection: close` at once and closed, so a flood
//!   of idle sockets costs bounded memory and file descriptors and clients get an answer
//!   instead of a hang.
//! * **Header read timeout.** A request's head must arrive within
//!   [`Limits::header_read_timeout`] of the connection being ready for it — after it opens, or
//!   after the previous response on a kept-alive connection — else the connection is closed
//!   (slow-header attacks, and the idle time between requests).
//! * **Idle timeout.** A connection on which no byte moves either way for
//!   [`Limits::idle_timeout`] is shut down gracefully (a request in progress still gets its
//!   answer); one still stuck after twice that (a client that never reads its answer) is
//!   dropped.
//! * **Body read timeout.** With [`Limits::body_read_timeout`], a request body must arrive
//!   whole within it (see [`body`]): a client trickling a byte now and then cannot hold a
//!   connection. The worker reads bodies in its own middleware instead (`server/body.rs`,
//!   which also refuses an oversize `Content-Length` unread).

#[cfg(feature = "mcp")]
mod body;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::service::HttpService;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

#[cfg(feature = "mcp")]
pub(crate) use body::WithBodyDeadline;

/// What a listener allows its peers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Connections served at once.
    pub(crate) max_connections: usize,
    /// How long a request's head may take to arrive.
    pub(crate) header_read_timeout: Duration,
    /// How long a connection may move no byte either way.
    pub(crate) idle_timeout: Duration,
    /// The JSON body of the `503` answered to a connection over the limit.
    pub(crate) overloaded: &'static str,
}

/// The answer to a connection over the limit.
fn overloaded(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: \
         close\r\nretry-after: 1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves `service` on `listener` until `stop` turns true, then lets the open connections
/// finish (within `drain`, when given; the rest are dropped).
pub(crate) async fn serve<S>(
    listener: TcpListener,
    service: S,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
    drain: Option<Duration>,
) where
    S: HttpService<Incoming> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::ResBody: Send + 'static,
    <S::ResBody as hyper::body::Body>::Data: Send,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (close_tx, close_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            changed = stop.changed() => {
                let stopping = changed.is_err() || *stop.borrow_and_update();
                if stopping {
                    break;
                }
            }
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of file descriptors, or a connection reset before it was
                        // accepted: wait a little rather than spin.
                        tracing::warn!(error = %e, "kit's listener could not accept a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                match permits.clone().try_acquire_owned() {
                    Ok(permit) => {
                        connections.spawn(connection(
                            stream,
                            service.clone(),
                            limits,
                            close_rx.clone(),
                            permit,
                        ));
                    }
                    Err(_) => {
                        tracing::debug!("connection refused: max_connections reached");
                        connections.spawn(refuse(stream, limits.overloaded));
                    }
                }
                while connections.try_join_next().is_some() {}
            }
        }
    }
    let _ = close_tx.send(true);
    let drained = async { while connections.join_next().await.is_some() {} };
    match drain {
        None => drained.await,
        Some(limit) => {
            let _ = tokio::time::timeout(limit, drained).await;
            connections.abort_all();
        }
    }
}

/// Answers 503 and closes (bounded: a client that does not read is dropped after a second).
async fn refuse(mut stream: TcpStream, body: &str) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&overloaded(body)).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Serves one connection with the header read and idle timeouts.
async fn connection<S>(
    stream: TcpStream,
    service: S,
    limits: Limits,
    mut close: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) where
    S: HttpService<Incoming>,
    S::ResBody: Send + 'static,
    <S::ResBody as hyper::body::Body>::Data: Send,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let _ = stream.set_nodelay(true);
    let started = Instant::now();
    let activity = Arc::new(AtomicU64::new(0));
    let io = TokioIo::new(Watched {
        inner: stream,
        started,
        activity: activity.clone(),
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let idle = limits.idle_timeout.max(Duration::from_millis(10));
    let mut tick = tokio::time::interval((idle / 4).max(Duration::from_millis(10)));
    let mut shutting_down = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::trace!(error = %e, "a connection ended with an error");
                }
                break;
            }
            changed = close.changed(), if !shutting_down => {
                let closing = changed.is_err() || *close.borrow_and_update();
                if closing {
                    shutting_down = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
            _ = tick.tick() => {
                let last = Duration::from_millis(activity.load(Ordering::Relaxed));
                let quiet = started.elapsed().saturating_sub(last);
                if quiet >= idle.saturating_mul(2) {
                    tracing::debug!(?quiet, "dropping a stuck connection (idle_timeout)");
                    break;
                }
                if quiet >= idle && !shutting_down {
                    shutting_down = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// A stream that notes when bytes last moved.
struct Watched {
    inner: TcpStream,
    started: Instant,
    /// Milliseconds after `started` of the last read or write.
    activity: Arc<AtomicU64>,
}

impl Watched {
    fn touch(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.activity.store(ms, Ordering::Relaxed);
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.touch();
        }
        poll
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
