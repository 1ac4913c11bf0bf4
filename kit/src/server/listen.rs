//! The worker's listener: connections accepted within a limit, and closed when they stall or
//! idle.
//!
//! * **Connection limit.** At most [`WorkerConfig::max_connections`] connections are served at
//!   once; one more is answered `503` with `Connection: close` at once and closed, so a flood
//!   of idle sockets costs the worker bounded memory and file descriptors and clients get an
//!   answer instead of a hang.
//! * **Header read timeout.** A request's head must arrive within
//!   [`WorkerConfig::header_read_timeout`] of the connection being ready for it — after it
//!   opens, or after the previous response on a kept-alive connection — else the connection
//!   is closed (slow-header attacks, and the idle time between requests).
//! * **Idle timeout.** A connection on which no byte moves either way for
//!   [`WorkerConfig::idle_timeout`] is shut down gracefully (a request in progress still gets
//!   its answer); one still stuck after twice that (a client that never reads its answer) is
//!   dropped.
//! * The body read timeout and the early refusal of an oversize `Content-Length` are request
//!   middleware (see `body.rs`).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use super::{ServerError, WorkerConfig};

/// The answer to a connection over the limit.
fn overloaded() -> Vec<u8> {
    let body = "{\"error\":\"overloaded\",\"message\":\"the worker serves its maximum number of \
                connections; retry shortly, or raise the worker's max_connections\"}";
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: \
         close\r\nretry-after: 1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves `app` on `listener` until `stop` turns true, then lets the connections finish.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    config: &WorkerConfig,
    mut stop: watch::Receiver<bool>,
) -> Result<(), ServerError> {
    let permits = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let (close_tx, close_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let timeouts = Timeouts {
        header: config.header_read_timeout,
        idle: config.idle_timeout,
    };
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
                        tracing::warn!(error = %e, "the worker could not accept a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                match permits.clone().try_acquire_owned() {
                    Ok(permit) => {
                        connections.spawn(connection(
                            stream,
                            app.clone(),
                            timeouts,
                            close_rx.clone(),
                            permit,
                        ));
                    }
                    Err(_) => {
                        tracing::debug!("connection refused: max_connections reached");
                        connections.spawn(refuse(stream));
                    }
                }
                while connections.try_join_next().is_some() {}
            }
        }
    }
    let _ = close_tx.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

#[derive(Clone, Copy)]
struct Timeouts {
    header: Duration,
    idle: Duration,
}

/// Answers 503 and closes (bounded: a client that does not read is dropped after a second).
async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&overloaded()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Serves one connection with the header read and idle timeouts.
async fn connection(
    stream: TcpStream,
    app: Router,
    timeouts: Timeouts,
    mut close: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
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
        .header_read_timeout(timeouts.header)
        .keep_alive(true);
    let conn = builder.serve_connection(io, TowerToHyperService::new(app));
    tokio::pin!(conn);
    let idle = timeouts.idle.max(Duration::from_millis(10));
    let mut tick = tokio::time::interval((idle / 4).max(Duration::from_millis(10)));
    let mut shutting_down = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::trace!(error = %e, "worker connection ended with an error");
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
                    tracing::debug!(?quiet, "dropping a stuck worker connection (idle_timeout)");
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
