//! The client side of the run protocol.

use std::time::Duration;

use serde_json::{Value, json};

use super::Endpoint;
use crate::http::{HttpClient, HttpError, HttpErrorKind, HttpRequest, Method};
use crate::json::{MAX_KEPT_DEPTH, nests_within};

/// Talking to a worker failed. The message says what happened and what to check; the task
/// record is kept either way.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RunClientError {
    /// The worker could not be reached (refused, reset, DNS, TLS).
    #[error("could not reach the worker at {url}: {message}")]
    Transport {
        /// The URL tried.
        url: String,
        /// What failed.
        message: String,
    },
    /// The worker did not answer in time.
    #[error("the worker at {url} did not answer within {after:?}")]
    Timeout {
        /// The URL tried.
        url: String,
        /// The timeout.
        after: Duration,
    },
    /// The worker refused the credentials.
    #[error(
        "the worker at {url} refused the credentials (HTTP {status}): {body}; check the \
         `headers` of this async subagent (e.g. Authorization)"
    )]
    Unauthorized {
        /// The URL tried.
        url: String,
        /// 401 or 403.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The worker answered with an error status.
    #[error("the worker at {url} answered HTTP {status}: {body}")]
    Status {
        /// The URL tried.
        url: String,
        /// The status.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The worker's answer is not the JSON object the protocol promises.
    #[error("the worker at {url} sent a malformed answer: {message}")]
    Malformed {
        /// The URL tried.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// The spec has neither a `url` nor a `client`, so there is no worker to reach.
    #[error(
        "async subagent `{0}` has no `url` or `client`, so no worker can be reached; its task is \
         only recorded locally"
    )]
    NoWorker(String),
    /// Anything else a custom client wants to report.
    #[error("{0}")]
    Other(String),
}

/// How a supervisor reaches the worker of an async subagent. Implement it for transports other
/// than HTTP (a queue, an in-process pool, a test double).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a run client",
    label = "not a `RunClient`",
    note = "an async subagent's `client` implements `kit::protocol::RunClient`; `HttpRunClient` \
            speaks the run protocol over HTTP (the default when the spec has a `url`)"
)]
#[async_trait::async_trait]
pub trait RunClient: Send + Sync + 'static {
    /// Starts a run; `payload` is `{"assistant_id", "input": {"messages": [..]}}`.
    async fn start(&self, endpoint: &Endpoint, payload: Value) -> Result<Value, RunClientError>;
    /// Fetches a run (status, result, values.messages).
    async fn check(&self, endpoint: &Endpoint, task_id: &str) -> Result<Value, RunClientError>;
    /// Sends a follow-up message to a run.
    async fn update(
        &self,
        endpoint: &Endpoint,
        task_id: &str,
        message: &str,
    ) -> Result<Value, RunClientError>;
    /// Cancels a run.
    async fn cancel(&self, endpoint: &Endpoint, task_id: &str) -> Result<Value, RunClientError>;

    /// Waits, without polling, until run `run_id` of task `task_id` ends or pauses for a
    /// human, and says how. `None` when this client cannot (the default): the supervisor's
    /// tools then poll with [`check`](Self::check).
    async fn follow(
        &self,
        endpoint: &Endpoint,
        task_id: &str,
        run_id: &str,
    ) -> Option<Result<super::RunOutcome, RunClientError>> {
        let _ = (endpoint, task_id, run_id);
        None
    }
}

/// The built-in HTTP client of the run protocol (spec §4.1), on [`kit::http`](crate::http):
/// the shared connection pool, `kit::http` tracing events, and retries with backoff for the
/// requests that are safe to repeat. Sends the spec's `headers` on every request; times out
/// after 30 s by default.
///
/// Reading a run (`check`) and cancelling it are retried on 408, 429, 5xx, timeouts and
/// connection failures; starting a run and sending it a message are sent once, so a worker
/// that was slow to answer never gets a duplicate run or a repeated message. With retries an
/// unreachable worker takes up to (retries + 1) × timeout plus backoff to report; lower
/// both with [`with_http`](Self::with_http) when a tool call must fail fast.
///
/// ```
/// use std::time::Duration;
/// use kit::http::HttpClient;
/// use kit::protocol::HttpRunClient;
///
/// let client = HttpRunClient::with_http(
///     HttpClient::new().timeout(Duration::from_secs(5)).max_retries(4),
/// );
/// # let _ = client;
/// ```
#[derive(Debug, Clone)]
pub struct HttpRunClient {
    http: HttpClient,
}

impl Default for HttpRunClient {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether a request may be sent again after a failure that left its effect unknown.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Repeat {
    Safe,
    Once,
}

impl HttpRunClient {
    /// A client with a 30 second timeout and the default [`RetryPolicy`](crate::http::RetryPolicy).
    pub fn new() -> Self {
        Self::with_timeout(Duration::from_secs(30))
    }

    /// A client with the given per-request timeout.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self::with_http(HttpClient::new().timeout(timeout))
    }

    /// A client on this [`HttpClient`]: its timeout, retry policy and `reqwest::Client`
    /// (proxies, TLS roots).
    pub fn with_http(http: HttpClient) -> Self {
        HttpRunClient { http }
    }

    /// The HTTP client underneath.
    pub(super) fn http(&self) -> &HttpClient {
        &self.http
    }

    fn url(endpoint: &Endpoint, path: &str) -> Result<String, RunClientError> {
        let base = endpoint
            .url
            .as_deref()
            .ok_or_else(|| RunClientError::NoWorker(endpoint.name.clone()))?;
        Ok(format!("{}{path}", base.trim_end_matches('/')))
    }

    async fn send(
        &self,
        endpoint: &Endpoint,
        method: Method,
        path: &str,
        body: Option<Value>,
        repeat: Repeat,
    ) -> Result<Value, RunClientError> {
        let url = Self::url(endpoint, path)?;
        let mut request = HttpRequest::new(method, &url);
        for (k, v) in &endpoint.headers {
            request = request.header(k, v);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        if repeat == Repeat::Once {
            request = request.max_retries(0);
        }
        // Errors name the URL without its password, and never repeat a credential the worker
        // echoed back.
        let shown = request.shown_url();
        let mut secrets = request.secrets();
        secrets.extend(&endpoint.secrets());
        let result = self.answer(request, shown).await;
        result.map_err(|e| e.scrubbed(&secrets))
    }

    async fn answer(&self, request: HttpRequest, url: String) -> Result<Value, RunClientError> {
        let response = self
            .http
            .send(request)
            .await
            .map_err(|e| run_error(&url, &e))?;
        let text = response.text();
        if text.trim().is_empty() {
            // 204 from a cancel: report what happened.
            return Ok(json!({}));
        }
        if !crate::json::containers_within(text.as_bytes(), crate::json::MAX_ANSWER_CONTAINERS) {
            return Err(RunClientError::Malformed {
                url,
                message: too_many_containers(),
            });
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(v @ Value::Object(_)) if nests_within(&v, MAX_KEPT_DEPTH) => Ok(v),
            Ok(Value::Object(_)) => Err(RunClientError::Malformed {
                url,
                message: too_deep(),
            }),
            Ok(other) => Err(RunClientError::Malformed {
                url,
                message: format!("expected a JSON object, got {}", clip(&other.to_string())),
            }),
            Err(e) => Err(RunClientError::Malformed {
                url,
                message: format!("{e}; body starts with {:?}", clip(&text)),
            }),
        }
    }
}

/// Why an answer of more than [`MAX_ANSWER_CONTAINERS`](crate::json::MAX_ANSWER_CONTAINERS)
/// objects and arrays is refused (parsed, it would take some 90 times its bytes).
pub(crate) fn too_many_containers() -> String {
    format!(
        "the answer holds more than {} JSON objects and arrays; it was not read",
        crate::json::MAX_ANSWER_CONTAINERS
    )
}

/// Why an answer nesting deeper than [`MAX_KEPT_DEPTH`] is refused (it is kept in the
/// supervisor's thread, in an async task's record).
pub(crate) fn too_deep() -> String {
    format!(
        "the answer nests more than {MAX_KEPT_DEPTH} levels deep, deeper than kit can keep in \
         a thread; is this a kit worker?"
    )
}

impl RunClientError {
    /// Removes `secrets` from every text of the error (see
    /// [`Secrets::scrub`](crate::http::Secrets::scrub)).
    pub fn scrub(&mut self, secrets: &crate::http::Secrets) {
        match self {
            RunClientError::Transport { url, message }
            | RunClientError::Malformed { url, message } => {
                secrets.scrub_in_place(url);
                secrets.scrub_in_place(message);
            }
            RunClientError::Timeout { url, .. } => secrets.scrub_in_place(url),
            RunClientError::Unauthorized { url, body, .. }
            | RunClientError::Status { url, body, .. } => {
                secrets.scrub_in_place(url);
                secrets.scrub_in_place(body);
            }
            RunClientError::NoWorker(text) | RunClientError::Other(text) => {
                secrets.scrub_in_place(text);
            }
        }
    }

    /// This error with `secrets` scrubbed (see [`scrub`](Self::scrub)).
    #[must_use]
    pub fn scrubbed(mut self, secrets: &crate::http::Secrets) -> Self {
        self.scrub(secrets);
        self
    }
}

/// The run-protocol error for a failed request.
pub(super) fn run_error(url: &str, e: &HttpError) -> RunClientError {
    let url = url.to_string();
    match (e.kind(), e.status()) {
        (HttpErrorKind::Status, Some(status @ (401 | 403))) => RunClientError::Unauthorized {
            url,
            status,
            body: clip(e.body()),
        },
        (HttpErrorKind::Status, Some(status)) => RunClientError::Status {
            url,
            status,
            body: clip(e.body()),
        },
        (HttpErrorKind::Timeout, _) => RunClientError::Timeout {
            url,
            after: e.timeout().unwrap_or_default(),
        },
        (HttpErrorKind::Request, _) => RunClientError::Other(e.to_string()),
        _ => RunClientError::Transport {
            url,
            message: e.message().to_string(),
        },
    }
}

fn clip(s: &str) -> String {
    crate::text::clip(s.trim(), 300)
}

/// A task id as one path segment. Ids come from workers: every byte but the unreserved ones
/// (`A-Z a-z 0-9 - . _ ~`) is percent-encoded, so `/`, `\`, `?`, `#` and `%` can never leave
/// the run's path, and the dot segments `.` and `..` (which a URL resolves even
/// percent-encoded) are refused.
///
/// ```
/// use kit::protocol::task_path_segment;
/// assert_eq!(task_path_segment("run-1").unwrap(), "run-1");
/// assert_eq!(task_path_segment(r"..\..\admin").unwrap(), "..%5C..%5Cadmin");
/// assert_eq!(task_path_segment("a/b?c#d").unwrap(), "a%2Fb%3Fc%23d");
/// assert!(task_path_segment("..").is_err());
/// assert!(task_path_segment("").is_err());
/// ```
pub fn task_path_segment(id: &str) -> Result<String, RunClientError> {
    if id.is_empty() || id == "." || id == ".." {
        return Err(RunClientError::Other(format!(
            "the task id {:?} is not a valid run id (empty or a dot segment); the worker sent \
             an id that cannot name a run, check the worker",
            clip(id)
        )));
    }
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(out)
}

#[async_trait::async_trait]
impl RunClient for HttpRunClient {
    async fn start(&self, endpoint: &Endpoint, payload: Value) -> Result<Value, RunClientError> {
        self.send(endpoint, Method::POST, "/runs", Some(payload), Repeat::Once)
            .await
    }

    async fn check(&self, endpoint: &Endpoint, task_id: &str) -> Result<Value, RunClientError> {
        self.send(
            endpoint,
            Method::GET,
            &format!("/runs/{}", task_path_segment(task_id)?),
            None,
            Repeat::Safe,
        )
        .await
    }

    async fn update(
        &self,
        endpoint: &Endpoint,
        task_id: &str,
        message: &str,
    ) -> Result<Value, RunClientError> {
        self.send(
            endpoint,
            Method::POST,
            &format!("/runs/{}/input", task_path_segment(task_id)?),
            Some(json!({ "message": message })),
            Repeat::Once,
        )
        .await
    }

    async fn cancel(&self, endpoint: &Endpoint, task_id: &str) -> Result<Value, RunClientError> {
        self.send(
            endpoint,
            Method::POST,
            &format!("/runs/{}/cancel", task_path_segment(task_id)?),
            None,
            Repeat::Safe,
        )
        .await
    }

    /// Follows the task's thread stream ([`wait_for_run`](HttpRunClient::wait_for_run)); the
    /// task id of a kit worker is its thread id.
    async fn follow(
        &self,
        endpoint: &Endpoint,
        task_id: &str,
        run_id: &str,
    ) -> Option<Result<super::RunOutcome, RunClientError>> {
        Some(self.wait_for_run(endpoint, task_id, run_id).await)
    }
}
