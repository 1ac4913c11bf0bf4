//! The client side of the run protocol.

use std::time::Duration;

use serde_json::{Value, json};

use crate::middleware::async_subagents::AsyncSpec;

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
#[async_trait::async_trait]
pub trait RunClient: Send + Sync + 'static {
    /// Starts a run; `payload` is `{"assistant_id", "input": {"messages": [..]}}`.
    async fn start(&self, spec: &AsyncSpec, payload: Value) -> Result<Value, RunClientError>;
    /// Fetches a run (status, result, values.messages).
    async fn check(&self, spec: &AsyncSpec, task_id: &str) -> Result<Value, RunClientError>;
    /// Sends a follow-up message to a run.
    async fn update(
        &self,
        spec: &AsyncSpec,
        task_id: &str,
        message: &str,
    ) -> Result<Value, RunClientError>;
    /// Cancels a run.
    async fn cancel(&self, spec: &AsyncSpec, task_id: &str) -> Result<Value, RunClientError>;
}

/// The built-in HTTP client of the run protocol (spec §4.1). Sends the spec's `headers` on
/// every request; times out after 30 s by default.
#[derive(Debug, Clone)]
pub struct HttpRunClient {
    http: reqwest::Client,
    timeout: Duration,
}

impl Default for HttpRunClient {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpRunClient {
    /// A client with a 30 second timeout.
    pub fn new() -> Self {
        Self::with_timeout(Duration::from_secs(30))
    }

    /// A client with the given per-request timeout.
    pub fn with_timeout(timeout: Duration) -> Self {
        HttpRunClient {
            http: reqwest::Client::builder()
                .connect_timeout(timeout.min(Duration::from_secs(10)))
                .build()
                .unwrap_or_default(),
            timeout,
        }
    }

    fn url(spec: &AsyncSpec, path: &str) -> Result<String, RunClientError> {
        let base = spec
            .url
            .as_deref()
            .ok_or_else(|| RunClientError::NoWorker(spec.name.clone()))?;
        Ok(format!("{}{path}", base.trim_end_matches('/')))
    }

    async fn send(
        &self,
        spec: &AsyncSpec,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, RunClientError> {
        let url = Self::url(spec, path)?;
        let mut request = self.http.request(method, &url).timeout(self.timeout);
        for (k, v) in &spec.headers {
            request = request.header(k.as_str(), v.as_str());
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_timeout() {
                RunClientError::Timeout {
                    url: url.clone(),
                    after: self.timeout,
                }
            } else {
                RunClientError::Transport {
                    url: url.clone(),
                    message: error_chain(&e),
                }
            }
        })?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| {
            if e.is_timeout() {
                RunClientError::Timeout {
                    url: url.clone(),
                    after: self.timeout,
                }
            } else {
                RunClientError::Transport {
                    url: url.clone(),
                    message: error_chain(&e),
                }
            }
        })?;
        if status == 401 || status == 403 {
            return Err(RunClientError::Unauthorized {
                url,
                status,
                body: clip(&text),
            });
        }
        if !(200..300).contains(&status) {
            return Err(RunClientError::Status {
                url,
                status,
                body: clip(&text),
            });
        }
        if text.trim().is_empty() {
            // 204 from a cancel: report what happened.
            return Ok(json!({}));
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(v @ Value::Object(_)) => Ok(v),
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

fn clip(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else {
        s.to_string()
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn segment(id: &str) -> String {
    // Task ids come from workers; keep them one path segment.
    id.chars()
        .map(|c| match c {
            '/' | '?' | '#' | ' ' => '_',
            c => c,
        })
        .collect()
}

#[async_trait::async_trait]
impl RunClient for HttpRunClient {
    async fn start(&self, spec: &AsyncSpec, payload: Value) -> Result<Value, RunClientError> {
        self.send(spec, reqwest::Method::POST, "/runs", Some(payload))
            .await
    }

    async fn check(&self, spec: &AsyncSpec, task_id: &str) -> Result<Value, RunClientError> {
        self.send(
            spec,
            reqwest::Method::GET,
            &format!("/runs/{}", segment(task_id)),
            None,
        )
        .await
    }

    async fn update(
        &self,
        spec: &AsyncSpec,
        task_id: &str,
        message: &str,
    ) -> Result<Value, RunClientError> {
        self.send(
            spec,
            reqwest::Method::POST,
            &format!("/runs/{}/input", segment(task_id)),
            Some(json!({ "message": message })),
        )
        .await
    }

    async fn cancel(&self, spec: &AsyncSpec, task_id: &str) -> Result<Value, RunClientError> {
        self.send(
            spec,
            reqwest::Method::POST,
            &format!("/runs/{}/cancel", segment(task_id)),
            None,
        )
        .await
    }
}
