//! The async subagent spec: a name, a description, the worker endpoint and its client.

use std::sync::Arc;

use crate::protocol::{Endpoint, HttpRunClient, RunClient};

/// Statuses after which a task never changes again.
pub const TERMINAL_STATUSES: &[&str] = &[
    "cancelled",
    "success",
    "error",
    "timeout",
    "interrupted",
    "complete",
    "completed",
];

/// True for a terminal status.
pub fn is_terminal(status: &str) -> bool {
    TERMINAL_STATUSES.contains(&status)
}

/// An async subagent: a remote graph reached through a [`RunClient`].
#[derive(Clone)]
pub struct AsyncSpec {
    /// What it is good for (shown to the model).
    pub description: String,
    /// Where the worker is: the subagent's name (the model passes it as `subagent_name` or
    /// `subagent_type`), the remote graph id, the URL and the headers.
    pub endpoint: Endpoint,
    /// A custom client; with a `url` and no client the built-in HTTP client is used.
    pub client: Option<Arc<dyn RunClient>>,
}

impl std::fmt::Debug for AsyncSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncSpec")
            .field("endpoint", &self.endpoint)
            .field("client", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

impl AsyncSpec {
    /// A spec with a name, a description and the remote graph id.
    ///
    /// ```
    /// use kit::middleware::async_subagents::AsyncSpec;
    /// let researcher = AsyncSpec::new("researcher", "Deep research, takes minutes.", "research")
    ///     .url("http://127.0.0.1:8787")
    ///     .header("Authorization", "Bearer secret");
    /// # let _ = researcher;
    /// ```
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        graph_id: impl Into<String>,
    ) -> Self {
        AsyncSpec {
            description: description.into(),
            endpoint: Endpoint::new(name, graph_id),
            client: None,
        }
    }

    /// The subagent's unique name.
    pub fn name(&self) -> &str {
        &self.endpoint.name
    }

    /// The worker's base URL (selects the built-in HTTP client unless a client is set).
    #[must_use]
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.endpoint.url = Some(url.into());
        self
    }

    /// A custom client.
    #[must_use]
    pub fn client(mut self, client: impl RunClient) -> Self {
        self.client = Some(Arc::new(client));
        self
    }

    /// Adds a header sent on every request.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.endpoint.headers.insert(name.into(), value.into());
        self
    }

    /// The client to use: the custom one, the HTTP one for a `url`, or none.
    pub(super) fn resolved_client(&self, http: &Arc<HttpRunClient>) -> Option<Arc<dyn RunClient>> {
        match (&self.client, &self.endpoint.url) {
            (Some(c), _) => Some(c.clone()),
            (None, Some(_)) => Some(http.clone() as Arc<dyn RunClient>),
            (None, None) => None,
        }
    }
}
