//! What goes wrong: content flagged (with the `error` exit), or a check that could not be made.

use crate::agent::AgentError;
use crate::http::{HttpError, HttpErrorKind};

/// Moderation flagged content and the exit behaviour is `error`. It reaches the caller inside
/// [`AgentError::Middleware`]; read it with [`AgentError::moderation_flagged`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("content flagged by moderation at the {stage} stage: {}", .categories.join(", "))]
#[non_exhaustive]
pub struct ModerationFlagged {
    /// `input`, `output` or `tool`.
    pub stage: String,
    /// The flagged categories.
    pub categories: Vec<String>,
    /// The message that would have been shown.
    pub message: String,
}

impl ModerationFlagged {
    /// The kind error events give it (LangChain's `vendor_moderation_violation`).
    pub const KIND: &'static str = "vendor_moderation_violation";
}

impl AgentError {
    /// What moderation flagged, when this error is a moderation violation.
    pub fn moderation_flagged(&self) -> Option<&ModerationFlagged> {
        self.downcast_middleware()
    }
}

/// A moderation check could not be made.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ModerationError {
    /// No API key in the configuration.
    #[error(
        "OpenAI moderation needs an API key: set the OPENAI_API_KEY environment variable (or \
         Config::openai_api_key, or ModerationMiddleware::api_key)"
    )]
    MissingApiKey,
    /// An exit behaviour name that does not exist.
    #[error("unknown exit behavior `{0}`: use end, replace or error")]
    UnknownExitBehavior(String),
    /// The request failed: no answer, an error status, a body that is not JSON (the
    /// [`HttpError`] says which, and what to do).
    #[error("the moderation request failed: {0}{hint}", hint = http_hint(.0))]
    Http(#[from] HttpError),
    /// An answer that is not the moderation API's format.
    #[error(
        "the moderation endpoint {url} answered something that is not a moderation result: {message}"
    )]
    Decode {
        /// The URL.
        url: String,
        /// What is wrong.
        message: String,
    },
}

/// What to add to an HTTP error's own advice for the moderation endpoint.
fn http_hint(e: &HttpError) -> &'static str {
    match (e.kind(), e.status()) {
        (HttpErrorKind::Status, Some(401 | 403)) => {
            " (the key comes from OPENAI_API_KEY, Config::openai_api_key or \
             ModerationMiddleware::api_key)"
        }
        (HttpErrorKind::Status, Some(404)) => {
            " (the base URL should end with /v1: OPENAI_BASE_URL or ModerationMiddleware::base_url)"
        }
        _ => "",
    }
}
