//! The shared HTTP layer against a real server on 127.0.0.1: retries (and what is never
//! retried), Retry-After, timeouts, broken streams, and secrets kept out of the logs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kit::http::{HttpClient, HttpErrorKind, HttpRequest, RetryPolicy};
use kit_testing::mock::{MockResponse, MockServer, SseFrame, StreamEnd};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// Records every event and span field, as text and as maps, at every level.
#[derive(Clone, Default)]
struct Capture {
    events: Arc<Mutex<Vec<BTreeMap<String, String>>>>,
    text: Arc<Mutex<String>>,
    next: Arc<AtomicU64>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl Capture {
    fn keep(&self, target: &str, fields: BTreeMap<String, String>) {
        let mut text = self.text.lock().unwrap();
        let _ = writeln!(text, "{target} {fields:?}");
        self.events.lock().unwrap().push(fields);
    }

    fn events_with(&self, phase: &str) -> Vec<BTreeMap<String, String>> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.get("phase").map(String::as_str) == Some(phase))
            .cloned()
            .collect()
    }
}

impl Subscriber for Capture {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.keep(attrs.metadata().target(), fields);
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        let mut fields = BTreeMap::new();
        values.record(&mut Fields(&mut fields));
        self.keep("record", fields);
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.keep(event.metadata().target(), fields);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn client() -> HttpClient {
    HttpClient::new().retry_policy(RetryPolicy {
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
        ..RetryPolicy::default()
    })
}

fn ok() -> MockResponse {
    MockResponse::json(200, &json!({"ok": true}))
}

#[tokio::test]
async fn server_errors_are_retried_then_succeed() {
    let server = MockServer::start().await.unwrap();
    server.enqueue_all([
        MockResponse::json(500, &json!({"error": "boom"})),
        MockResponse::json(503, &json!({"error": "busy"})),
        ok(),
    ]);
    let response = client()
        .send(HttpRequest::post(&format!("{}/x", server.url())).json(&json!({"n": 1})))
        .await
        .unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(response.json::<serde_json::Value>().unwrap()["ok"], true);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests.iter().all(|r| r.body == json!({"n": 1})),
        "the body is resent"
    );
}

#[tokio::test]
async fn retries_end_with_the_last_status_and_body() {
    let server = MockServer::start().await.unwrap();
    for _ in 0..3 {
        server.enqueue(MockResponse::json(500, &json!({"error": "still broken"})));
    }
    let err = client()
        .send(HttpRequest::post(&server.url()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), HttpErrorKind::Status);
    assert_eq!((err.status(), err.attempts()), (Some(500), 3));
    assert!(err.body().contains("still broken"));
    let text = err.to_string();
    assert!(text.contains("HTTP 500 (after 3 attempts)"), "{text}");
    assert!(text.contains("try again later"), "{text}");
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn other_client_errors_are_never_retried() {
    for status in [400, 401, 403, 404, 422] {
        let server = MockServer::start().await.unwrap();
        server.enqueue_all([MockResponse::json(status, &json!({"error": "no"})), ok()]);
        let err = client()
            .send(HttpRequest::get(&server.url()))
            .await
            .unwrap_err();
        assert_eq!(err.status(), Some(status));
        assert_eq!(
            server.request_count(),
            1,
            "HTTP {status} must not be retried"
        );
    }
}

#[tokio::test]
async fn retry_after_is_honoured_exactly() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = MockServer::start().await.unwrap();
    server.enqueue_all([
        MockResponse::json(429, &json!({"error": "slow down"})).header("retry-after", "1"),
        ok(),
    ]);
    client()
        .send(HttpRequest::post(&server.url()))
        .await
        .unwrap();
    assert_eq!(server.request_count(), 2);
    let retries = capture.events_with("retry");
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(
        retries[0]["delay_ms"], "1000",
        "the wait is the server's, not the backoff"
    );
    assert!(retries[0]["reason"].contains("429"), "{retries:?}");
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honoured() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = MockServer::start().await.unwrap();
    let at = std::time::SystemTime::now() + Duration::from_secs(2);
    server.enqueue_all([
        MockResponse::json(503, &json!({})).header("retry-after", &httpdate::fmt_http_date(at)),
        ok(),
    ]);
    client()
        .send(HttpRequest::post(&server.url()))
        .await
        .unwrap();
    let retries = capture.events_with("retry");
    assert!(
        retries[0]["reason"].contains("server asked to wait"),
        "{retries:?}"
    );
}

#[tokio::test]
async fn a_retry_after_too_long_is_returned_not_waited_for() {
    let server = MockServer::start().await.unwrap();
    server.enqueue_all([
        MockResponse::json(429, &json!({})).header("retry-after", "3600"),
        ok(),
    ]);
    let err = client()
        .send(HttpRequest::post(&server.url()))
        .await
        .unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(3600)));
    assert!(err.to_string().contains("retry after 3600.0s"), "{err}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn connection_failures_are_retried_then_reported() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    drop(listener); // nothing listens there any more
    let err = client().send(HttpRequest::get(&url)).await.unwrap_err();
    assert_eq!(err.kind(), HttpErrorKind::Connection);
    assert_eq!(err.attempts(), 3);
    assert!(
        err.to_string().contains("check the URL and the network"),
        "{err}"
    );
}

#[tokio::test]
async fn no_answer_is_a_timeout_and_is_retried() {
    let server = MockServer::start().await.unwrap();
    server.enqueue_all([MockResponse::hang(), MockResponse::hang()]);
    let err = client()
        .send(
            HttpRequest::post(&server.url())
                .timeout(Duration::from_millis(200))
                .max_retries(1),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), HttpErrorKind::Timeout);
    assert_eq!(err.timeout(), Some(Duration::from_millis(200)));
    assert_eq!(server.request_count(), 2);
    assert!(err.to_string().contains("raise the timeout"), "{err}");
}

#[tokio::test]
async fn a_stream_is_not_retried_once_its_body_started() {
    let server = MockServer::start().await.unwrap();
    server.enqueue_all([
        MockResponse::json(502, &json!({})),
        MockResponse::sse([SseFrame::data("one"), SseFrame::data("two")]).then_drop(),
        ok(),
    ]);
    let stream = client()
        .send_stream(HttpRequest::post(&server.url()))
        .await
        .unwrap();
    let mut events = stream.sse();
    assert_eq!(events.next().await.unwrap().unwrap().data, "one");
    assert_eq!(events.next().await.unwrap().unwrap().data, "two");
    let err = events.next().await.unwrap().unwrap_err();
    assert_eq!(err.kind(), HttpErrorKind::Body);
    assert!(err.to_string().contains("broke off mid-stream"), "{err}");
    assert!(events.next().await.is_none());
    assert_eq!(
        server.request_count(),
        2,
        "502 retried; the broken stream not"
    );
}

#[tokio::test]
async fn a_silent_stream_times_out() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::sse([SseFrame::data("hello")]).end(StreamEnd::Hang));
    let stream = client()
        .send_stream(HttpRequest::post(&server.url()).timeout(Duration::from_millis(300)))
        .await
        .unwrap();
    let mut events = stream.sse();
    assert_eq!(events.next().await.unwrap().unwrap().data, "hello");
    let err = events.next().await.unwrap().unwrap_err();
    assert_eq!(err.kind(), HttpErrorKind::Timeout);
}

#[tokio::test]
async fn keys_never_reach_the_logs_or_errors() {
    const SECRETS: [&str; 5] = [
        "sk-bearer-SECRET-1111",
        "sk-ant-header-SECRET-2222",
        "azure-SECRET-3333",
        "query-SECRET-4444",
        "token-SECRET-5555",
    ];
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = MockServer::start().await.unwrap();
    server.enqueue_all([
        MockResponse::json(401, &json!({"error": {"message": "bad key"}})),
        MockResponse::json(500, &json!({})),
        ok(),
        MockResponse::sse([SseFrame::data("x")]).then_drop(),
    ]);
    let request = || {
        HttpRequest::post(&format!(
            "{}/v1/chat?api-version=2024-10-21&key={}&access_token={}",
            server.url(),
            SECRETS[3],
            SECRETS[4]
        ))
        .bearer_auth(SECRETS[0])
        .header("x-api-key", SECRETS[1])
        .header("api-key", SECRETS[2])
        .json(&json!({"q": 1}))
    };
    let c = client();
    let unauthorized = c.send(request()).await.unwrap_err();
    c.send(request()).await.unwrap();
    let mut body = c.send_stream(request()).await.unwrap().body;
    let mut broken = None;
    while let Some(item) = body.next().await {
        if let Err(e) = item {
            broken = Some(e);
        }
    }
    let broken = broken.unwrap();

    // The server got the real credentials...
    let got = &server.requests()[0];
    assert_eq!(
        got.header("authorization"),
        Some(format!("Bearer {}", SECRETS[0]).as_str())
    );
    assert_eq!(got.header("x-api-key"), Some(SECRETS[1]));
    assert!(got.query.as_deref().unwrap().contains(SECRETS[3]));

    // ...and nothing kit logged or reported contains any of them.
    let logged = capture.text.lock().unwrap().clone();
    let reported = format!(
        "{unauthorized} {unauthorized:?} {broken} {broken:?} {:?}",
        request()
    );
    for secret in SECRETS {
        assert!(
            !logged.contains(secret),
            "`{secret}` leaked into the logs:\n{logged}"
        );
        assert!(
            !reported.contains(secret),
            "`{secret}` leaked into an error: {reported}"
        );
    }
    // The logs are there, with what they promise.
    let stops = capture.events_with("stop");
    assert!(!stops.is_empty(), "{logged}");
    let first = &stops[0];
    assert_eq!(first["method"], "POST");
    assert_eq!(first["host"], "127.0.0.1");
    assert_eq!(first["path"], "/v1/chat");
    assert_eq!(first["status"], "401");
    assert!(first.contains_key("duration_ms") && first.contains_key("attempt"));
    assert!(logged.contains("api-version=2024-10-21"), "{logged}");
    assert!(logged.contains("key=[REDACTED]"), "{logged}");
    assert_eq!(capture.events_with("body_exception").len(), 1, "{logged}");
}
