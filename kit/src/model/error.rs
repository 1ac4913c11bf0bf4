//! Why a model call failed: [`ModelError`], one variant per way to react.

use std::time::Duration;

/// A model call failed. Match on the variant to react (retry later, compact and retry, fix
/// credentials); every message says what was wrong and what to do.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The provider rejected the credentials (HTTP 401/403).
    #[error("{provider}: authentication failed ({message}); check the API key")]
    Authentication {
        /// Provider name.
        provider: String,
        /// The provider's message.
        message: String,
    },
    /// Too many requests (HTTP 429), after retries.
    #[error("{provider}: rate limited ({message}){}", retry_hint(.retry_after))]
    RateLimited {
        /// Provider name.
        provider: String,
        /// How long the provider asked to wait.
        retry_after: Option<Duration>,
        /// The provider's message.
        message: String,
    },
    /// The request does not fit the model's context window.
    #[error(
        "{provider}: the request exceeds the model's context window ({message}); shorten the \
         conversation or enable compaction / overflow recovery"
    )]
    ContextLengthExceeded {
        /// Provider name.
        provider: String,
        /// The provider's message.
        message: String,
    },
    /// The provider refused the request (HTTP 4xx other than the above).
    #[error("{provider}: bad request (HTTP {status}): {message}")]
    BadRequest {
        /// Provider name.
        provider: String,
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider failed (HTTP 5xx), after retries.
    #[error("{provider}: server error (HTTP {status}): {message}")]
    Server {
        /// Provider name.
        provider: String,
        /// HTTP status.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// No answer in time.
    #[error("{provider}: timed out after {after:?}; raise `timeout_ms` or try again")]
    Timeout {
        /// Provider name.
        provider: String,
        /// The timeout.
        after: Duration,
    },
    /// The connection failed or broke (after retries).
    #[error("{provider}: connection failed: {message}")]
    Connection {
        /// Provider name.
        provider: String,
        /// What happened.
        message: String,
    },
    /// The provider's answer could not be understood.
    #[error("{provider}: malformed response: {message}")]
    MalformedResponse {
        /// Provider name.
        provider: String,
        /// What was wrong.
        message: String,
    },
    /// No API key configured.
    #[error(
        "{provider}: no API key; set the environment variable {variable} or pass one in \
         `kit::Config`"
    )]
    MissingCredentials {
        /// Provider name.
        provider: String,
        /// The environment variable to set.
        variable: String,
    },
    /// A `provider:model` string named an unknown provider.
    #[error("unknown model provider `{name}`; known providers: {known}")]
    UnknownProvider {
        /// The name given.
        name: String,
        /// The known ones, comma separated.
        known: String,
    },
    /// The provider's answer broke a size or time limit of [`HttpLimits`](crate::http::HttpLimits)
    /// (a body, an event-stream line or event, a whole stream, or the stream's total
    /// deadline); `limit` names the field to raise.
    #[error("{provider}: the answer broke the limit `{limit}`: {message}")]
    Limit {
        /// Provider name.
        provider: String,
        /// The [`HttpLimits`](crate::http::HttpLimits) field (`max_body_bytes`,
        /// `max_stream_bytes`, `max_sse_line_bytes`, `max_sse_event_bytes`, `stream_deadline`).
        limit: String,
        /// What happened and how to raise the limit.
        message: String,
    },
    /// Anything else (a scripted model ran out of answers, an invalid model string, ...).
    #[error("{0}")]
    Other(String),
}

fn retry_hint(after: &Option<Duration>) -> String {
    match after {
        Some(d) => format!("; retry after {:.1}s", d.as_secs_f64()),
        None => "; retry later".to_string(),
    }
}

impl ModelError {
    /// Removes `secrets` from every text of the error (see [`Secrets::scrub`](crate::http::Secrets::scrub)).
    pub fn scrub(&mut self, secrets: &crate::http::Secrets) {
        if secrets.is_empty() {
            return;
        }
        match self {
            ModelError::Authentication { message, .. }
            | ModelError::RateLimited { message, .. }
            | ModelError::ContextLengthExceeded { message, .. }
            | ModelError::BadRequest { message, .. }
            | ModelError::Server { message, .. }
            | ModelError::Connection { message, .. }
            | ModelError::MalformedResponse { message, .. }
            | ModelError::Limit { message, .. }
            | ModelError::Other(message) => secrets.scrub_in_place(message),
            ModelError::Timeout { .. }
            | ModelError::MissingCredentials { .. }
            | ModelError::UnknownProvider { .. } => {}
        }
    }

    /// This error with `secrets` scrubbed (see [`scrub`](Self::scrub)).
    #[must_use]
    pub fn scrubbed(mut self, secrets: &crate::http::Secrets) -> Self {
        self.scrub(secrets);
        self
    }

    /// True when the request did not fit the context window (what overflow recovery keys on).
    pub fn is_context_overflow(&self) -> bool {
        matches!(self, ModelError::ContextLengthExceeded { .. })
    }

    /// True for errors worth retrying later (rate limits, server errors, timeouts, connection).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ModelError::RateLimited { .. }
                | ModelError::Server { .. }
                | ModelError::Timeout { .. }
                | ModelError::Connection { .. }
        )
    }

    /// A short machine-readable kind, for events and traces.
    pub fn kind(&self) -> &'static str {
        match self {
            ModelError::Authentication { .. } => "authentication",
            ModelError::RateLimited { .. } => "rate_limited",
            ModelError::ContextLengthExceeded { .. } => "context_length_exceeded",
            ModelError::BadRequest { .. } => "bad_request",
            ModelError::Server { .. } => "server",
            ModelError::Timeout { .. } => "timeout",
            ModelError::Connection { .. } => "connection",
            ModelError::MalformedResponse { .. } => "malformed_response",
            ModelError::MissingCredentials { .. } => "missing_credentials",
            ModelError::UnknownProvider { .. } => "unknown_provider",
            ModelError::Limit { .. } => "limit",
            ModelError::Other(_) => "other",
        }
    }
}
