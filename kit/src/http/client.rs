//! The client: one shared connection pool, timeouts, retries and tracing for every request.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::error::{Inner, retryable_status};
use super::response::{BodyMeta, SseContext, body_stream};
use super::retry::{retry_reason, should_retry_header};
use super::{
    HttpError, HttpErrorKind, HttpLimits, HttpRequest, HttpResponse, HttpStream, Method,
    RetryPolicy, parse_retry_after,
};
use crate::text::clip;

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
                .redirect(same_origin_redirects())
                .build()
                .map_err(|e| format!("the HTTP client could not be created: {e}"))
        })
        .clone()
}

/// The most redirects kit follows for one request.
const MAX_REDIRECTS: usize = 10;

/// The most characters of an error body (or an error message inside a successful answer) kept
/// for error texts: enough for any real provider's explanation, and bounded however much a
/// peer sends (the texts are scrubbed for secrets and shown to people).
pub(crate) const MAX_ERROR_CHARS: usize = 8000;

/// kit's redirect rule: at most [`MAX_REDIRECTS`], and only to the origin (scheme, host and
/// port) of the first request. A redirect to another origin is not followed — the request
/// carries credentials (`Authorization`, `x-api-key`, custom headers) that must not reach
/// another host — and comes back as the 3xx response, which becomes a status error saying so.
pub(crate) fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!(
                "more than {MAX_REDIRECTS} redirects; point the URL at the final location"
            ))
        } else if same_origin {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// Sends requests with timeouts, retries and tracing. Cheap to clone; clones share the
/// connection pool.
#[derive(Clone, Debug)]
pub struct HttpClient {
    client: Result<reqwest::Client, String>,
    timeout: Duration,
    retry: RetryPolicy,
    limits: HttpLimits,
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
    /// A client on the process-wide shared connection pool, with [`DEFAULT_TIMEOUT`], the
    /// default [`RetryPolicy`] and the default [`HttpLimits`].
    pub fn new() -> Self {
        HttpClient {
            client: shared_client(),
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            limits: HttpLimits::default(),
        }
    }

    /// A client on your own `reqwest::Client` (proxies, custom TLS roots). Its redirect policy
    /// is yours: build it with `.redirect(reqwest::redirect::Policy::none())` (or a policy
    /// that stays on one origin) so credentials never follow a redirect to another host, as
    /// kit's own client ensures.
    pub fn with_reqwest(client: reqwest::Client) -> Self {
        HttpClient {
            client: Ok(client),
            ..Self::new()
        }
    }

    /// Sets the default timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Sets the number of retries.
    #[must_use]
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

    /// Sets the size and time limits on responses (see [`HttpLimits`]).
    #[must_use]
    pub fn limits(mut self, limits: HttpLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The size and time limits on responses.
    pub fn get_limits(&self) -> &HttpLimits {
        &self.limits
    }

    /// Sends a request and reads the whole response; retries as the [`RetryPolicy`] says.
    /// A non-2xx status is an [`HttpErrorKind::Status`] error carrying the body. A body over
    /// [`HttpLimits::max_body_bytes`] is an [`HttpErrorKind::TooLarge`] error (a larger
    /// declared `Content-Length` is refused before anything is read).
    pub async fn send(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let timeout = request.timeout.unwrap_or(self.timeout);
        let shown = request.shown_url();
        let max = self.limits.max_body_bytes;
        let secrets = request.secrets();
        self.run(&request, false, |response, attempt, _started| {
            let shown = shown.clone();
            let method = request.method.clone();
            let secrets = secrets.clone();
            async move {
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                match read_capped(response, max).await {
                    Read::Done(body) => Ok(HttpResponse {
                        status,
                        headers,
                        body,
                        method: method.to_string(),
                        url: shown,
                        secrets,
                    }),
                    Read::Over { declared, read } => {
                        let message = match declared {
                            Some(n) => format!(
                                "its Content-Length is {n} bytes, over the limit of {max} \
                                 bytes (nothing was read)"
                            ),
                            None => format!(
                                "more than {max} bytes arrived ({read} read when it was cut)"
                            ),
                        };
                        Err(limit_error(
                            &method,
                            &shown,
                            HttpErrorKind::TooLarge,
                            "max_body_bytes",
                            message,
                            attempt,
                        ))
                    }
                    Read::Failed(e) => Err(classify(&method, &shown, e, timeout, attempt)),
                }
            }
        })
        .await
    }

    /// Sends a request and returns as soon as a 2xx response head arrives, with the body as a
    /// stream. Retries happen only before that point; a failure mid-body is reported by the
    /// stream and never retried (the caller has seen part of it).
    ///
    /// The stream ends with an error when the peer falls silent for the timeout, when the body
    /// passes [`HttpLimits::max_stream_bytes`], and when it outlives
    /// [`HttpLimits::stream_deadline`] however much it talks.
    pub async fn send_stream(&self, request: HttpRequest) -> Result<HttpStream, HttpError> {
        let timeout = request.timeout.unwrap_or(self.timeout);
        let shown = request.shown_url();
        let limits = self.limits;
        let secrets = request.secrets();
        self.run(&request, true, |response, attempt, started| {
            let shown = shown.clone();
            let method = request.method.clone();
            let secrets = secrets.clone();
            async move {
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                let host = response.url().host_str().unwrap_or("").to_string();
                let path = response.url().path().to_string();
                let sse = SseContext {
                    method: method.clone(),
                    shown: shown.clone(),
                    limits,
                };
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
                        deadline: started.checked_add(limits.stream_deadline),
                        limits,
                        secrets: secrets.clone(),
                    },
                );
                Ok(HttpStream {
                    status,
                    headers,
                    body,
                    sse,
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
        let secrets = request.secrets();
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
                    let max = self.limits.max_error_body_bytes;
                    status_error(&method, &shown, response, timeout, attempt, started, max).await
                }
                Attempt::Failed(e) => e,
            }
            .scrubbed(&secrets);
            let duration_ms = started.elapsed().as_millis() as u64;
            match error.status() {
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
                    error = ?error.kind(),
                    message = %error.message(),
                    attempt,
                    duration_ms,
                    "http request exception"
                ),
            }
            let Some(delay) = self.retry_delay(&error, attempt, max_retries) else {
                let mut error = error;
                error.inner.attempts = attempt;
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
    pub(super) fn retry_delay(
        &self,
        error: &HttpError,
        attempt: u32,
        max_retries: u32,
    ) -> Option<Duration> {
        if attempt > max_retries {
            return None;
        }
        let retry = match error.kind() {
            HttpErrorKind::Status => {
                let forced = should_retry_header(error.headers());
                match forced {
                    Some(f) => f,
                    None => error.status().is_some_and(retryable_status),
                }
            }
            HttpErrorKind::Timeout | HttpErrorKind::Connection => true,
            HttpErrorKind::Body
            | HttpErrorKind::Decode
            | HttpErrorKind::Request
            | HttpErrorKind::TooLarge => false,
        };
        if !retry {
            return None;
        }
        match error.retry_after() {
            Some(wait) if wait > self.retry.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(self.retry.backoff(attempt)),
        }
    }
}

fn timeout_error(method: &Method, shown: &str, timeout: Duration, attempt: u32) -> HttpError {
    Inner {
        timeout: Some(timeout),
        attempts: attempt,
        ..Inner::new(
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
pub(super) fn error_chain(e: reqwest::Error) -> String {
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
    Inner {
        attempts: attempt,
        ..Inner::new(kind, method, shown, error_chain(e))
    }
    .into()
}

/// An error for a broken [`HttpLimits`] limit.
pub(super) fn limit_error(
    method: &Method,
    shown: &str,
    kind: HttpErrorKind,
    limit: &'static str,
    message: String,
    attempt: u32,
) -> HttpError {
    Inner {
        attempts: attempt,
        limit: Some(limit),
        ..Inner::new(kind, method, shown, message)
    }
    .into()
}

/// What reading a whole body came to.
enum Read {
    Done(Bytes),
    /// Over the limit: the declared length, or how much was read.
    Over {
        declared: Option<u64>,
        read: u64,
    },
    Failed(reqwest::Error),
}

/// Reads a body of at most `max` bytes; a larger declared length is refused unread.
async fn read_capped(mut response: reqwest::Response, max: u64) -> Read {
    let declared = response.content_length();
    if declared.is_some_and(|n| n > max) {
        return Read::Over { declared, read: 0 };
    }
    // Never trust a declared length for more than a first megabyte of room.
    let room = declared.unwrap_or(0).min(max).min(1 << 20);
    let mut body = BytesMut::with_capacity(usize::try_from(room).unwrap_or(0));
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let read = (body.len() as u64).saturating_add(chunk.len() as u64);
                if read > max {
                    return Read::Over {
                        declared: None,
                        read,
                    };
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Read::Done(body.freeze()),
            Err(e) => return Read::Failed(e),
        }
    }
}

/// The first `max` bytes of a body (the rest is never read), or what arrived before a failure.
async fn read_prefix(mut response: reqwest::Response, max: u64) -> Bytes {
    let mut body = BytesMut::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = usize::try_from(max.saturating_sub(body.len() as u64)).unwrap_or(usize::MAX);
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if chunk.len() >= room {
            break;
        }
    }
    body.freeze()
}

/// Reads the start of a non-2xx response's body (at most `max` bytes, bounded by the timeout)
/// into a status error.
async fn status_error(
    method: &Method,
    shown: &str,
    response: reqwest::Response,
    timeout: Duration,
    attempt: u32,
    started: Instant,
    max: u64,
) -> HttpError {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let retry_after = parse_retry_after(&headers);
    let left = timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_secs(1));
    let body = match tokio::time::timeout(left, read_prefix(response, max)).await {
        Ok(b) => clip(&String::from_utf8_lossy(&b), MAX_ERROR_CHARS),
        Err(_) => String::new(),
    };
    Inner {
        status: Some(status),
        headers,
        body,
        retry_after,
        attempts: attempt,
        ..Inner::new(
            HttpErrorKind::Status,
            method,
            shown,
            format!("HTTP {status}"),
        )
    }
    .into()
}
