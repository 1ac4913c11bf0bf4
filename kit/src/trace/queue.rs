//! The queued HTTP exporter: see [`QueuedExporter`].

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::sync::mpsc;

use super::exporter::{Exporter, ExporterStats};
use super::record::RunRecord;
use super::redact::redact_str;

/// Turns a batch of runs into a request body (and reads the endpoint's answer).
///
/// ```
/// use kit::trace::{BatchEncoder, RunRecord};
///
/// /// Sends runs as a JSON array.
/// struct JsonArray;
///
/// impl BatchEncoder for JsonArray {
///     fn content_type(&self) -> &str {
///         "application/json"
///     }
///     fn encode(&self, runs: &[RunRecord]) -> Result<Vec<u8>, String> {
///         serde_json::to_vec(runs).map_err(|e| e.to_string())
///     }
/// }
/// assert_eq!(JsonArray.encode(&[]).unwrap(), b"[]");
/// ```
pub trait BatchEncoder: Send + Sync + 'static {
    /// The `Content-Type` of the bodies.
    fn content_type(&self) -> &str;

    /// Encodes a batch. An error drops the batch (counted as failed).
    fn encode(&self, runs: &[RunRecord]) -> Result<Vec<u8>, String>;

    /// Reads a successful answer: how many of the batch's runs the endpoint nevertheless
    /// rejected, and why (OTLP's `partial_success`). `None` when all were accepted.
    fn rejected(&self, content_type: &str, body: &[u8]) -> Option<(u64, String)> {
        let _ = (content_type, body);
        None
    }
}

/// Settings of a [`QueuedExporter`]. The defaults suit a hosted backend (see the table on
/// [`QueuedExporter`]).
///
/// ```
/// use std::time::Duration;
/// let cfg = kit::trace::QueueConfig {
///     batch_timeout: Duration::from_millis(200),
///     ..Default::default()
/// };
/// assert_eq!(cfg.capacity, 2048);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// Runs the queue holds; beyond that new runs are dropped (and counted).
    pub capacity: usize,
    /// Most runs in one request.
    pub max_batch_runs: usize,
    /// Most (uncompressed, estimated) bytes in one request; a single larger run goes alone.
    /// A batch the endpoint still refuses as too large (HTTP 413) is split in halves and resent.
    pub max_batch_bytes: usize,
    /// How long the first run of a batch waits for company before the batch is sent.
    pub batch_timeout: Duration,
    /// Timeout of one HTTP request (connect, send, answer).
    pub request_timeout: Duration,
    /// Retries of one batch after the first attempt (on 429/502/503/504, timeouts and
    /// connection failures); other errors are not retried.
    pub max_retries: u32,
    /// First backoff; it doubles on each retry (with jitter), up to `max_backoff`.
    pub initial_backoff: Duration,
    /// Longest backoff. A `Retry-After` longer than this drops the batch instead of waiting.
    pub max_backoff: Duration,
    /// Gzip request bodies (`Content-Encoding: gzip`).
    pub gzip: bool,
    /// How long dropping the exporter waits for the queue to drain.
    pub shutdown_timeout: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            capacity: 2048,
            max_batch_runs: 512,
            max_batch_bytes: 4 * 1024 * 1024,
            batch_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(10),
            max_retries: 5,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            gzip: true,
            shutdown_timeout: Duration::from_secs(5),
        }
    }
}

/// What went wrong while setting up or running a trace exporter. Export errors never reach the
/// user's run: they are counted, logged (`tracing` target `kit`) and kept as
/// [`QueueStats::last_error`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The endpoint is not an `http(s)` URL.
    #[error(
        "the trace endpoint `{endpoint}` is not a valid http(s) URL ({reason}); set it (KIT_TRACE_ENDPOINT) to a URL such as https://collector.example.com:4318"
    )]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// Why it does not parse.
        reason: String,
    },
    /// A header name or value cannot be sent over HTTP.
    #[error(
        "the trace exporter header `{name}` has a name or value that HTTP does not allow (control characters or non-ASCII); fix the header"
    )]
    InvalidHeader {
        /// The header's name (its value is never shown: it may be a credential).
        name: String,
    },
    /// A setting read from the environment or given in code is not understood.
    #[error("{0}")]
    InvalidSetting(String),
    /// The HTTP client or the worker thread could not be started.
    #[error("could not start the trace exporter: {0}")]
    Startup(String),
    /// The batch could not be encoded.
    #[error("could not encode a trace batch: {0}; this is a bug in the encoder, please report it")]
    Encode(String),
    /// The endpoint answered with an error status (after retries, for retryable ones).
    #[error("{}", status_message(*.status, body))]
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of the answer's body (redacted).
        body: String,
    },
    /// The endpoint asked (`Retry-After`) to wait longer than the exporter's `max_backoff`.
    #[error(
        "the trace endpoint asked to wait {wait:?} before retrying (Retry-After), longer than max_backoff; the batch was dropped. Lower the trace volume or raise QueueConfig::max_backoff"
    )]
    RetryAfterTooLong {
        /// What the endpoint asked for.
        wait: Duration,
    },
    /// No answer within the request timeout.
    #[error(
        "no answer from the trace endpoint within {after:?}; check that it is reachable, or raise QueueConfig::request_timeout"
    )]
    Timeout {
        /// The timeout that ran out.
        after: Duration,
    },
    /// The connection could not be made (refused, DNS, TLS).
    #[error(
        "cannot connect to the trace endpoint ({0}); check the host and port of KIT_TRACE_ENDPOINT and that the collector is running"
    )]
    Connect(String),
    /// The connection broke while sending or receiving.
    #[error(
        "the connection to the trace endpoint failed ({0}); it will be retried if retries remain"
    )]
    Transport(String),
    /// The endpoint accepted the request but rejected some spans (OTLP `partial_success`).
    #[error("the trace endpoint rejected {rejected} span(s): {message}")]
    PartiallyRejected {
        /// How many spans it rejected.
        rejected: u64,
        /// Its explanation.
        message: String,
    },
    /// The exporter was shutting down and its drain time ran out.
    #[error(
        "the trace exporter shut down before the batch got through; raise QueueConfig::shutdown_timeout or flush earlier"
    )]
    ShutdownDeadline,
}

fn status_message(status: u16, body: &str) -> String {
    let hint = match status {
        400 => {
            "the endpoint rejected the batch as malformed; check that the URL is an OTLP/HTTP traces endpoint (…/v1/traces), else report it as a kit bug"
        }
        401 | 403 => {
            "the endpoint refused the credentials; check KIT_TRACE_API_KEY (Langfuse needs `public_key:secret_key`)"
        }
        404 => {
            "no trace receiver at this URL; check KIT_TRACE_ENDPOINT (OTLP receivers listen on …/v1/traces)"
        }
        413 => {
            "the endpoint refused a single run as too large (larger batches are split in halves first); lower the content cap (OtlpExporterBuilder::max_content_chars) or raise the endpoint's request size limit"
        }
        415 => {
            "the endpoint does not accept this encoding; switch the protocol (Protocol::Json or Protocol::Protobuf)"
        }
        429 => {
            "the endpoint rate-limited the exporter and retries ran out; lower the trace volume or raise QueueConfig::max_retries"
        }
        500..=599 => "the endpoint failed and retries ran out; check the backend's health",
        _ => "unexpected answer from the trace endpoint",
    };
    if body.is_empty() {
        format!("trace endpoint answered HTTP {status}: {hint}")
    } else {
        format!("trace endpoint answered HTTP {status}: {hint} (body: {body})")
    }
}

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
    /// The last error, if any.
    pub last_error: Option<ExportError>,
}

#[derive(Default)]
struct Shared {
    queued: AtomicU64,
    exported: AtomicU64,
    dropped: AtomicU64,
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
/// | queue capacity | 2,048 runs |
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
    tx: mpsc::Sender<Box<RunRecord>>,
    ctrl: mpsc::UnboundedSender<Control>,
    shared: Arc<Shared>,
    done: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    url: String,
    shutdown_timeout: Duration,
}

impl std::fmt::Debug for QueuedExporter {
    /// Shows the URL and counters, never the headers (they hold credentials).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuedExporter")
            .field("url", &self.url)
            .field("stats", &self.shared.runs())
            .finish_non_exhaustive()
    }
}

/// Checks that `url` is an absolute `http(s)` URL.
pub(crate) fn parse_url(url: &str) -> Result<reqwest::Url, ExportError> {
    let invalid = |reason: String| ExportError::InvalidEndpoint {
        endpoint: url.to_string(),
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
        let worker = Worker {
            client,
            url: parsed,
            headers: map,
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
        let _ = self.ctrl.send(Control::Shutdown(Instant::now() + timeout));
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
    fn export(&self, run: RunRecord) {
        match self.tx.try_send(Box::new(run)) {
            Ok(()) => {
                self.shared.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
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

struct Worker {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    encoder: Box<dyn BatchEncoder>,
    config: QueueConfig,
    shared: Arc<Shared>,
    /// Set when shutting down: no request or backoff goes past it.
    deadline: Option<Instant>,
    /// No run failed since the last flush.
    clean: bool,
    /// The dropped counter at the last flush.
    dropped_seen: u64,
}

/// A batch being filled.
#[derive(Default)]
struct Batch {
    runs: Vec<RunRecord>,
    bytes: usize,
    since: Option<Instant>,
}

enum Outcome {
    Delivered(Option<(u64, String)>),
    Retry(ExportError, Option<Duration>),
    /// HTTP 413: the batch is split in halves and each half sent again.
    TooLarge(ExportError),
    Fail(ExportError),
}

impl Worker {
    async fn run(
        mut self,
        mut rx: mpsc::Receiver<Box<RunRecord>>,
        mut ctrl: mpsc::UnboundedReceiver<Control>,
    ) {
        let mut batch = Batch::default();
        loop {
            let due = batch.since.map(|t| t + self.config.batch_timeout);
            let timer = async move {
                match due {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                c = ctrl.recv() => match c {
                    Some(Control::Flush(reply)) => {
                        while let Ok(run) = rx.try_recv() {
                            self.add(&mut batch, *run).await;
                        }
                        self.send(&mut batch).await;
                        let dropped = self.shared.dropped.load(Ordering::Relaxed);
                        let ok = self.clean && dropped == self.dropped_seen;
                        self.clean = true;
                        self.dropped_seen = dropped;
                        let _ = reply.send(ok);
                    }
                    Some(Control::Shutdown(deadline)) => {
                        self.deadline = Some(deadline);
                        rx.close();
                        while let Some(run) = rx.recv().await {
                            self.add(&mut batch, *run).await;
                        }
                        self.send(&mut batch).await;
                        return;
                    }
                    None => {
                        self.send(&mut batch).await;
                        return;
                    }
                },
                r = rx.recv() => match r {
                    Some(run) => self.add(&mut batch, *run).await,
                    None => {
                        self.send(&mut batch).await;
                        return;
                    }
                },
                () = timer => self.send(&mut batch).await,
            }
        }
    }

    /// Adds a run; sends the batch first if the run would not fit, and after if it is full.
    async fn add(&mut self, batch: &mut Batch, run: RunRecord) {
        let size = estimated_size(&run);
        if !batch.runs.is_empty() && batch.bytes + size > self.config.max_batch_bytes {
            self.send(batch).await;
        }
        batch.bytes += size;
        batch.runs.push(run);
        batch.since.get_or_insert_with(Instant::now);
        if batch.runs.len() >= self.config.max_batch_runs.max(1)
            || batch.bytes >= self.config.max_batch_bytes
        {
            self.send(batch).await;
        }
    }

    fn give_up(&mut self, n: u64, e: ExportError) {
        self.clean = false;
        self.shared.failed.fetch_add(n, Ordering::Relaxed);
        self.shared.batches_failed.fetch_add(1, Ordering::Relaxed);
        self.shared.set_error(e);
    }

    async fn send(&mut self, batch: &mut Batch) {
        let runs = std::mem::take(&mut batch.runs);
        batch.bytes = 0;
        batch.since = None;
        self.send_runs(runs).await;
    }

    /// Sends runs in one request, retrying as configured; a batch the endpoint finds too large
    /// (413) is split in halves until the parts fit or a single run is refused.
    async fn send_runs(&mut self, mut runs: Vec<RunRecord>) {
        if runs.is_empty() {
            return;
        }
        let n = runs.len() as u64;
        let body = match self.encoder.encode(&runs) {
            Ok(b) => b,
            Err(e) => return self.give_up(n, ExportError::Encode(e)),
        };
        let body = if self.config.gzip {
            match gzip(&body) {
                Ok(b) => b,
                Err(e) => return self.give_up(n, ExportError::Encode(format!("gzip: {e}"))),
            }
        } else {
            body
        };
        let body = bytes::Bytes::from(body);
        let mut attempt: u32 = 0;
        loop {
            let mut timeout = self.config.request_timeout;
            if let Some(deadline) = self.deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return self.give_up(n, ExportError::ShutdownDeadline);
                }
                timeout = timeout.min(left);
            }
            self.shared.requests.fetch_add(1, Ordering::Relaxed);
            match self.attempt(body.clone(), timeout).await {
                Outcome::Delivered(rejected) => {
                    let rejected_n = rejected.as_ref().map_or(0, |r| r.0.min(n));
                    self.shared
                        .exported
                        .fetch_add(n - rejected_n, Ordering::Relaxed);
                    self.shared.batches_ok.fetch_add(1, Ordering::Relaxed);
                    if let Some((count, message)) = rejected.filter(|_| rejected_n > 0) {
                        self.clean = false;
                        self.shared.failed.fetch_add(rejected_n, Ordering::Relaxed);
                        self.shared.set_error(ExportError::PartiallyRejected {
                            rejected: count,
                            message,
                        });
                    }
                    return;
                }
                Outcome::TooLarge(_) if runs.len() > 1 => {
                    // Not a failure yet: the halves may well fit.
                    tracing::debug!(runs = runs.len(), "trace batch too large (413); splitting");
                    let second = runs.split_off(runs.len() / 2);
                    Box::pin(self.send_runs(runs)).await;
                    Box::pin(self.send_runs(second)).await;
                    return;
                }
                Outcome::TooLarge(e) | Outcome::Fail(e) => return self.give_up(n, e),
                Outcome::Retry(e, retry_after) => {
                    if attempt >= self.config.max_retries {
                        return self.give_up(n, e);
                    }
                    let wait = match retry_after {
                        Some(wait) if wait > self.config.max_backoff => {
                            return self.give_up(n, ExportError::RetryAfterTooLong { wait });
                        }
                        Some(wait) => wait,
                        None => backoff(&self.config, attempt),
                    };
                    if self
                        .deadline
                        .is_some_and(|deadline| Instant::now() + wait >= deadline)
                    {
                        return self.give_up(n, e);
                    }
                    self.shared.set_error(e);
                    self.shared.retries.fetch_add(1, Ordering::Relaxed);
                    attempt += 1;
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn attempt(&self, body: bytes::Bytes, timeout: Duration) -> Outcome {
        let sent = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .body(body)
            .timeout(timeout)
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => return Outcome::Retry(transport_error(e, timeout), None),
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        // The body only matters for errors and partial successes; a broken body is ignored.
        let body = response.bytes().await.unwrap_or_default();
        if (200..300).contains(&status) {
            return Outcome::Delivered(self.encoder.rejected(&content_type, &body));
        }
        let error = ExportError::Status {
            status,
            body: body_excerpt(&body),
        };
        if matches!(status, 429 | 502 | 503 | 504) {
            Outcome::Retry(error, retry_after)
        } else if status == 413 {
            Outcome::TooLarge(error)
        } else {
            Outcome::Fail(error)
        }
    }
}

fn transport_error(e: reqwest::Error, timeout: Duration) -> ExportError {
    let (is_timeout, is_connect) = (e.is_timeout(), e.is_connect());
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    let text = redact_str(&text);
    if is_timeout {
        ExportError::Timeout { after: timeout }
    } else if is_connect {
        ExportError::Connect(text)
    } else {
        ExportError::Transport(text)
    }
}

fn body_excerpt(body: &[u8]) -> String {
    const MAX: usize = 300;
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let cut = if text.len() > MAX {
        let mut end = MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &text[..end])
    } else {
        text.to_string()
    };
    redact_str(&cut)
}

/// The wait a `Retry-After` header asks for: seconds, or an HTTP date.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Exponential backoff with jitter: a random wait in `[b/2, b]`, `b = initial · 2^attempt`,
/// capped at `max_backoff`.
fn backoff(config: &QueueConfig, attempt: u32) -> Duration {
    let base = config
        .initial_backoff
        .saturating_mul(2u32.saturating_pow(attempt.min(20)))
        .min(config.max_backoff);
    let half = base / 2;
    half + half.mul_f64(fastrand::f64())
}

fn gzip(body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4 + 64),
        flate2::Compression::fast(),
    );
    enc.write_all(body)?;
    enc.finish()
}

/// The size of a run's JSON, without building it.
fn estimated_size(run: &RunRecord) -> usize {
    struct Count(usize);
    impl Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, run);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(7)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let cfg = QueueConfig {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
            ..Default::default()
        };
        for _ in 0..50 {
            let b0 = backoff(&cfg, 0);
            assert!(b0 >= Duration::from_millis(50) && b0 <= Duration::from_millis(100));
            let b2 = backoff(&cfg, 2);
            assert!(b2 >= Duration::from_millis(200) && b2 <= Duration::from_millis(400));
            let b9 = backoff(&cfg, 9);
            assert!(b9 >= Duration::from_millis(500) && b9 <= Duration::from_millis(1000));
            assert!(backoff(&cfg, u32::MAX) <= Duration::from_millis(1000));
        }
    }

    #[test]
    fn errors_say_what_to_do_and_hide_secrets() {
        let e = ExportError::Status {
            status: 401,
            body: body_excerpt(b"bad key: Bearer sk-live-ABCDEFGHIJKLMNOPQRST"),
        };
        let text = e.to_string();
        assert!(text.contains("KIT_TRACE_API_KEY"), "{text}");
        assert!(!text.contains("ABCDEFGHIJ"), "{text}");
        let e = ExportError::Status {
            status: 413,
            body: String::new(),
        };
        assert!(e.to_string().contains("max_content_chars"));
        let long = "x".repeat(1000);
        assert!(body_excerpt(long.as_bytes()).chars().count() <= 301);
    }

    #[test]
    fn urls_must_be_http() {
        assert!(parse_url("https://cloud.langfuse.com/api/public/otel").is_ok());
        for bad in ["localhost:4318", "ftp://x/y", "http://", "not a url"] {
            let e = parse_url(bad).unwrap_err();
            assert!(matches!(e, ExportError::InvalidEndpoint { .. }), "{bad}");
            assert!(e.to_string().contains("KIT_TRACE_ENDPOINT"));
        }
    }

    #[test]
    fn headers_are_checked_without_showing_values() {
        struct Empty;
        impl BatchEncoder for Empty {
            fn content_type(&self) -> &str {
                "application/json"
            }
            fn encode(&self, _: &[RunRecord]) -> Result<Vec<u8>, String> {
                Ok(b"[]".to_vec())
            }
        }
        let e = QueuedExporter::new(
            "http://127.0.0.1:9",
            [("authorization", "Bearer secret\nvalue")],
            Empty,
            QueueConfig::default(),
        )
        .unwrap_err();
        assert_eq!(
            e,
            ExportError::InvalidHeader {
                name: "authorization".into()
            }
        );
        assert!(!e.to_string().contains("secret"));
    }
}
