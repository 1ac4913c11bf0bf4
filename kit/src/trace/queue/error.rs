//! What goes wrong exporting traces: every failure is counted, never raised to the run.

use std::time::Duration;

/// What went wrong while setting up or running a trace exporter. Export errors never reach the
/// user's run: they are counted, logged (`tracing` target `kit`) and kept as
/// [`QueueStats::last_error`](super::QueueStats::last_error).
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
    /// One run alone held more than the queue may (`QueueConfig::max_queued_bytes`) even after
    /// trimming (its ids, names and tags alone were over the limit), so it was dropped.
    #[error(
        "a run recording about {bytes} bytes, trimmed, is still larger than the trace queue may \
         hold ({max} bytes) and was dropped; raise QueueConfig::max_queued_bytes"
    )]
    RunTooLarge {
        /// About the bytes of the run's text.
        bytes: usize,
        /// The queue's limit.
        max: usize,
    },
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

pub(super) fn status_message(status: u16, body: &str) -> String {
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
