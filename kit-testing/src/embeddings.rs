//! A mock OpenAI embeddings server: a real HTTP server on 127.0.0.1 speaking
//! `POST /v1/embeddings`, for testing semantic search without paying for vectors.
//!
//! It checks requests as the API does (a `model`, an `input` that is a string or a list of
//! strings, `encoding_format` `float`, an optional positive `dimensions`, the bearer key when
//! one is required) and answers errors in the API's error body. Vectors are deterministic:
//! `kit::testing::HashEmbedder`'s, so texts sharing words are close. It records
//! every request, can fail the next requests with a status and body of your choice, and can
//! answer the vectors in reverse `index` order, as a server is free to.
//!
//! ```
//! use kit_testing::embeddings::MockEmbeddings;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = MockEmbeddings::start(8).await?;
//! let answer: serde_json::Value = reqwest::Client::new()
//!     .post(format!("{}/embeddings", server.base_url()))
//!     .json(&json!({"model": "text-embedding-3-small", "input": ["tea", "coffee"]}))
//!     .send()
//!     .await?
//!     .json()
//!     .await?;
//! assert_eq!(answer["data"][1]["index"], 1);
//! assert_eq!(answer["data"][0]["embedding"].as_array().map(Vec::len), Some(8));
//! assert_eq!(server.requests()[0].body["input"][0], "tea");
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use kit::testing::HashEmbedder;
use serde_json::{Value, json};

/// One request the server received.
#[derive(Debug, Clone)]
pub struct EmbeddingsRequest {
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    /// The body, parsed (`Value::Null` when it was not JSON).
    pub body: Value,
}

#[derive(Default)]
struct Shared {
    requests: Vec<EmbeddingsRequest>,
    failures: VecDeque<(u16, Value)>,
    reverse: bool,
    key: Option<String>,
}

/// The mock server; it stops when dropped.
pub struct MockEmbeddings {
    addr: SocketAddr,
    dims: usize,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockEmbeddings {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockEmbeddings {
    /// Starts a server answering vectors of `dims` dimensions (unless a request asks for
    /// `dimensions`).
    pub async fn start(dims: usize) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Mutex::new(Shared::default()));
        let app = axum::Router::new()
            .route("/v1/embeddings", axum::routing::post(embeddings))
            .with_state((shared.clone(), dims.max(1)));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockEmbeddings {
            addr,
            dims: dims.max(1),
            shared,
            task,
        })
    }

    /// The API base URL, up to and including `/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The dimensions of the vectors answered by default.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<EmbeddingsRequest> {
        self.lock().requests.clone()
    }

    /// Answers 401 (with the API's error body) unless the request carries `Bearer <key>`.
    pub fn require_key(&self, key: impl Into<String>) {
        self.lock().key = Some(key.into());
    }

    /// The next request is answered with this status and JSON body (queued in order).
    pub fn fail_next(&self, status: u16, body: Value) {
        self.lock().failures.push_back((status, body));
    }

    /// Answers the vectors in reverse `index` order (default: in order).
    pub fn reverse_order(&self, on: bool) {
        self.lock().reverse = on;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The API's error body.
pub fn error_body(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

fn answer(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}

fn bad_request(message: &str) -> Response {
    answer(400, error_body(message, "invalid_request_error", None))
}

async fn embeddings(
    State((shared, dims)): State<(Arc<Mutex<Shared>>, usize)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (failure, reverse, key) = {
        let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
        s.requests.push(EmbeddingsRequest {
            authorization: authorization.clone(),
            body: parsed.clone(),
        });
        (s.failures.pop_front(), s.reverse, s.key.clone())
    };
    if let Some((status, body)) = failure {
        return answer(status, body);
    }
    if let Some(key) = key
        && authorization.as_deref() != Some(&format!("Bearer {key}"))
    {
        return answer(
            401,
            error_body(
                "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                Some("invalid_api_key"),
            ),
        );
    }
    if parsed.is_null() {
        return bad_request("We could not parse the JSON body of your request.");
    }
    let Some(model) = parsed.get("model").and_then(Value::as_str) else {
        return bad_request("you must provide a model parameter");
    };
    let texts: Vec<String> = match parsed.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) if !items.is_empty() => {
            match items.iter().map(|v| v.as_str().map(String::from)).collect() {
                Some(texts) => texts,
                None => return bad_request("'input' must be a string or an array of strings"),
            }
        }
        _ => return bad_request("'input' is a required property"),
    };
    match parsed.get("encoding_format").and_then(Value::as_str) {
        None | Some("float") => {}
        Some(other) => {
            return bad_request(&format!(
                "encoding_format '{other}' is not supported by this mock; use 'float'"
            ));
        }
    }
    let dims = match parsed.get("dimensions") {
        None => dims,
        Some(d) => match d.as_u64().filter(|d| *d > 0) {
            Some(d) => d as usize,
            None => return bad_request("'dimensions' must be a positive integer"),
        },
    };
    let embedder = HashEmbedder::new(dims);
    let mut data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": embedder.vector(t)}))
        .collect();
    if reverse {
        data.reverse();
    }
    let tokens: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    answer(
        200,
        json!({
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }),
    )
}
