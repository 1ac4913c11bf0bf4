//! The error of the block strategy: what was found, how often, and where.

use crate::agent::AgentError;

/// The PII middleware's `block` strategy found personal data and stopped the run. It reaches
/// the caller inside [`AgentError::Middleware`]; read it with [`AgentError::pii_detected`].
///
/// ```
/// use kit::middleware::pii::{PiiDetected, PiiMiddleware, PiiStrategy, PiiType};
///
/// let guard = PiiMiddleware::new(PiiType::Email).strategy(PiiStrategy::Block);
/// let err = guard.apply("write to ada@example.com").unwrap_err();
/// let found: &PiiDetected = err.pii_detected().unwrap();
/// assert_eq!((found.pii_type.as_str(), found.count), ("email", 1));
/// assert_eq!(err.kind(), "pii_detected");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "detected {count} instance(s) of {pii_type} in the {location}; the PII middleware's `block` \
     strategy stopped the run — remove the data, or choose the redact, mask or hash strategy"
)]
#[non_exhaustive]
pub struct PiiDetected {
    /// The PII type.
    pub pii_type: String,
    /// How many instances.
    pub count: usize,
    /// Where: `input`, `output`, `tool call arguments`, `tool result` or `text`.
    pub location: String,
}

impl PiiDetected {
    /// The kind error events give it.
    pub const KIND: &'static str = "pii_detected";
}

impl AgentError {
    /// The personal data a PII middleware's `block` strategy stopped the run for, if that is
    /// what this error is.
    pub fn pii_detected(&self) -> Option<&PiiDetected> {
        self.downcast_middleware()
    }

    /// True when a PII middleware's `block` strategy stopped the run.
    pub fn is_pii_detected(&self) -> bool {
        self.pii_detected().is_some()
    }
}
