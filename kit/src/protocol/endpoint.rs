//! Where a worker lives: the endpoint every run-protocol request is addressed to.

use std::collections::BTreeMap;

/// A worker endpoint: the remote graph to run, the worker's base URL and the headers sent with
/// every request (credentials go there). The `name` labels the worker in errors.
///
/// ```
/// use kit::protocol::Endpoint;
///
/// let worker = Endpoint::new("researcher", "research")
///     .url("http://127.0.0.1:8787")
///     .header("Authorization", "Bearer secret");
/// assert_eq!(worker.graph_id, "research");
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct Endpoint {
    /// The name the worker is known by (an async subagent's name).
    pub name: String,
    /// The remote assistant or graph id (sent as `assistant_id`).
    pub graph_id: String,
    /// The worker's base URL, for the built-in HTTP client.
    pub url: Option<String>,
    /// Headers sent on every request.
    pub headers: BTreeMap<String, String>,
}

impl Endpoint {
    /// An endpoint for the graph `graph_id`, labelled `name`, with no URL yet.
    pub fn new(name: impl Into<String>, graph_id: impl Into<String>) -> Self {
        Endpoint {
            name: name.into(),
            graph_id: graph_id.into(),
            url: None,
            headers: BTreeMap::new(),
        }
    }

    /// The worker's base URL.
    #[must_use]
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// Adds a header sent on every request.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }
}

impl Endpoint {
    /// The credentials this endpoint sends (header values, the URL's user name and password),
    /// scrubbed from everything a worker sends back before kit shows it.
    pub fn secrets(&self) -> crate::http::Secrets {
        let mut request = crate::http::HttpRequest::get(self.url.as_deref().unwrap_or(""));
        for (k, v) in &self.headers {
            request = request.header(k, v);
        }
        let mut secrets = request.secrets();
        for v in self.headers.values() {
            secrets.add(v);
        }
        secrets
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are credentials: only their names are shown.
        f.debug_struct("Endpoint")
            .field("name", &self.name)
            .field("graph_id", &self.graph_id)
            .field(
                "url",
                &self.url.as_deref().map(crate::http::redact_url_text),
            )
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}
