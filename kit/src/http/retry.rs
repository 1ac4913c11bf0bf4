//! When and how long to wait before trying a request again.

use std::time::{Duration, SystemTime};

use super::{HeaderMap, HttpError, HttpErrorKind};

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

pub(super) fn retry_reason(error: &HttpError) -> String {
    match (error.kind(), error.status()) {
        (HttpErrorKind::Status, Some(s)) if error.retry_after().is_some() => {
            format!("HTTP {s}, server asked to wait")
        }
        (HttpErrorKind::Status, Some(s)) => format!("HTTP {s}"),
        (HttpErrorKind::Timeout, _) => "timeout".to_string(),
        _ => "connection failed".to_string(),
    }
}

/// The `x-should-retry` header, when the server sent one.
pub(super) fn should_retry_header(headers: &HeaderMap) -> Option<bool> {
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
    {
        return seconds(ms / 1000.0);
    }
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    retry_after_value(value, SystemTime::now())
}

/// The longest wait kit takes from a peer's header. A larger (or absurd: `1e300`, a 30-digit
/// number) value is capped here; whether to wait that long is then the caller's choice
/// ([`RetryPolicy::max_retry_after`]).
pub const MAX_PEER_DELAY: Duration = Duration::from_secs(24 * 60 * 60);

/// One `Retry-After` value: delta-seconds (whole or decimal) or an HTTP-date relative to `now`,
/// capped at [`MAX_PEER_DELAY`]; `None` for anything else (negative, not a number, not a date).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use kit::http::{MAX_PEER_DELAY, retry_after_value};
///
/// let now = SystemTime::now();
/// assert_eq!(retry_after_value("3", now), Some(Duration::from_secs(3)));
/// assert_eq!(retry_after_value("1e300", now), Some(MAX_PEER_DELAY));
/// assert_eq!(retry_after_value("999999999999999999999999999999", now), Some(MAX_PEER_DELAY));
/// assert_eq!(retry_after_value("-1", now), None);
/// ```
pub fn retry_after_value(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return seconds(secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_PEER_DELAY),
    )
}

/// A peer's number of seconds as a wait: non-negative, capped (a number too large for an
/// `f64` — 400 digits, `1e400` — is as long as any other huge number: the cap).
fn seconds(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    // `-0.0` and `0.0` alike are no wait.
    let capped = if secs > 0.0 {
        secs.min(MAX_PEER_DELAY.as_secs_f64())
    } else {
        0.0
    };
    Duration::try_from_secs_f64(capped).ok()
}
