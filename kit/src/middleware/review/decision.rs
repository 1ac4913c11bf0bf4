//! What a reviewer sees and decides: the batched review request and its decisions.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::graph::Interrupt;

use super::ReviewError;
use super::error::clip;

/// The kinds of decision a reviewer can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionType {
    /// Run the call as the model made it.
    Approve,
    /// Run an edited call instead.
    Edit,
    /// Do not run it; tell the model.
    Reject,
    /// Do not run it; the reviewer's message is the result.
    Respond,
}

impl DecisionType {
    /// All four, in the anchor's order.
    pub const ALL: [DecisionType; 4] = [
        DecisionType::Approve,
        DecisionType::Edit,
        DecisionType::Reject,
        DecisionType::Respond,
    ];

    /// `approve`, `edit`, `reject` or `respond`.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionType::Approve => "approve",
            DecisionType::Edit => "edit",
            DecisionType::Reject => "reject",
            DecisionType::Respond => "respond",
        }
    }
}

impl std::fmt::Display for DecisionType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for DecisionType {
    type Err = ReviewError;

    fn from_str(s: &str) -> Result<Self, ReviewError> {
        DecisionType::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| ReviewError::UnknownDecisionType(s.to_string()))
    }
}

/// A tool call as a reviewer sees or writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Action {
    /// The tool's name.
    pub name: String,
    /// The arguments.
    #[serde(default = "empty_object")]
    pub args: Value,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A reviewer's decision on one action request; serialises to the anchor's shape
/// (`{"type": "approve"}`, `{"type": "edit", "edited_action": {"name", "args"}}`,
/// `{"type": "reject", "message"?}`, `{"type": "respond", "message"}`).
///
/// ```
/// use kit::middleware::review::Decision;
/// use serde_json::json;
///
/// let edit = Decision::edit("send_email", json!({"to": "c@x"}));
/// assert_eq!(
///     serde_json::to_value(&edit).unwrap(),
///     json!({"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "c@x"}}})
/// );
/// assert_eq!(serde_json::to_value(Decision::reject()).unwrap(), json!({"type": "reject"}));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Decision {
    /// Run the call.
    Approve,
    /// Run this call instead.
    Edit {
        /// The call to run.
        edited_action: Action,
    },
    /// Do not run the call.
    Reject {
        /// Why, for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Do not run the call; `message` is its result.
    Respond {
        /// The result the model sees.
        message: String,
    },
}

impl Decision {
    /// Run the call.
    pub fn approve() -> Self {
        Decision::Approve
    }

    /// Run `name(args)` instead.
    pub fn edit(name: impl Into<String>, args: Value) -> Self {
        Decision::Edit {
            edited_action: Action {
                name: name.into(),
                args,
            },
        }
    }

    /// Do not run the call (the model is told it was rejected).
    pub fn reject() -> Self {
        Decision::Reject { message: None }
    }

    /// Do not run the call, and tell the model why.
    pub fn reject_with(message: impl Into<String>) -> Self {
        Decision::Reject {
            message: Some(message.into()),
        }
    }

    /// Do not run the call; `message` is its result.
    pub fn respond(message: impl Into<String>) -> Self {
        Decision::Respond {
            message: message.into(),
        }
    }

    /// The decision's type.
    pub fn decision_type(&self) -> DecisionType {
        match self {
            Decision::Approve => DecisionType::Approve,
            Decision::Edit { .. } => DecisionType::Edit,
            Decision::Reject { .. } => DecisionType::Reject,
            Decision::Respond { .. } => DecisionType::Respond,
        }
    }
}

/// One call waiting for review, as shown in the interrupt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionRequest {
    /// The tool's name.
    pub name: String,
    /// The arguments the model gave.
    pub args: Value,
    /// What the reviewer is asked.
    pub description: String,
}

/// The decisions allowed for one action request, as shown in the interrupt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewConfig {
    /// The tool's name.
    pub action_name: String,
    /// What the reviewer may decide.
    pub allowed_decisions: Vec<DecisionType>,
}

/// The value of a review interrupt: the calls to review and what may be decided on each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewRequest {
    /// The calls, in the order the model made them.
    pub action_requests: Vec<ActionRequest>,
    /// The allowed decisions, one entry per action request.
    pub review_configs: Vec<ReviewConfig>,
    /// Why the previous answer to this review was not accepted (absent the first time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ReviewRequest {
    /// Reads a review request from an interrupt of the run.
    pub fn from_interrupt(interrupt: &Interrupt) -> Result<Self, ReviewError> {
        serde_json::from_value(interrupt.value.clone()).map_err(|e| {
            ReviewError::NotAReview(format!(
                "interrupt {} from node `{}` has no review request ({e})",
                interrupt.id, interrupt.node
            ))
        })
    }

    /// Checks decisions against this request: one per action request, each of a type its tool
    /// allows. The same errors the middleware reports when it asks again.
    pub fn check(&self, decisions: &[Decision]) -> Result<(), ReviewError> {
        if decisions.len() != self.action_requests.len() {
            return Err(ReviewError::CountMismatch {
                given: decisions.len(),
                expected: self.action_requests.len(),
            });
        }
        for (decision, config) in decisions.iter().zip(&self.review_configs) {
            let kind = decision.decision_type();
            if !config.allowed_decisions.contains(&kind) {
                return Err(ReviewError::NotAllowed {
                    decision: shown(decision),
                    decision_type: kind,
                    tool: config.action_name.clone(),
                    allowed: config.allowed_decisions.clone(),
                });
            }
        }
        Ok(())
    }

    /// Parses a resume value (`{"decisions": [...]}` or a bare list) and checks it.
    pub(super) fn accept(&self, value: &Value) -> Result<Vec<Decision>, ReviewError> {
        let list = match value {
            Value::Object(map) => match map.get("decisions") {
                Some(Value::Array(list)) => list,
                _ => return Err(ReviewError::InvalidPayload(clip(value))),
            },
            Value::Array(list) => list,
            other => return Err(ReviewError::InvalidPayload(clip(other))),
        };
        let mut decisions = Vec::with_capacity(list.len());
        for (index, item) in list.iter().enumerate() {
            let decision = serde_json::from_value::<Decision>(item.clone()).map_err(|e| {
                ReviewError::InvalidDecision {
                    index,
                    message: crate::text::clip(&e.to_string(), MAX_SHOWN_CHARS),
                }
            })?;
            decisions.push(decision);
        }
        self.check(&decisions)?;
        Ok(decisions)
    }
}

/// The most characters of a reviewer's answer an error repeats: an edit of megabytes is asked
/// about again with its start, not with all of it.
pub(super) const MAX_SHOWN_CHARS: usize = 300;

/// A decision as JSON, clipped to [`MAX_SHOWN_CHARS`], for error messages.
pub(super) fn shown(decision: &Decision) -> String {
    crate::text::clip(
        &serde_json::to_string(decision).unwrap_or_default(),
        MAX_SHOWN_CHARS,
    )
}
