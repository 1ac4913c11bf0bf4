//! The background worker: batches runs, encodes and gzips them, POSTs them with bounded retries.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, HeaderMap};
use tokio::sync::mpsc;

use super::{BatchEncoder, Control, ExportError, QueueConfig, Shared};
use crate::trace::record::RunRecord;
use crate::trace::redact::redact_str;

pub(super) struct Worker {
    pub(super) client: reqwest::Client,
    pub(super) url: reqwest::Url,
    pub(super) headers: HeaderMap,
    /// The credentials in the headers and URL, scrubbed from whatever the endpoint answers.
    pub(super) secrets: crate::http::Secrets,
    pub(super) encoder: Box<dyn BatchEncoder>,
    pub(super) config: QueueConfig,
    pub(super) shared: Arc<Shared>,
    /// Set when shutting down: no request or backoff goes past it.
    pub(super) deadline: Option<Instant>,
    /// No run failed since the last flush.
    pub(super) clean: bool,
    /// The dropped counter at the last flush.
    pub(super) dropped_seen: u64,
}

/// A batch being filled.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) runs: Vec<RunRecord>,
    pub(super) bytes: usize,
    pub(super) since: Option<Instant>,
}

pub(super) enum Outcome {
    Delivered(Option<(u64, String)>),
    Retry(ExportError, Option<Duration>),
    /// HTTP 413: the batch is split in halves and each half sent again.
    TooLarge(ExportError),
    Fail(ExportError),
}

impl Worker {
    pub(super) async fn run(
        mut self,
        mut rx: mpsc::Receiver<super::Queued>,
        mut ctrl: mpsc::UnboundedReceiver<Control>,
    ) {
        let mut batch = Batch::default();
        loop {
            let due = batch
                .since
                .map(|t| crate::deadline::after(t, self.config.batch_timeout));
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
                            self.take(&mut batch, run).await;
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
                            self.take(&mut batch, run).await;
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
                    Some(run) => self.take(&mut batch, run).await,
                    None => {
                        self.send(&mut batch).await;
                        return;
                    }
                },
                () = timer => self.send(&mut batch).await,
            }
        }
    }

    /// Takes a run off the queue (its bytes no longer count there) into the batch.
    async fn take(&mut self, batch: &mut Batch, (run, bytes): super::Queued) {
        self.shared
            .queued_bytes
            .fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
        self.add(batch, *run).await;
    }

    /// Adds a run; sends the batch first if the run would not fit, and after if it is full.
    pub(super) async fn add(&mut self, batch: &mut Batch, run: RunRecord) {
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

    pub(super) fn give_up(&mut self, n: u64, e: ExportError) {
        self.clean = false;
        self.shared.failed.fetch_add(n, Ordering::Relaxed);
        self.shared.batches_failed.fetch_add(1, Ordering::Relaxed);
        self.shared.set_error(e);
    }

    pub(super) async fn send(&mut self, batch: &mut Batch) {
        let runs = std::mem::take(&mut batch.runs);
        batch.bytes = 0;
        batch.since = None;
        self.send_runs(runs).await;
    }

    /// Sends runs in one request, retrying as configured; a batch the endpoint finds too large
    /// (413) is split in halves until the parts fit or a single run is refused.
    pub(super) async fn send_runs(&mut self, mut runs: Vec<RunRecord>) {
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
                            message: crate::text::clip(&self.secrets.scrub(&message), 300),
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
                        None => self
                            .config
                            .retry_policy()
                            .backoff(attempt.saturating_add(1)),
                    };
                    if self
                        .deadline
                        .is_some_and(|deadline| crate::deadline::from_now(wait) >= deadline)
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

    pub(super) async fn attempt(&self, body: bytes::Bytes, timeout: Duration) -> Outcome {
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
        let retry_after = crate::http::parse_retry_after(response.headers());
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        // The body only matters for errors and partial successes; a broken body is ignored,
        // and no more than its first MAX_RESPONSE_BYTES are read.
        let body = read_prefix(response, MAX_RESPONSE_BYTES).await;
        if (200..300).contains(&status) {
            let rejected = self.encoder.rejected(&content_type, &body);
            if rejected.is_none() && body.len() >= MAX_RESPONSE_BYTES {
                tracing::warn!(
                    "the collector answered an export with more than {MAX_RESPONSE_BYTES} bytes, \
                     which were not read: spans it may have rejected are counted as exported"
                );
            }
            return Outcome::Delivered(rejected);
        }
        let error = ExportError::Status {
            status,
            body: self.secrets.scrub(&body_excerpt(&body)),
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

/// The most of an endpoint's answer the exporter reads (an OTLP answer is a few bytes; an
/// error page a few kilobytes).
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// The first `max` bytes of a body; the rest is never read.
async fn read_prefix(mut response: reqwest::Response, max: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = max.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if chunk.len() >= room {
            break;
        }
    }
    body
}

pub(super) fn transport_error(e: reqwest::Error, timeout: Duration) -> ExportError {
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

pub(super) fn body_excerpt(body: &[u8]) -> String {
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

pub(super) fn gzip(body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4 + 64),
        flate2::Compression::fast(),
    );
    enc.write_all(body)?;
    enc.finish()
}

/// The size of a run's JSON, without building it.
pub(super) fn estimated_size(run: &RunRecord) -> usize {
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
