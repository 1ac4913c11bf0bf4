//! Mock model providers: real HTTP servers on 127.0.0.1 that speak the providers' wire formats.
//!
//! A [`MockServer`] answers each request with the next [`MockResponse`] of its queue (a JSON
//! body, a server-sent-event stream, an error with the provider's real body and headers, a
//! connection dropped mid-stream, or no answer at all) and records every request for
//! assertions. [`MockOpenAi`] and [`MockAnthropic`] wrap it with the provider's base URL and
//! ready models; [`openai`] and [`anthropic`] build the provider's real JSON and SSE shapes;
//! [`fixtures`] holds recorded-shape traffic of OpenAI, Anthropic, the Responses API and seven
//! compatible servers, replayed byte for byte ([`MockResponse::event_stream`]).
//!
//! ```no_run
//! use kit::model::{ChatModel, ModelRequest};
//! use kit::Message;
//! use kit_testing::mock::{MockOpenAi, openai};
//!
//! # async fn demo() -> std::io::Result<()> {
//! let server = MockOpenAi::start().await?;
//! server.enqueue(openai::json(openai::completion("Hello!")));
//! let answer = server.model("gpt-4o-mini").generate(&ModelRequest::new(vec![Message::user("Hi")])).await;
//! assert_eq!(answer.map(|a| a.message.text()).ok().as_deref(), Some("Hello!"));
//! assert_eq!(server.requests()[0].body["messages"][0]["content"], "Hi");
//! # Ok(()) }
//! ```

pub mod anthropic;
pub mod fixtures;
pub mod openai;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;

pub use anthropic::MockAnthropic;
pub use openai::MockOpenAi;

/// One server-sent event as written on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseFrame {
    /// The `event:` line, if any.
    pub event: Option<String>,
    /// The `data:` payload (one line).
    pub data: String,
}

impl SseFrame {
    /// A frame with only `data:` (OpenAI's style).
    pub fn data(data: impl Into<String>) -> Self {
        SseFrame {
            event: None,
            data: data.into(),
        }
    }

    /// A frame with `event:` and `data:` (Anthropic's style).
    pub fn event(event: impl Into<String>, data: impl Into<String>) -> Self {
        SseFrame {
            event: Some(event.into()),
            data: data.into(),
        }
    }

    /// The bytes on the wire, ending with the blank line.
    pub fn encode(&self) -> String {
        match &self.event {
            Some(e) => format!("event: {e}\ndata: {}\n\n", self.data),
            None => format!("data: {}\n\n", self.data),
        }
    }
}

/// How an event stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The body ends normally.
    Close,
    /// The connection breaks (the chunked body never terminates properly).
    Drop,
    /// The server keeps the connection open and says nothing more.
    Hang,
}

#[derive(Debug, Clone)]
enum MockBody {
    Bytes(Vec<u8>),
    Sse {
        frames: Vec<SseFrame>,
        end: StreamEnd,
        fragmented: bool,
    },
    /// An event stream written byte for byte, one network chunk per event.
    Raw {
        pieces: Vec<Vec<u8>>,
        end: StreamEnd,
    },
    Hang,
}

/// A scripted answer.
#[derive(Debug, Clone)]
pub struct MockResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: MockBody,
}

impl MockResponse {
    /// A JSON body with this status.
    pub fn json(status: u16, body: &Value) -> Self {
        MockResponse {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: MockBody::Bytes(body.to_string().into_bytes()),
        }
    }

    /// A raw body with this status and content type.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        MockResponse {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: MockBody::Bytes(body.into()),
        }
    }

    /// A `200 text/event-stream` answer sending these frames, each as its own body chunk.
    pub fn sse(frames: impl IntoIterator<Item = SseFrame>) -> Self {
        MockResponse {
            status: 200,
            headers: vec![
                (
                    "content-type".into(),
                    "text/event-stream; charset=utf-8".into(),
                ),
                ("cache-control".into(), "no-cache".into()),
            ],
            body: MockBody::Sse {
                frames: frames.into_iter().collect(),
                end: StreamEnd::Close,
                fragmented: false,
            },
        }
    }

    /// A `200 text/event-stream` answer sending `body` byte for byte (comments, `event:`
    /// lines, blank `data:`, trailing whitespace and all), each event — up to and including
    /// its blank line — as its own body chunk. This is how recorded traffic is replayed.
    pub fn event_stream(body: &str) -> Self {
        let mut pieces = Vec::new();
        let mut rest = body;
        while !rest.is_empty() {
            let end = rest.find("\n\n").map_or(rest.len(), |i| i + 2);
            let (piece, tail) = rest.split_at(end);
            pieces.push(piece.as_bytes().to_vec());
            rest = tail;
        }
        MockResponse {
            status: 200,
            headers: vec![
                (
                    "content-type".into(),
                    "text/event-stream; charset=utf-8".into(),
                ),
                ("cache-control".into(), "no-cache".into()),
            ],
            body: MockBody::Raw {
                pieces,
                end: StreamEnd::Close,
            },
        }
    }

    /// Sets the status (builder style).
    #[must_use]
    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// No answer: the server reads the request and never responds (for timeouts).
    pub fn hang() -> Self {
        MockResponse {
            status: 200,
            headers: Vec::new(),
            body: MockBody::Hang,
        }
    }

    /// Adds a response header.
    #[must_use]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// For an event stream: how it ends after its frames.
    #[must_use]
    pub fn end(mut self, how: StreamEnd) -> Self {
        if let MockBody::Sse { end, .. } | MockBody::Raw { end, .. } = &mut self.body {
            *end = how;
        }
        self
    }

    /// For an event stream: breaks the connection after the frames.
    #[must_use]
    pub fn then_drop(self) -> Self {
        self.end(StreamEnd::Drop)
    }

    /// For an event stream: sends every frame in two body chunks split mid-line, so clients
    /// must reassemble lines across network reads.
    #[must_use]
    pub fn fragmented(mut self) -> Self {
        if let MockBody::Sse { fragmented, .. } = &mut self.body {
            *fragmented = true;
        }
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// The method (`POST`).
    pub method: String,
    /// The path (`/v1/chat/completions`).
    pub path: String,
    /// The query string, if any.
    pub query: Option<String>,
    /// The headers, names lowercase, in order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// The body as text.
    pub body_text: String,
}

impl RecordedRequest {
    /// The first value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Shared {
    queue: Mutex<VecDeque<MockResponse>>,
    requests: Mutex<Vec<RecordedRequest>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An HTTP server on 127.0.0.1 that replays queued responses and records requests. It stops
/// when dropped.
pub struct MockServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for MockServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockServer")
            .field("addr", &self.addr)
            .field("pending", &self.pending())
            .finish()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    /// Starts a server on a free port of 127.0.0.1.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            // The server runs until the MockServer is dropped (which aborts this task).
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockServer { addr, shared, task })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues the answer to the next unanswered request.
    pub fn enqueue(&self, response: MockResponse) {
        lock(&self.shared.queue).push_back(response);
    }

    /// Queues several answers, in order.
    pub fn enqueue_all(&self, responses: impl IntoIterator<Item = MockResponse>) {
        lock(&self.shared.queue).extend(responses);
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// How many requests were received.
    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// Answers queued but not served yet.
    pub fn pending(&self) -> usize {
        lock(&self.shared.queue).len()
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    let body_text = String::from_utf8_lossy(&bytes).into_owned();
    lock(&shared.requests).push(RecordedRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        body_text,
    });
    let next = lock(&shared.queue).pop_front();
    match next {
        Some(response) => respond(response).await,
        None => respond(MockResponse::json(
            418,
            &serde_json::json!({"error": {
                "message": "the mock server has no response queued for this request; enqueue one",
                "type": "mock_error", "param": null, "code": null,
            }}),
        ))
        .await,
    }
}

async fn respond(mock: MockResponse) -> Response {
    let body = match mock.body {
        MockBody::Hang => return std::future::pending::<Response>().await,
        MockBody::Bytes(b) => Body::from(b),
        MockBody::Raw { pieces, end } => {
            piecewise(pieces.into_iter().map(Bytes::from).collect(), end)
        }
        MockBody::Sse {
            frames,
            end,
            fragmented,
        } => {
            let mut pieces: Vec<Bytes> = Vec::new();
            for frame in &frames {
                let text = frame.encode().into_bytes();
                if fragmented && text.len() > 2 {
                    let mid = text.len() / 2;
                    pieces.push(Bytes::copy_from_slice(&text[..mid]));
                    pieces.push(Bytes::copy_from_slice(&text[mid..]));
                } else {
                    pieces.push(Bytes::from(text));
                }
            }
            piecewise(pieces, end)
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(mock.status).unwrap_or(StatusCode::OK);
    for (name, value) in &mock.headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(n, v);
        }
    }
    response
}

/// A body sent piece by piece (each its own network write), ending as `end` says.
fn piecewise(pieces: Vec<Bytes>, end: StreamEnd) -> Body {
    let stream = futures::stream::unfold(
        (pieces.into_iter(), end, false),
        |(mut it, end, finished)| async move {
            if finished {
                return None;
            }
            // Let each piece go out on its own (and be flushed before a drop).
            tokio::time::sleep(Duration::from_millis(1)).await;
            match it.next() {
                Some(piece) => Some((Ok::<Bytes, std::io::Error>(piece), (it, end, false))),
                None => match end {
                    StreamEnd::Close => None,
                    StreamEnd::Drop => Some((
                        Err(std::io::Error::new(
                            std::io::ErrorKind::ConnectionAborted,
                            "mock server dropped the connection",
                        )),
                        (it, end, true),
                    )),
                    StreamEnd::Hang => {
                        std::future::pending::<()>().await;
                        None
                    }
                },
            }
        },
    );
    Body::from_stream(stream)
}
