//! The queued HTTP exporter: see [`QueuedExporter`].

mod config;
mod error;
mod worker;
pub use config::{BatchEncoder, QueueConfig};
pub use error::ExportError;
use worker::Worker;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::sync::mpsc;

use super::exporter::{Exporter, ExporterStats};
use super::record::RunRecord;

/// Counters of a [`QueuedExporter`], with what it last failed on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueStats {
    /// Runs queued, exported, dropped (queue full or exporter shut down) and failed.
    pub runs: ExporterStats,
    /// HTTP requests made (every attempt counts).
    pub requests: u64,
    /// Retries made (requests beyond the first attempt of a batch).
    pub retries: u64,
    /// Batches delivered. A batch refused as too large (413) is split in halves, and each
    /// part counts as a batch of its own.
    pub batches_ok: u64,
    /// Batches given up on (parts of a split batch count separately).
    pub batches_failed: u64,
    /// Runs too large for the queue that were trimmed to fit: their longest strings cut (or,
    /// failing that, their inputs and outputs left out), marked with the metadata key
    /// `kit.truncated_from_bytes`.
    pub trimmed: u64,
    /// The last error, if any.
    pub last_error: Option<ExportError>,
}

#[derive(Default)]
struct Shared {
    /// Bytes of the runs in the queue (see [`RunRecord::approx_bytes`]).
    queued_bytes: std::sync::atomic::AtomicUsize,
    queued: AtomicU64,
    exported: AtomicU64,
    dropped: AtomicU64,
    trimmed: AtomicU64,
    failed: AtomicU64,
    requests: AtomicU64,
    retries: AtomicU64,
    batches_ok: AtomicU64,
    batches_failed: AtomicU64,
    last_error: Mutex<Option<ExportError>>,
}

impl Shared {
    fn runs(&self) -> ExporterStats {
        ExporterStats {
            queued: self.queued.load(Ordering::Relaxed),
            exported: self.exported.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }

    fn set_error(&self, e: ExportError) {
        let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
        if last.as_ref() != Some(&e) {
            tracing::warn!(target: "kit", error = %e, "kit: trace export failed");
        }
        *last = Some(e);
    }
}

/// A queued run and its [`RunRecord::approx_bytes`].
type Queued = (Box<RunRecord>, usize);

enum Control {
    Flush(std::sync::mpsc::SyncSender<bool>),
    Shutdown(Instant),
}

/// A bounded queue of runs in front of a background worker that batches them, encodes them
/// (OTLP protobuf or JSON, or any [`BatchEncoder`]), gzips them and POSTs them with bounded
/// retries. `kit::trace::otlp::OtlpExporter` (feature `otlp`) is the usual way to get one.
///
/// The caller never waits: [`Exporter::export`] is a `try_send` into a bounded queue, and a run
/// that does not fit is dropped and counted. The worker runs on its own thread with its own
/// small tokio runtime, so it works the same inside or outside the caller's runtime, and a busy
/// or blocked caller runtime cannot stall it. Every failure — refused connection, timeout, 4xx,
/// 5xx after retries — is swallowed and counted in [`QueueStats`]; the user's run is never
/// affected.
///
/// | setting | default |
/// |---|---|
/// | queue capacity | 2,048 runs, or 64 MiB of their text (estimated), whichever is reached first |
/// | batch | 512 runs or 4 MiB (uncompressed), whichever comes first |
/// | batch delay | 2 s after the first run of a batch |
/// | request timeout | 10 s |
/// | retries | 5, on 429/502/503/504, timeouts and connection failures |
/// | backoff | exponential from 500 ms to 30 s, with jitter; `Retry-After` honoured |
/// | compression | gzip |
/// | shutdown drain | 5 s |
///
/// A program that ends should call [`flush`](Exporter::flush) (or `kit::trace::flush` for the
/// global tracer) first: the global tracer lives in a static and is never dropped.
///
/// ```
/// use kit::trace::{BatchEncoder, Exporter, QueueConfig, QueuedExporter, RunRecord};
///
/// struct JsonArray;
/// impl BatchEncoder for JsonArray {
///     fn content_type(&self) -> &str { "application/json" }
///     fn encode(&self, runs: &[RunRecord]) -> Result<Vec<u8>, String> {
///         serde_json::to_vec(runs).map_err(|e| e.to_string())
///     }
/// }
///
/// // Nothing listens on port 9: export still returns at once, and the failure is counted.
/// let exporter = QueuedExporter::new(
///     "http://127.0.0.1:9/ingest",
///     [("x-api-key", "k")],
///     JsonArray,
///     QueueConfig { max_retries: 0, ..Default::default() },
/// )?;
/// assert_eq!(exporter.stats().queued, 0);
/// # Ok::<(), kit::trace::ExportError>(())
/// ```
pub struct QueuedExporter {
    tx: mpsc::Sender<Queued>,
    ctrl: mpsc::UnboundedSender<Control>,
    shared: Arc<Shared>,
    done: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    url: String,
    shutdown_timeout: Duration,
    max_queued_bytes: usize,
}

impl std::fmt::Debug for QueuedExporter {
    /// Shows the URL and counters, never the headers (they hold credentials).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuedExporter")
            .field("url", &crate::http::redact_url_text(&self.url))
            .field("stats", &self.shared.runs())
            .finish_non_exhaustive()
    }
}

/// Checks that `url` is an absolute `http(s)` URL.
pub(crate) fn parse_url(url: &str) -> Result<reqwest::Url, ExportError> {
    let invalid = |reason: String| ExportError::InvalidEndpoint {
        endpoint: crate::http::redact_url_text(url),
        reason,
    };
    let parsed = reqwest::Url::parse(url.trim()).map_err(|e| invalid(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "scheme `{}` is not http or https",
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host".into()));
    }
    Ok(parsed)
}

impl QueuedExporter {
    /// An exporter POSTing to `url` with these extra headers (e.g. `Authorization`).
    ///
    /// Errors when the URL or a header is invalid, or the worker cannot start; once built it
    /// never fails the caller.
    pub fn new<K, V>(
        url: &str,
        headers: impl IntoIterator<Item = (K, V)>,
        encoder: impl BatchEncoder,
        config: QueueConfig,
    ) -> Result<Self, ExportError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let parsed = parse_url(url)?;
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            let (k, v) = (k.as_ref(), v.as_ref());
            let invalid = || ExportError::InvalidHeader {
                name: k.to_string(),
            };
            let name = HeaderName::from_bytes(k.trim().as_bytes()).map_err(|_| invalid())?;
            let mut value = HeaderValue::from_str(v.trim()).map_err(|_| invalid())?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        let content_type = HeaderValue::from_str(encoder.content_type()).map_err(|_| {
            ExportError::InvalidHeader {
                name: "content-type".into(),
            }
        })?;
        map.insert(CONTENT_TYPE, content_type);
        if config.gzip {
            map.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        let client = reqwest::Client::builder()
            .user_agent(concat!("kit/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(config.request_timeout)
            .redirect(crate::http::same_origin_redirects())
            .build()
            .map_err(|e| ExportError::Startup(format!("HTTP client: {e}")))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ExportError::Startup(format!("tokio runtime: {e}")))?;

        let (tx, rx) = mpsc::channel(config.capacity.max(1));
        let (ctrl, ctrl_rx) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = std::sync::mpsc::sync_channel(1);
        let shared = Arc::new(Shared::default());
        let mut secrets = crate::http::Secrets::new();
        for (name, value) in &map {
            if name == CONTENT_TYPE || name == CONTENT_ENCODING {
                continue;
            }
            let value = String::from_utf8_lossy(value.as_bytes());
            secrets.add(&value);
            if let Some((_, credential)) = value.split_once(' ') {
                secrets.add(credential);
            }
        }
        if let Some(password) = parsed.password() {
            secrets.add_url_part(password);
        }
        let worker = Worker {
            client,
            url: parsed,
            headers: map,
            secrets,
            encoder: Box::new(encoder),
            config: config.clone(),
            shared: shared.clone(),
            deadline: None,
            clean: true,
            dropped_seen: 0,
        };
        std::thread::Builder::new()
            .name("kit-trace-export".into())
            .spawn(move || {
                runtime.block_on(worker.run(rx, ctrl_rx));
                drop(runtime);
                let _ = done_tx.send(());
            })
            .map_err(|e| ExportError::Startup(format!("worker thread: {e}")))?;
        Ok(QueuedExporter {
            tx,
            ctrl,
            shared,
            done: Mutex::new(Some(done_rx)),
            url: url.trim().to_string(),
            shutdown_timeout: config.shutdown_timeout,
            max_queued_bytes: config.max_queued_bytes,
        })
    }

    /// The URL batches are sent to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Counters, and the last error.
    pub fn queue_stats(&self) -> QueueStats {
        QueueStats {
            runs: self.shared.runs(),
            requests: self.shared.requests.load(Ordering::Relaxed),
            retries: self.shared.retries.load(Ordering::Relaxed),
            batches_ok: self.shared.batches_ok.load(Ordering::Relaxed),
            batches_failed: self.shared.batches_failed.load(Ordering::Relaxed),
            trimmed: self.shared.trimmed.load(Ordering::Relaxed),
            last_error: self
                .shared
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }

    /// Stops taking runs, sends what is queued (retries stop at the deadline) and waits for the
    /// worker, at most `timeout`. True when the worker finished in time. Runs exported
    /// afterwards are dropped and counted. Dropping the exporter does this with
    /// [`QueueConfig::shutdown_timeout`].
    pub fn shutdown(&self, timeout: Duration) -> bool {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        let Some(rx) = done.as_ref() else {
            return true;
        };
        let _ = self
            .ctrl
            .send(Control::Shutdown(crate::deadline::from_now(timeout)));
        // The worker may outlive a timed-out wait; it stops at its own deadline.
        let finished = !matches!(
            rx.recv_timeout(timeout),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        );
        if finished {
            *done = None;
        }
        finished
    }
}

impl Drop for QueuedExporter {
    fn drop(&mut self) {
        self.shutdown(self.shutdown_timeout);
    }
}

impl Exporter for QueuedExporter {
    fn export(&self, mut run: RunRecord) {
        let mut bytes = run.approx_bytes();
        if bytes > self.max_queued_bytes && run.trim_to(self.max_queued_bytes / 2) {
            // Never deliverable whole: its longest values are cut (half the queue leaves room
            // for the runs around it), and the span still reaches the endpoint.
            self.shared.trimmed.fetch_add(1, Ordering::Relaxed);
            bytes = run.approx_bytes();
        }
        let queued = self.shared.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
        if queued.saturating_add(bytes) > self.max_queued_bytes {
            self.shared.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            if bytes > self.max_queued_bytes {
                // Never deliverable even trimmed (a limit below a run's ids and names), unlike
                // a run that met a full queue: say so.
                self.shared.set_error(ExportError::RunTooLarge {
                    bytes,
                    max: self.max_queued_bytes,
                });
            }
            return;
        }
        match self.tx.try_send((Box::new(run), bytes)) {
            Ok(()) => {
                self.shared.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                self.shared.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Sends everything queued so far and waits for the answers, at most `timeout`. True when
    /// every run exported since the previous flush got through (none dropped or failed).
    fn flush(&self, timeout: Duration) -> bool {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        if self.ctrl.send(Control::Flush(reply)).is_err() {
            return false;
        }
        answer.recv_timeout(timeout).unwrap_or(false)
    }

    fn stats(&self) -> ExporterStats {
        self.shared.runs()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
