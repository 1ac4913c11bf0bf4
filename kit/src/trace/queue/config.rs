//! What a queued exporter is configured with: the encoder of its batches, and its limits.

use std::time::Duration;

use crate::trace::record::RunRecord;

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

/// Settings of a [`QueuedExporter`](super::QueuedExporter). The defaults suit a hosted backend (see the table on
/// [`QueuedExporter`](super::QueuedExporter)).
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
    /// Bytes (their text, estimated from their strings) the queued runs may hold together; a
    /// run that would go past it is dropped (and counted); 0 drops every run. A run larger than
    /// this on its own is first trimmed to half of it (its longest strings cut; see
    /// [`QueueStats::trimmed`](super::QueueStats::trimmed)) rather than lost. With the batch
    /// being sent (at most `max_batch_bytes`), this bounds what the exporter holds while the
    /// endpoint is slow or down, whatever the runs record (a tool result of megabytes, say).
    pub max_queued_bytes: usize,
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

impl QueueConfig {
    /// The retry rules as `kit::http` states them, so the exporter backs off like every other
    /// request kit sends.
    pub(super) fn retry_policy(&self) -> crate::http::RetryPolicy {
        crate::http::RetryPolicy {
            max_retries: self.max_retries,
            initial_backoff: self.initial_backoff,
            max_backoff: self.max_backoff,
            max_retry_after: self.max_backoff,
        }
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            capacity: 2048,
            max_queued_bytes: 64 * 1024 * 1024,
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
