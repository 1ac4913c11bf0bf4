//! The error of a failed request: opaque, with predicates, secrets already redacted.

use std::time::Duration;

use reqwest::Method;

use super::{HeaderMap, Secrets, redact_headers, redact_url_text};
use crate::text::clip;

/// What went wrong with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HttpErrorKind {
    /// The server answered with a non-success status (see [`HttpError::status`]).
    Status,
    /// No response (or, for a stream, no data) within the timeout.
    Timeout,
    /// The connection could not be made or broke before the response was complete.
    Connection,
    /// A streamed body broke off after it had started (nothing was retried).
    Body,
    /// The response could not be decoded (not JSON, or not the expected shape).
    Decode,
    /// The request could not be built (invalid URL or header value).
    Request,
    /// The response was larger than a limit of [`HttpLimits`](super::HttpLimits) (see
    /// [`HttpError::limit`]).
    TooLarge,
}

/// A request failed. The message says what happened and what to do. The error is opaque, in
/// reqwest's style: ask it with [`kind`](Self::kind), [`status`](Self::status),
/// [`retry_after`](Self::retry_after) and the `is_*` predicates.
#[derive(Clone, thiserror::Error)]
#[error("{}", self.inner.describe())]
pub struct HttpError {
    pub(super) inner: Box<Inner>,
}

impl std::fmt::Debug for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl From<Inner> for HttpError {
    fn from(inner: Inner) -> Self {
        HttpError {
            inner: Box::new(inner),
        }
    }
}

/// What an [`HttpError`] knows.
#[derive(Clone)]
pub(super) struct Inner {
    pub(super) kind: HttpErrorKind,
    pub(super) method: String,
    /// Secrets redacted.
    pub(super) url: String,
    pub(super) status: Option<u16>,
    /// For [`HttpErrorKind::Status`] (empty otherwise).
    pub(super) headers: HeaderMap,
    /// Error bodies are small; empty when there was none.
    pub(super) body: String,
    /// `Retry-After` / `retry-after-ms`.
    pub(super) retry_after: Option<Duration>,
    /// The timeout that expired, for [`HttpErrorKind::Timeout`].
    pub(super) timeout: Option<Duration>,
    pub(super) attempts: u32,
    /// The underlying error, without secrets.
    pub(super) message: String,
    /// The [`HttpLimits`](super::HttpLimits) field that was hit, if one was.
    pub(super) limit: Option<&'static str>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpError")
            .field("kind", &self.kind)
            .field("method", &self.method)
            .field("url", &self.url)
            .field("status", &self.status)
            .field("headers", &redact_headers(&self.headers))
            .field("body", &self.body)
            .field("retry_after", &self.retry_after)
            .field("timeout", &self.timeout)
            .field("attempts", &self.attempts)
            .field("message", &self.message)
            .field("limit", &self.limit)
            .finish()
    }
}

impl HttpError {
    pub(super) fn new(
        kind: HttpErrorKind,
        method: &Method,
        url: &str,
        message: impl Into<String>,
    ) -> Self {
        Inner::new(kind, method, url, message).into()
    }

    /// What went wrong.
    pub fn kind(&self) -> HttpErrorKind {
        self.inner.kind
    }

    /// The HTTP status, when the server answered with a non-success one.
    pub fn status(&self) -> Option<u16> {
        self.inner.status
    }

    /// The response headers of a status error (empty otherwise).
    pub fn headers(&self) -> &HeaderMap {
        &self.inner.headers
    }

    /// The response body as text (clipped; empty when there was none).
    pub fn body(&self) -> &str {
        &self.inner.body
    }

    /// How long the server asked to wait (`Retry-After` / `retry-after-ms`).
    pub fn retry_after(&self) -> Option<Duration> {
        self.inner.retry_after
    }

    /// The timeout that expired, for a timeout.
    pub fn timeout(&self) -> Option<Duration> {
        self.inner.timeout
    }

    /// How many attempts were made.
    pub fn attempts(&self) -> u32 {
        self.inner.attempts
    }

    /// The HTTP method.
    pub fn method(&self) -> &str {
        &self.inner.method
    }

    /// The URL, secrets redacted.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// The underlying error's text (secrets redacted).
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// True when the server answered with a non-success status.
    pub fn is_status(&self) -> bool {
        self.inner.kind == HttpErrorKind::Status
    }

    /// True when no response (or, for a stream, no data) came within the timeout.
    pub fn is_timeout(&self) -> bool {
        self.inner.kind == HttpErrorKind::Timeout
    }

    /// True when the connection could not be made or broke before the response was complete.
    pub fn is_connect(&self) -> bool {
        self.inner.kind == HttpErrorKind::Connection
    }

    /// True when a streamed body broke off after it had started.
    pub fn is_body(&self) -> bool {
        self.inner.kind == HttpErrorKind::Body
    }

    /// True when the response could not be decoded.
    pub fn is_decode(&self) -> bool {
        self.inner.kind == HttpErrorKind::Decode
    }

    /// True when the response broke a size limit of [`HttpLimits`](super::HttpLimits).
    pub fn is_too_large(&self) -> bool {
        self.inner.kind == HttpErrorKind::TooLarge
    }

    /// The [`HttpLimits`](super::HttpLimits) field whose limit was hit (`max_body_bytes`,
    /// `max_sse_line_bytes`, `stream_deadline`, ...), if one was.
    pub fn limit(&self) -> Option<&'static str> {
        self.inner.limit
    }

    /// True when waiting and trying again may help (429, 5xx, timeouts, connection failures).
    pub fn is_transient(&self) -> bool {
        self.inner.is_transient()
    }

    /// Removes `secrets` from every text of the error (body, message, URL, header values), in
    /// every form [`Secrets::scrub`] knows.
    pub fn scrub(&mut self, secrets: &Secrets) {
        if secrets.is_empty() {
            return;
        }
        let inner = &mut self.inner;
        secrets.scrub_in_place(&mut inner.body);
        secrets.scrub_in_place(&mut inner.message);
        secrets.scrub_in_place(&mut inner.url);
        for value in inner.headers.values_mut() {
            let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
            let clean = secrets.scrub(&text);
            if clean != text {
                *value = super::HeaderValue::from_str(&clean)
                    .unwrap_or_else(|_| super::HeaderValue::from_static(super::REDACTED));
            }
        }
    }

    /// This error with `secrets` scrubbed (see [`scrub`](Self::scrub)).
    #[must_use]
    pub fn scrubbed(mut self, secrets: &Secrets) -> Self {
        self.scrub(secrets);
        self
    }
}

impl Inner {
    pub(super) fn new(
        kind: HttpErrorKind,
        method: &Method,
        url: &str,
        message: impl Into<String>,
    ) -> Self {
        Inner {
            kind,
            method: method.to_string(),
            url: url.to_string(),
            status: None,
            headers: HeaderMap::new(),
            body: String::new(),
            retry_after: None,
            timeout: None,
            attempts: 1,
            message: message.into(),
            limit: None,
        }
    }

    fn is_transient(&self) -> bool {
        match self.kind {
            HttpErrorKind::Status => self.status.is_some_and(retryable_status),
            HttpErrorKind::Timeout | HttpErrorKind::Connection | HttpErrorKind::Body => true,
            HttpErrorKind::Decode | HttpErrorKind::Request | HttpErrorKind::TooLarge => false,
        }
    }

    fn describe(&self) -> String {
        let at = format!("{} {}", self.method, self.url);
        let tries = if self.attempts > 1 {
            format!(" (after {} attempts)", self.attempts)
        } else {
            String::new()
        };
        match self.kind {
            HttpErrorKind::Status => {
                let status = self.status.unwrap_or(0);
                let hint = match status {
                    401 | 403 => "check the credentials (API key)".to_string(),
                    408 => "the server timed out; try again".to_string(),
                    300..=399 => {
                        let to = self
                            .headers
                            .get("location")
                            .and_then(|v| v.to_str().ok())
                            .map_or_else(
                                || "another location".to_string(),
                                |to| crate::text::clip(&redact_url_text(to), 300),
                            );
                        format!(
                            "the server redirected to {to}; kit follows redirects only within \
                             the same origin (scheme, host and port) because the request \
                             carries credentials; point the URL at the new location"
                        )
                    }
                    429 => match self.retry_after {
                        Some(d) => format!("rate limited; retry after {:.1}s", d.as_secs_f64()),
                        None => "rate limited; retry later or lower the request rate".to_string(),
                    },
                    s if s >= 500 => "the server failed; try again later".to_string(),
                    _ => "the server rejected the request; fix it before retrying".to_string(),
                };
                let body = clip(self.body.trim(), 600);
                let body = if body.is_empty() {
                    String::new()
                } else {
                    format!(": {body}")
                };
                format!("{at}: HTTP {status}{tries}{body} — {hint}")
            }
            HttpErrorKind::Timeout if self.limit.is_some() => format!(
                "{at}: {}; raise HttpLimits::{} if this peer is trusted to talk that long",
                self.message,
                self.limit.unwrap_or_default()
            ),
            HttpErrorKind::Timeout => format!(
                "{at}: no response within {:?}{tries}; raise the timeout or try again",
                self.timeout.unwrap_or_default()
            ),
            HttpErrorKind::TooLarge => format!(
                "{at}: the response is too large: {}; raise HttpLimits::{} if this peer is \
                 trusted to send that much",
                self.message,
                self.limit.unwrap_or("max_body_bytes")
            ),
            HttpErrorKind::Connection => format!(
                "{at}: connection failed{tries}: {}; check the URL and the network",
                self.message
            ),
            HttpErrorKind::Body => format!(
                "{at}: the response broke off mid-stream: {}; the partial answer is \
                 incomplete, try again",
                self.message
            ),
            HttpErrorKind::Decode => format!(
                "{at}: the response could not be understood: {}",
                self.message
            ),
            HttpErrorKind::Request => format!("{at}: invalid request: {}", self.message),
        }
    }
}

pub(super) fn retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || status >= 500
}
