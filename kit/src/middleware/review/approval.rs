//! Per-call review: the interrupt mode and the one-call approval request.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::graph::Interrupt;

use super::error::clip;
use super::{Decision, DecisionType, ReviewError};

/// How a review is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InterruptMode {
    /// One interrupt per model turn listing every reviewed call ([`ReviewRequest`](super::ReviewRequest)); the
    /// anchor's default.
    #[default]
    Batched,
    /// One interrupt per reviewed call ([`ToolApproval`]), raised as the call is about to
    /// run and answered by interrupt id.
    PerCall,
}

/// The interrupt type of a per-call review.
pub const TOOL_APPROVAL: &str = "tool_approval";

/// The value of a per-call review interrupt ([`InterruptMode::PerCall`]): one reviewed call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolApproval {
    /// Always [`TOOL_APPROVAL`].
    #[serde(rename = "type")]
    pub kind: String,
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments the model gave.
    pub args: Value,
    /// What the reviewer is asked.
    pub description: String,
    /// What the reviewer may decide.
    pub allowed_decisions: Vec<DecisionType>,
    /// Why the previous answer was not accepted (absent the first time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ToolApproval {
    /// Reads a per-call review from an interrupt of the run.
    pub fn from_interrupt(interrupt: &Interrupt) -> Result<Self, ReviewError> {
        serde_json::from_value::<ToolApproval>(interrupt.value.clone())
            .ok()
            .filter(|a| a.kind == TOOL_APPROVAL)
            .ok_or_else(|| {
                ReviewError::NotAReview(format!(
                    "interrupt {} from node `{}` is not a tool approval",
                    interrupt.id, interrupt.node
                ))
            })
    }

    /// Checks a decision against this call: a type the tool allows, and an edit that keeps
    /// the tool.
    pub fn check(&self, decision: &Decision) -> Result<(), ReviewError> {
        let kind = decision.decision_type();
        if !self.allowed_decisions.contains(&kind) {
            return Err(ReviewError::NotAllowed {
                decision: super::decision::shown(decision),
                decision_type: kind,
                tool: self.name.clone(),
                allowed: self.allowed_decisions.clone(),
            });
        }
        if let Decision::Edit { edited_action } = decision
            && edited_action.name != self.name
        {
            return Err(ReviewError::EditChangesTool {
                tool: self.name.clone(),
                edited: crate::text::clip(&edited_action.name, super::decision::MAX_SHOWN_CHARS),
            });
        }
        Ok(())
    }

    /// Parses a resume value (one decision, or `{"decisions": [one]}`) and checks it.
    pub(super) fn accept(&self, value: &Value) -> Result<Decision, ReviewError> {
        let list = match value {
            Value::Object(map) if map.contains_key("type") => std::slice::from_ref(value),
            Value::Object(map) => match map.get("decisions") {
                Some(Value::Array(list)) => list.as_slice(),
                _ => return Err(ReviewError::InvalidApproval(clip(value))),
            },
            Value::Array(list) => list.as_slice(),
            other => return Err(ReviewError::InvalidApproval(clip(other))),
        };
        let [item] = list else {
            return Err(ReviewError::InvalidApproval(format!(
                "{} decisions",
                list.len()
            )));
        };
        let decision = serde_json::from_value::<Decision>(item.clone()).map_err(|e| {
            ReviewError::InvalidDecision {
                index: 0,
                message: crate::text::clip(&e.to_string(), super::decision::MAX_SHOWN_CHARS),
            }
        })?;
        self.check(&decision)?;
        Ok(decision)
    }
}
