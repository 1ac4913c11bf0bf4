//! How much a peer may send back, and for how long: the limits of an [`HttpClient`](super::HttpClient).

use std::time::Duration;

/// Size and time limits on what a peer sends back. A response that breaks one ends in an
/// [`HttpError`](super::HttpError) whose [`limit`](super::HttpError::limit) names the field
/// below, so the message can say which setting to raise.
///
/// | limit | default | what it bounds |
/// |---|---|---|
/// | `max_body_bytes` | 32 MiB | a whole response read by [`HttpClient::send`](super::HttpClient::send); a larger declared `Content-Length` is refused before reading |
/// | `max_error_body_bytes` | 64 KiB | the body of a non-2xx answer kept for the error (the rest is not read) |
/// | `max_stream_bytes` | 64 MiB | everything one streamed body may deliver ([`HttpClient::send_stream`](super::HttpClient::send_stream)), keep-alive comments included |
/// | `max_sse_line_bytes` | 8 MiB | one line of a `text/event-stream` body |
/// | `max_sse_event_bytes` | 16 MiB | one server-sent event (its `data:` lines together) |
/// | `max_sse_id_bytes` | 1 KiB | a server-sent event's `id:` (it is repeated on every later event, so a long one would be copied once per event) |
/// | `stream_deadline` | 1 hour | the whole life of a streamed body, however often the peer talks |
///
/// The idle timeout of a stream is the client's [`timeout`](super::HttpClient::timeout): the
/// longest silence between two chunks. `stream_deadline` is the total: a peer that keeps a
/// stream alive with comments or pings is cut when it runs out.
///
/// ```
/// use std::time::Duration;
/// use kit::http::{HttpClient, HttpLimits};
///
/// let client = HttpClient::new().limits(HttpLimits {
///     max_body_bytes: 4 * 1024 * 1024,
///     stream_deadline: Duration::from_secs(300),
///     ..HttpLimits::default()
/// });
/// assert_eq!(client.get_limits().max_body_bytes, 4 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Largest whole response body, in bytes (default 32 MiB).
    pub max_body_bytes: u64,
    /// Largest part of an error response's body that is read and kept, in bytes (default
    /// 64 KiB).
    pub max_error_body_bytes: u64,
    /// Most bytes one streamed body may deliver (default 64 MiB).
    pub max_stream_bytes: u64,
    /// Longest line of a server-sent-event stream, in bytes (default 8 MiB).
    pub max_sse_line_bytes: usize,
    /// Largest server-sent event (its data together), in bytes (default 16 MiB).
    pub max_sse_event_bytes: usize,
    /// Longest `id:` of a server-sent event, in bytes (default 1 KiB). The last id is carried
    /// by every later event: without this bound one long id line followed by many tiny events
    /// would be copied into each of them.
    pub max_sse_id_bytes: usize,
    /// Longest a streamed body may last in total (default 1 hour).
    pub stream_deadline: Duration,
}

/// [`HttpLimits::max_body_bytes`] by default: 32 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 32 * 1024 * 1024;

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_error_body_bytes: 64 * 1024,
            max_stream_bytes: 64 * 1024 * 1024,
            max_sse_line_bytes: 8 * 1024 * 1024,
            max_sse_event_bytes: 16 * 1024 * 1024,
            max_sse_id_bytes: 1024,
            stream_deadline: Duration::from_secs(60 * 60),
        }
    }
}
