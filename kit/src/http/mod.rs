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

mod redact;
mod sse;

pub use redact::{REDACTED, is_sensitive_name, redact_headers, redact_secrets, redact_url};
pub use reqwest::Method;
pub use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
pub use sse::{SseDecoder, SseEvent, SseStream};

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::Url;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How failed requests are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 2, like the official OpenAI and Anthropic SDKs).
    pub max_retries: u32,
    /// The first backoff (default 500 ms); it doubles with each retry.
    pub initial_backoff: Duration,
    /// The longest backoff (default 8 s).
    pub max_backoff: Duration,
    /// The longest `Retry-After` kit waits for (default 60 s); a longer one ends the retries.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The backoff before retry number `retry` (1-based), with jitter: a random duration
    /// between half and all of `min(initial · 2^(retry-1), max)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = kit::http::RetryPolicy::default();
    /// let d = p.backoff(3);
    /// assert!(d >= Duration::from_millis(1000) && d <= Duration::from_millis(2000));
    /// ```
    pub fn backoff(&self, retry: u32) -> Duration {
        let exp = retry.saturating_sub(1).min(30);
        let full = self
            .initial_backoff
            .saturating_mul(1u32 << exp)
            .min(self.max_backoff);
        let half = full / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

/// What went wrong with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HttpErrorKind {
    /// The server answered with a non-success status (see [`HttpErrorDetails::status`]).
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
}

/// A request failed. The message says what happened and what to do; match on
/// [`kind`](HttpErrorDetails::kind) and [`status`](HttpErrorDetails::status) to react (the
/// details are reached through `Deref`: `error.status`, `error.retry_after`, ...).
#[derive(Clone, thiserror::Error)]
#[error("{}", self.0.describe())]
pub struct HttpError(Box<HttpErrorDetails>);

impl std::fmt::Debug for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::ops::Deref for HttpError {
    type Target = HttpErrorDetails;
    fn deref(&self) -> &HttpErrorDetails {
        &self.0
    }
}

impl std::ops::DerefMut for HttpError {
    fn deref_mut(&mut self) -> &mut HttpErrorDetails {
        &mut self.0
    }
}

impl From<HttpErrorDetails> for HttpError {
    fn from(details: HttpErrorDetails) -> Self {
        HttpError(Box::new(details))
    }
}

/// What an [`HttpError`] knows.
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpErrorDetails {
    /// What went wrong.
    pub kind: HttpErrorKind,
    /// The HTTP method.
    pub method: String,
    /// The URL, secrets redacted.
    pub url: String,
    /// The HTTP status, for [`HttpErrorKind::Status`].
    pub status: Option<u16>,
    /// The response headers, for [`HttpErrorKind::Status`] (empty otherwise).
    pub headers: HeaderMap,
    /// The response body as text (error bodies are small; empty when there was none).
    pub body: String,
    /// How long the server asked to wait (`Retry-After` / `retry-after-ms`).
    pub retry_after: Option<Duration>,
    /// The timeout that expired, for [`HttpErrorKind::Timeout`].
    pub timeout: Option<Duration>,
    /// How many attempts were made.
    pub attempts: u32,
    /// Details (the underlying error), without secrets.
    pub message: String,
}

impl std::fmt::Debug for HttpErrorDetails {
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
            .finish()
    }
}

impl HttpError {
    fn new(kind: HttpErrorKind, method: &Method, url: &str, message: impl Into<String>) -> Self {
        HttpErrorDetails::new(kind, method, url, message).into()
    }
}

impl HttpErrorDetails {
    fn new(kind: HttpErrorKind, method: &Method, url: &str, message: impl Into<String>) -> Self {
        HttpErrorDetails {
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
        }
    }

    /// True when waiting and trying again may help (429, 5xx, timeouts, connection failures).
    pub fn is_transient(&self) -> bool {
        match self.kind {
            HttpErrorKind::Status => self.status.is_some_and(retryable_status),
            HttpErrorKind::Timeout | HttpErrorKind::Connection | HttpErrorKind::Body => true,
            HttpErrorKind::Decode | HttpErrorKind::Request => false,
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
            HttpErrorKind::Timeout => format!(
                "{at}: no response within {:?}{tries}; raise the timeout or try again",
                self.timeout.unwrap_or_default()
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

use crate::text::clip;

fn retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || status >= 500
}

/// One request to send: method, URL, headers, body and per-request overrides. Cheap to build;
/// builder errors (an invalid URL or header value) are reported when it is sent.
#[derive(Clone)]
pub struct HttpRequest {
    method: Method,
    url: Result<Url, String>,
    raw_url: String,
    headers: HeaderMap,
    body: Option<Bytes>,
    timeout: Option<Duration>,
    max_retries: Option<u32>,
    error: Option<String>,
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &self.shown_url())
            .field("headers", &redact_headers(&self.headers))
            .field("body_bytes", &self.body.as_ref().map(Bytes::len))
            .finish_non_exhaustive()
    }
}

impl HttpRequest {
    /// A request with this method and URL.
    pub fn new(method: Method, url: &str) -> Self {
        HttpRequest {
            method,
            url: Url::parse(url).map_err(|e| {
                format!(
                    "`{}` is not a valid URL ({e}); check the configured base URL",
                    clip(url, 200)
                )
            }),
            raw_url: url.to_string(),
            headers: HeaderMap::new(),
            body: None,
            timeout: None,
            max_retries: None,
            error: None,
        }
    }

    /// A `GET` request.
    pub fn get(url: &str) -> Self {
        Self::new(Method::GET, url)
    }

    /// A `POST` request.
    pub fn post(url: &str) -> Self {
        Self::new(Method::POST, url)
    }

    /// Adds a header (a second value for the same name is added, not replaced).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(n), Ok(mut v)) => {
                if is_sensitive_name(name) {
                    v.set_sensitive(true);
                }
                self.headers.append(n, v);
            }
            (Err(_), _) => {
                self.error
                    .get_or_insert_with(|| format!("`{name}` is not a valid header name"));
            }
            (_, Err(_)) => {
                self.error.get_or_insert_with(|| {
                    format!(
                        "the value of header `{name}` contains characters not allowed in a \
                         header (a newline in an API key?)"
                    )
                });
            }
        }
        self
    }

    /// Adds `Authorization: Bearer <token>`.
    pub fn bearer_auth(self, token: &str) -> Self {
        self.header("authorization", &format!("Bearer {token}"))
    }

    /// Appends a query parameter.
    pub fn query(mut self, key: &str, value: &str) -> Self {
        if let Ok(url) = &mut self.url {
            url.query_pairs_mut().append_pair(key, value);
        }
        self
    }

    /// Sets a JSON body (and `content-type: application/json`).
    pub fn json<T: Serialize + ?Sized>(mut self, body: &T) -> Self {
        match serde_json::to_vec(body) {
            Ok(bytes) => {
                self.body = Some(Bytes::from(bytes));
                self.headers.insert(
                    reqwest::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
            }
            Err(e) => {
                self.error
                    .get_or_insert_with(|| format!("the body could not be serialised: {e}"));
            }
        }
        self
    }

    /// Sets a raw body with its content type.
    pub fn body(mut self, body: impl Into<Bytes>, content_type: &str) -> Self {
        self.body = Some(body.into());
        self.header("content-type", content_type)
    }

    /// Overrides the client's timeout for this request.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Overrides the client's number of retries for this request.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = Some(retries);
        self
    }

    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The URL with secrets redacted (what logs and errors show).
    pub fn shown_url(&self) -> String {
        match &self.url {
            Ok(url) => redact_url(url),
            Err(_) => match Url::parse(&self.raw_url) {
                Ok(u) => redact_url(&u),
                Err(_) => "<invalid URL>".to_string(),
            },
        }
    }
}

/// A complete response with a success status.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// The status (2xx).
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    method: String,
    url: String,
}

impl HttpResponse {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            HttpErrorDetails {
                kind: HttpErrorKind::Decode,
                method: self.method.clone(),
                url: self.url.clone(),
                status: Some(self.status),
                headers: HeaderMap::new(),
                body: clip(&self.text(), 2000),
                retry_after: None,
                timeout: None,
                attempts: 1,
                message: format!("the body is not the expected JSON ({e})"),
            }
            .into()
        })
    }
}

/// A response whose body arrives as a stream (status 2xx).
pub struct HttpStream {
    /// The status (2xx).
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body chunks. A failure after the body started is an [`HttpErrorKind::Body`] error
    /// (or [`HttpErrorKind::Timeout`] when the server fell silent).
    pub body: BoxStream<'static, Result<Bytes, HttpError>>,
}

impl std::fmt::Debug for HttpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpStream")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl HttpStream {
    /// The body decoded as server-sent events.
    pub fn sse(self) -> SseStream {
        SseStream::new(self.body)
    }
}

/// The default timeout of an [`HttpClient`]: 60 seconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The connect timeout of the shared client: 10 seconds.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

static SHARED: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();

fn shared_client() -> Result<reqwest::Client, String> {
    SHARED
        .get_or_init(|| {
            reqwest::Client::builder()
                .user_agent(concat!("kit/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(CONNECT_TIMEOUT)
                .build()
                .map_err(|e| format!("the HTTP client could not be created: {e}"))
        })
        .clone()
}

/// Sends requests with timeouts, retries and tracing. Cheap to clone; clones share the
/// connection pool.
#[derive(Clone, Debug)]
pub struct HttpClient {
    client: Result<reqwest::Client, String>,
    timeout: Duration,
    retry: RetryPolicy,
}

impl Default for HttpClient {
    fn default() -> Self {
        Self::new()
    }
}

enum Attempt {
    Done(reqwest::Response),
    Failed(HttpError),
}

impl HttpClient {
    /// A client on the process-wide shared connection pool, with [`DEFAULT_TIMEOUT`] and the
    /// default [`RetryPolicy`].
    pub fn new() -> Self {
        HttpClient {
            client: shared_client(),
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
        }
    }

    /// A client on your own `reqwest::Client` (proxies, custom TLS roots).
    pub fn with_reqwest(client: reqwest::Client) -> Self {
        HttpClient {
            client: Ok(client),
            ..Self::new()
        }
    }

    /// Sets the default timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the retry policy.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Sets the number of retries.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.retry.max_retries = retries;
        self
    }

    /// The default timeout.
    pub fn default_timeout(&self) -> Duration {
        self.timeout
    }

    /// The retry policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// Sends a request and reads the whole response; retries as the [`RetryPolicy`] says.
    /// A non-2xx status is an [`HttpErrorKind::Status`] error carrying the body.
    pub async fn send(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let timeout = request.timeout.unwrap_or(self.timeout);
        let shown = request.shown_url();
        self.run(&request, false, |response, attempt, _started| {
            let shown = shown.clone();
            let method = request.method.clone();
            async move {
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                match response.bytes().await {
                    Ok(body) => Ok(HttpResponse {
                        status,
                        headers,
                        body,
                        method: method.to_string(),
                        url: shown,
                    }),
                    Err(e) => Err(classify(&method, &shown, e, timeout, attempt)),
                }
            }
        })
        .await
    }

    /// Sends a request and returns as soon as a 2xx response head arrives, with the body as a
    /// stream. Retries happen only before that point; a failure mid-body is reported by the
    /// stream and never retried (the caller has seen part of it).
    pub async fn send_stream(&self, request: HttpRequest) -> Result<HttpStream, HttpError> {
        let timeout = request.timeout.unwrap_or(self.timeout);
        let shown = request.shown_url();
        self.run(&request, true, |response, attempt, started| {
            let shown = shown.clone();
            let method = request.method.clone();
            async move {
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                let host = response.url().host_str().unwrap_or("").to_string();
                let path = response.url().path().to_string();
                let body = body_stream(
                    response,
                    BodyMeta {
                        method,
                        shown,
                        host,
                        path,
                        timeout,
                        attempt,
                        started,
                    },
                );
                Ok(HttpStream {
                    status,
                    headers,
                    body,
                })
            }
        })
        .await
    }

    /// The retry loop shared by `send` and `send_stream`: `finish` turns a 2xx response into
    /// the result (its failure counts as a failed attempt).
    async fn run<T, F, Fut>(
        &self,
        request: &HttpRequest,
        stream: bool,
        finish: F,
    ) -> Result<T, HttpError>
    where
        F: Fn(reqwest::Response, u32, Instant) -> Fut,
        Fut: std::future::Future<Output = Result<T, HttpError>>,
    {
        let method = request.method.clone();
        let shown = request.shown_url();
        let timeout = request.timeout.unwrap_or(self.timeout);
        let max_retries = request.max_retries.unwrap_or(self.retry.max_retries);
        let url = match (&request.url, &request.error) {
            (Err(e), _) | (Ok(_), Some(e)) => {
                return Err(HttpError::new(
                    HttpErrorKind::Request,
                    &method,
                    &shown,
                    e.clone(),
                ));
            }
            (Ok(url), None) => url.clone(),
        };
        let client = self
            .client
            .clone()
            .map_err(|e| HttpError::new(HttpErrorKind::Request, &method, &shown, e))?;
        let host = url.host_str().unwrap_or("").to_string();
        let path = url.path().to_string();
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            tracing::debug!(
                target: "kit::http",
                phase = "start",
                method = %method,
                host = %host,
                path = %path,
                url = %shown,
                attempt,
                stream,
                "http request start"
            );
            let started = Instant::now();
            let mut builder = client
                .request(method.clone(), url.clone())
                .headers(request.headers.clone());
            if let Some(body) = &request.body {
                builder = builder.body(body.clone());
            }
            let outcome = if stream {
                match tokio::time::timeout(timeout, builder.send()).await {
                    Ok(Ok(r)) => Attempt::Done(r),
                    Ok(Err(e)) => Attempt::Failed(classify(&method, &shown, e, timeout, attempt)),
                    Err(_) => Attempt::Failed(timeout_error(&method, &shown, timeout, attempt)),
                }
            } else {
                match builder.timeout(timeout).send().await {
                    Ok(r) => Attempt::Done(r),
                    Err(e) => Attempt::Failed(classify(&method, &shown, e, timeout, attempt)),
                }
            };
            let error = match outcome {
                Attempt::Done(response) if response.status().is_success() => {
                    let status = response.status().as_u16();
                    match finish(response, attempt, started).await {
                        Ok(value) => {
                            tracing::debug!(
                                target: "kit::http",
                                phase = "stop",
                                method = %method,
                                host = %host,
                                path = %path,
                                status,
                                attempt,
                                duration_ms = started.elapsed().as_millis() as u64,
                                "http request stop"
                            );
                            return Ok(value);
                        }
                        Err(e) => e,
                    }
                }
                Attempt::Done(response) => {
                    status_error(&method, &shown, response, timeout, attempt, started).await
                }
                Attempt::Failed(e) => e,
            };
            let duration_ms = started.elapsed().as_millis() as u64;
            match error.status {
                Some(status) => tracing::debug!(
                    target: "kit::http",
                    phase = "stop",
                    method = %method,
                    host = %host,
                    path = %path,
                    status,
                    attempt,
                    duration_ms,
                    "http request stop"
                ),
                None => tracing::warn!(
                    target: "kit::http",
                    phase = "exception",
                    method = %method,
                    host = %host,
                    path = %path,
                    error = ?error.kind,
                    message = %error.message,
                    attempt,
                    duration_ms,
                    "http request exception"
                ),
            }
            let Some(delay) = self.retry_delay(&error, attempt, max_retries) else {
                let mut error = error;
                error.attempts = attempt;
                return Err(error);
            };
            tracing::info!(
                target: "kit::http",
                phase = "retry",
                method = %method,
                host = %host,
                path = %path,
                attempt,
                reason = %retry_reason(&error),
                delay_ms = delay.as_millis() as u64,
                "http request retry"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// How long to wait before the next attempt, or `None` to give up.
    fn retry_delay(&self, error: &HttpError, attempt: u32, max_retries: u32) -> Option<Duration> {
        if attempt > max_retries {
            return None;
        }
        let retry = match error.kind {
            HttpErrorKind::Status => {
                let forced = should_retry_header(&error.headers);
                match forced {
                    Some(f) => f,
                    None => error.status.is_some_and(retryable_status),
                }
            }
            HttpErrorKind::Timeout | HttpErrorKind::Connection => true,
            HttpErrorKind::Body | HttpErrorKind::Decode | HttpErrorKind::Request => false,
        };
        if !retry {
            return None;
        }
        match error.retry_after {
            Some(wait) if wait > self.retry.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(self.retry.backoff(attempt)),
        }
    }
}

fn retry_reason(error: &HttpError) -> String {
    match (error.kind, error.status) {
        (HttpErrorKind::Status, Some(s)) if error.retry_after.is_some() => {
            format!("HTTP {s}, server asked to wait")
        }
        (HttpErrorKind::Status, Some(s)) => format!("HTTP {s}"),
        (HttpErrorKind::Timeout, _) => "timeout".to_string(),
        _ => "connection failed".to_string(),
    }
}

/// The `x-should-retry` header, when the server sent one.
fn should_retry_header(headers: &HeaderMap) -> Option<bool> {
    match headers.get("x-should-retry")?.to_str().ok()?.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// How long the server asked to wait: `retry-after-ms` (milliseconds, OpenAI), else
/// `Retry-After` as delta-seconds or an HTTP-date (RFC 9110 §10.2.3).
///
/// ```
/// use kit::http::{HeaderMap, HeaderValue, parse_retry_after};
/// use std::time::Duration;
/// let mut h = HeaderMap::new();
/// h.insert("retry-after", HeaderValue::from_static("7"));
/// assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(7)));
/// h.insert("retry-after", HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
/// assert_eq!(parse_retry_after(&h), Some(Duration::ZERO)); // a date in the past: no wait
/// h.insert("retry-after-ms", HeaderValue::from_static("250"));
/// assert_eq!(parse_retry_after(&h), Some(Duration::from_millis(250)));
/// ```
pub fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<f64>() {
        return ((0.0..1e9).contains(&secs)).then(|| Duration::from_secs_f64(secs));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(
        date.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

fn timeout_error(method: &Method, shown: &str, timeout: Duration, attempt: u32) -> HttpError {
    HttpErrorDetails {
        timeout: Some(timeout),
        attempts: attempt,
        ..HttpErrorDetails::new(
            HttpErrorKind::Timeout,
            method,
            shown,
            format!("no response within {timeout:?}"),
        )
    }
    .into()
}

/// The text of an error and its sources, without the URL (reqwest puts the full URL, query
/// included, in its messages).
fn error_chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

fn classify(
    method: &Method,
    shown: &str,
    e: reqwest::Error,
    timeout: Duration,
    attempt: u32,
) -> HttpError {
    if e.is_timeout() {
        return timeout_error(method, shown, timeout, attempt);
    }
    let kind = if e.is_builder() {
        HttpErrorKind::Request
    } else {
        HttpErrorKind::Connection
    };
    HttpErrorDetails {
        attempts: attempt,
        ..HttpErrorDetails::new(kind, method, shown, error_chain(e))
    }
    .into()
}

/// Reads the body of a non-2xx response (bounded by the timeout) into a status error.
async fn status_error(
    method: &Method,
    shown: &str,
    response: reqwest::Response,
    timeout: Duration,
    attempt: u32,
    started: Instant,
) -> HttpError {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let retry_after = parse_retry_after(&headers);
    let left = timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_secs(1));
    let body = match tokio::time::timeout(left, response.bytes()).await {
        Ok(Ok(b)) => clip(&String::from_utf8_lossy(&b), 8000),
        Ok(Err(_)) | Err(_) => String::new(),
    };
    HttpErrorDetails {
        status: Some(status),
        headers,
        body,
        retry_after,
        attempts: attempt,
        ..HttpErrorDetails::new(
            HttpErrorKind::Status,
            method,
            shown,
            format!("HTTP {status}"),
        )
    }
    .into()
}

struct BodyMeta {
    method: Method,
    shown: String,
    host: String,
    path: String,
    timeout: Duration,
    attempt: u32,
    started: Instant,
}

struct BodyState {
    inner: BoxStream<'static, reqwest::Result<Bytes>>,
    info: BodyMeta,
    bytes: u64,
    done: bool,
}

impl BodyMeta {
    fn fail(&self, kind: HttpErrorKind, message: String, bytes: u64) -> HttpError {
        tracing::warn!(
            target: "kit::http",
            phase = "body_exception",
            method = %self.method,
            host = %self.host,
            path = %self.path,
            error = ?kind,
            message = %message,
            bytes,
            attempt = self.attempt,
            duration_ms = self.started.elapsed().as_millis() as u64,
            "http body exception"
        );
        HttpErrorDetails {
            timeout: (kind == HttpErrorKind::Timeout).then_some(self.timeout),
            attempts: self.attempt,
            ..HttpErrorDetails::new(kind, &self.method, &self.shown, message)
        }
        .into()
    }
}

/// The body of a streamed response, with an idle timeout per chunk and tracing at the end.
fn body_stream(
    response: reqwest::Response,
    info: BodyMeta,
) -> BoxStream<'static, Result<Bytes, HttpError>> {
    let state = BodyState {
        inner: response.bytes_stream().boxed(),
        info,
        bytes: 0,
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        match tokio::time::timeout(st.info.timeout, st.inner.next()).await {
            Ok(Some(Ok(chunk))) => {
                st.bytes += chunk.len() as u64;
                Some((Ok(chunk), st))
            }
            Ok(Some(Err(e))) => {
                st.done = true;
                let message = format!("{} after {} bytes", error_chain(e), st.bytes);
                let err = st.info.fail(HttpErrorKind::Body, message, st.bytes);
                Some((Err(err), st))
            }
            Ok(None) => {
                tracing::debug!(
                    target: "kit::http",
                    phase = "body_stop",
                    method = %st.info.method,
                    host = %st.info.host,
                    path = %st.info.path,
                    bytes = st.bytes,
                    attempt = st.info.attempt,
                    duration_ms = st.info.started.elapsed().as_millis() as u64,
                    "http body stop"
                );
                None
            }
            Err(_) => {
                st.done = true;
                let message = format!(
                    "the server sent nothing for {:?} after {} bytes",
                    st.info.timeout, st.bytes
                );
                let err = st.info.fail(HttpErrorKind::Timeout, message, st.bytes);
                Some((Err(err), st))
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::default();
        for _ in 0..50 {
            let first = p.backoff(1);
            assert!(first >= Duration::from_millis(250) && first <= Duration::from_millis(500));
            let late = p.backoff(20);
            assert!(late >= Duration::from_secs(4) && late <= Duration::from_secs(8));
        }
    }

    #[test]
    fn retry_decisions() {
        let c = HttpClient::new();
        let mut e = HttpError::new(HttpErrorKind::Status, &Method::POST, "u", "x");
        e.status = Some(400);
        assert_eq!(c.retry_delay(&e, 1, 2), None, "4xx is not retried");
        e.status = Some(529);
        assert!(c.retry_delay(&e, 1, 2).is_some());
        assert_eq!(c.retry_delay(&e, 3, 2), None, "retries exhausted");
        e.status = Some(429);
        e.retry_after = Some(Duration::from_secs(3));
        assert_eq!(c.retry_delay(&e, 1, 2), Some(Duration::from_secs(3)));
        e.retry_after = Some(Duration::from_secs(3600));
        assert_eq!(
            c.retry_delay(&e, 1, 2),
            None,
            "too long a wait is left to the caller"
        );
        e.retry_after = None;
        e.headers
            .insert("x-should-retry", HeaderValue::from_static("false"));
        assert_eq!(c.retry_delay(&e, 1, 2), None);
        e.status = Some(409);
        e.headers
            .insert("x-should-retry", HeaderValue::from_static("true"));
        assert!(c.retry_delay(&e, 1, 2).is_some());
        let body = HttpError::new(HttpErrorKind::Body, &Method::POST, "u", "x");
        assert_eq!(
            c.retry_delay(&body, 1, 2),
            None,
            "a started stream is never retried"
        );
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        assert_eq!(parse_retry_after(&h), None);
        let later = SystemTime::now() + Duration::from_secs(120);
        h.insert(
            "retry-after",
            HeaderValue::from_str(&httpdate::fmt_http_date(later)).unwrap(),
        );
        let d = parse_retry_after(&h).unwrap();
        assert!(
            d > Duration::from_secs(100) && d <= Duration::from_secs(120),
            "{d:?}"
        );
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(parse_retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("-3"));
        assert_eq!(parse_retry_after(&h), None);
    }

    #[test]
    fn builder_errors_surface_at_send_with_a_fix() {
        let r = HttpRequest::post("not a url");
        assert!(matches!(r.url, Err(ref e) if e.contains("not a valid URL")));
        let r = HttpRequest::post("http://x/").header("x-api-key", "a\nb");
        assert!(r.error.as_deref().unwrap_or("").contains("newline"));
        let r = HttpRequest::post("http://x/").bearer_auth("sk-secret-value");
        assert!(!format!("{r:?}").contains("sk-secret-value"));
    }
}
