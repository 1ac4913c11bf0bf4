//! The HTTP layer shared by everything kit sends: model providers, moderation, the async-subagent
//! run client and the trace exporter.
//!
//! * **One client.** Every [`HttpClient`] made with [`HttpClient::new`] shares one
//!   `reqwest::Client` (one connection pool, HTTP/2 where the server offers it), built on first
//!   use.
//! * **Timeouts.** A whole-request timeout for [`HttpClient::send`]; for
//!   [`HttpClient::send_stream`] the timeout bounds the wait for the response head and every
//!   silence between two body chunks, so a long stream that keeps talking is never cut.
//! * **Retries.** On HTTP 408, 429 and 5xx (including Anthropic's 529), connection failures and
//!   timeouts, with exponential backoff and jitter (see [`RetryPolicy`]). A `Retry-After`
//!   header (delta-seconds or HTTP-date) or OpenAI's `retry-after-ms` sets the wait exactly;
//!   a wait longer than [`RetryPolicy::max_retry_after`] is not waited for — the error is
//!   returned with its `retry_after` so the caller can decide. An `x-should-retry: true|false`
//!   header (sent by OpenAI and Anthropic) overrides the status rule. Other 4xx are never
//!   retried. A stream is retried only until its body starts.
//! * **Limits.** What a peer sends back is bounded ([`HttpLimits`]): a whole body
//!   (`max_body_bytes`, 32 MiB; a larger declared `Content-Length` is refused unread), the part
//!   of an error body kept (64 KiB), a streamed body (`max_stream_bytes`, 64 MiB), one
//!   event-stream line (8 MiB) and event (16 MiB), and a stream's total life
//!   (`stream_deadline`, 1 hour, however often the peer talks). A broken limit is an error
//!   whose [`HttpError::limit`] names the field to raise. Every wait a peer asks for
//!   (`Retry-After`, `retry-after-ms`) is capped at [`MAX_PEER_DELAY`].
//! * **Redirects** are followed (at most 10) only within the origin of the request: a
//!   redirect to another scheme, host or port is not followed, since the request carries
//!   credentials (`Authorization`, `x-api-key`, custom headers); the 3xx comes back as a status
//!   error saying so.
//! * **Secrets never come back.** Every error the client returns is scrubbed of the request's
//!   credentials ([`HttpRequest::secrets`]: header values, the URL's password, secret query
//!   values) in every form a peer may echo them — as sent, JSON-escaped, percent-encoded, or
//!   escaped twice ([`Secrets`]); `Debug` of a request shows header names only.
//! * **Typed errors.** [`HttpError`] carries the [`HttpErrorKind`], status, body text,
//!   `retry_after` and attempt count; providers map it to [`ModelError`](crate::model::ModelError).
//! * **Tracing.** Each attempt emits `tracing` events on target `kit::http` with a `phase`
//!   field — `start` (with the redacted `url`), `stop` (with `status`), `exception` (with
//!   `error`), `retry` (with `delay_ms` and `reason`), and for streams `body_stop` /
//!   `body_exception` — plus `method`, `host`, `path`, `attempt` and `duration_ms`. Headers and bodies are never logged; query
//!   parameters are logged through [`redact_url`], so API keys never reach a log.
//!
//! ```no_run
//! use kit::http::{HttpClient, HttpRequest};
//! # async fn demo() -> Result<(), kit::http::HttpError> {
//! let client = HttpClient::new();
//! let response = client
//!     .send(
//!         HttpRequest::post("https://api.example.com/v1/check")
//!             .bearer_auth("secret")
//!             .json(&serde_json::json!({"input": "hello"})),
//!     )
//!     .await?;
//! let body: serde_json::Value = response.json()?;
//! # let _ = body; Ok(()) }
//! ```

mod client;
mod error;
mod limits;
mod redact;
mod request;
mod response;
mod retry;
mod secrets;
mod sse;

pub use client::{CONNECT_TIMEOUT, DEFAULT_TIMEOUT, HttpClient};
pub use error::{HttpError, HttpErrorKind};
pub use limits::{DEFAULT_MAX_BODY_BYTES, HttpLimits};
pub use redact::{
    REDACTED, is_sensitive_name, redact_headers, redact_secrets, redact_url, redact_url_text,
};
pub use request::HttpRequest;
pub use reqwest::Method;
pub use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
pub use response::{HttpResponse, HttpStream};
pub use retry::{MAX_PEER_DELAY, RetryPolicy, parse_retry_after, retry_after_value};
pub use secrets::Secrets;
pub use sse::{SseDecoder, SseError, SseEvent, SseStream};

pub(crate) use client::{MAX_ERROR_CHARS, same_origin_redirects};

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
