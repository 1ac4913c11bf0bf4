//! How one tool is reviewed: allowed decisions, a description, a condition.

use std::sync::Arc;

use crate::agent::AgentState;
use crate::message::ToolCall;

use super::{DecisionType, ReviewError};

/// Decides whether one call is reviewed; see [`InterruptOnConfig::when`].
pub type ReviewWhen = Arc<dyn Fn(&ToolCall, &AgentState) -> bool + Send + Sync>;

/// Writes the reviewer's description of one call; see [`InterruptOnConfig::describe_with`].
pub type ReviewDescription = Arc<dyn Fn(&ToolCall, &AgentState) -> String + Send + Sync>;

/// How one tool is reviewed: the decisions allowed, optionally a description (fixed or written
/// per call) and a condition (`when`) that lets some calls through without review.
///
/// ```
/// use kit::middleware::review::{DecisionType, InterruptOnConfig};
///
/// let config = InterruptOnConfig::allow([DecisionType::Approve, DecisionType::Reject])
///     .unwrap()
///     .description("Deleting files cannot be undone.");
/// assert_eq!(config.allowed_decisions(), [DecisionType::Approve, DecisionType::Reject]);
/// assert!(InterruptOnConfig::allow([]).is_err());
///
/// // Only refunds above 100 wait for a person; the description says how much.
/// let refunds = InterruptOnConfig::all()
///     .when(|call, _state| call.args["amount"].as_f64().unwrap_or(f64::MAX) > 100.0)
///     .describe_with(|call, _state| format!("Refund of {} EUR", call.args["amount"]));
/// # let _ = refunds;
/// ```
#[derive(Clone)]
pub struct InterruptOnConfig {
    pub(super) allowed: Vec<DecisionType>,
    pub(super) description: Option<Description>,
    when: Option<ReviewWhen>,
}

#[derive(Clone)]
pub(super) enum Description {
    Text(String),
    Fn(ReviewDescription),
}

impl std::fmt::Debug for InterruptOnConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("InterruptOnConfig");
        d.field("allowed", &self.allowed);
        match &self.description {
            Some(Description::Text(text)) => d.field("description", text),
            Some(Description::Fn(_)) => d.field("description", &"<fn>"),
            None => d.field("description", &None::<String>),
        };
        d.field("when", &self.when.as_ref().map(|_| "<fn>"))
            .finish()
    }
}

impl PartialEq for InterruptOnConfig {
    /// Equal decisions, equal fixed descriptions, and the very same functions.
    fn eq(&self, other: &Self) -> bool {
        let description = match (&self.description, &other.description) {
            (None, None) => true,
            (Some(Description::Text(a)), Some(Description::Text(b))) => a == b,
            (Some(Description::Fn(a)), Some(Description::Fn(b))) => Arc::ptr_eq(a, b),
            _ => false,
        };
        let when = match (&self.when, &other.when) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        self.allowed == other.allowed && description && when
    }
}

impl InterruptOnConfig {
    /// All four decisions.
    pub fn all() -> Self {
        InterruptOnConfig {
            allowed: DecisionType::ALL.to_vec(),
            description: None,
            when: None,
        }
    }

    /// These decisions (at least one; duplicates are dropped).
    pub fn allow(decisions: impl IntoIterator<Item = DecisionType>) -> Result<Self, ReviewError> {
        let mut allowed: Vec<DecisionType> = Vec::new();
        for d in decisions {
            if !allowed.contains(&d) {
                allowed.push(d);
            }
        }
        if allowed.is_empty() {
            return Err(ReviewError::NoDecisions);
        }
        Ok(InterruptOnConfig {
            allowed,
            description: None,
            when: None,
        })
    }

    /// A fixed description for the reviewer, instead of the prefix with the tool and its
    /// arguments.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(Description::Text(text.into()));
        self
    }

    /// A description written for each call from the call and the agent's state.
    #[must_use]
    pub fn describe_with<F>(mut self, describe: F) -> Self
    where
        F: Fn(&ToolCall, &AgentState) -> String + Send + Sync + 'static,
    {
        self.description = Some(Description::Fn(Arc::new(describe)));
        self
    }

    /// Reviews only the calls for which `when` is true; the others run at once, like calls of
    /// a tool that is not reviewed. It runs again when the paused run resumes, so it must give
    /// the same answer for the same call and state (no clocks, no randomness).
    #[must_use]
    pub fn when<F>(mut self, when: F) -> Self
    where
        F: Fn(&ToolCall, &AgentState) -> bool + Send + Sync + 'static,
    {
        self.when = Some(Arc::new(when));
        self
    }

    /// The allowed decisions.
    pub fn allowed_decisions(&self) -> &[DecisionType] {
        &self.allowed
    }

    /// True when this call is to be reviewed.
    pub(super) fn applies(&self, call: &ToolCall, state: &AgentState) -> bool {
        self.when.as_ref().is_none_or(|when| when(call, state))
    }
}

/// Whether a tool is reviewed: `true` / `false` or an [`InterruptOnConfig`] convert into it.
#[derive(Debug, Clone, PartialEq)]
pub enum InterruptOn {
    /// Runs without review.
    Never,
    /// Reviewed with this configuration.
    Review(InterruptOnConfig),
}

impl From<bool> for InterruptOn {
    fn from(on: bool) -> Self {
        if on {
            InterruptOn::Review(InterruptOnConfig::all())
        } else {
            InterruptOn::Never
        }
    }
}

impl From<InterruptOnConfig> for InterruptOn {
    fn from(config: InterruptOnConfig) -> Self {
        InterruptOn::Review(config)
    }
}
