//! Unit tests of the HTTP layer.

use std::time::{Duration, SystemTime};

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
    e.inner.status = Some(400);
    assert_eq!(c.retry_delay(&e, 1, 2), None, "4xx is not retried");
    e.inner.status = Some(529);
    assert!(c.retry_delay(&e, 1, 2).is_some());
    assert_eq!(c.retry_delay(&e, 3, 2), None, "retries exhausted");
    e.inner.status = Some(429);
    e.inner.retry_after = Some(Duration::from_secs(3));
    assert_eq!(c.retry_delay(&e, 1, 2), Some(Duration::from_secs(3)));
    e.inner.retry_after = Some(Duration::from_secs(3600));
    assert_eq!(
        c.retry_delay(&e, 1, 2),
        None,
        "too long a wait is left to the caller"
    );
    e.inner.retry_after = None;
    e.inner
        .headers
        .insert("x-should-retry", HeaderValue::from_static("false"));
    assert_eq!(c.retry_delay(&e, 1, 2), None);
    e.inner.status = Some(409);
    e.inner
        .headers
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
