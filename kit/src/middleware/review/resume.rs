//! Building the resume payload that answers a review.

use serde_json::{Value, json};

use crate::graph::Resume;

use super::Decision;

/// The resume payload of a review: `{"decisions": [...]}`, from typed decisions or raw JSON.
///
/// ```
/// use kit::middleware::review::{resume_review, Decision};
/// use kit::Resume;
/// use serde_json::json;
///
/// let typed = resume_review([Decision::approve(), Decision::respond("blue")]);
/// let raw = resume_review(json!([{"type": "approve"}, {"type": "respond", "message": "blue"}]));
/// assert_eq!(typed, raw);
/// assert_eq!(
///     typed,
///     Resume::Value(json!({"decisions": [{"type": "approve"}, {"type": "respond", "message": "blue"}]}))
/// );
/// ```
pub fn resume_review(decisions: impl ReviewDecisions) -> Resume {
    Resume::Value(decisions.into_payload())
}

/// Like [`resume_review`], addressed to one interrupt by id (when several are pending, e.g.
/// reviews in parallel subagents).
pub fn resume_review_for(
    interrupt_id: impl Into<String>,
    decisions: impl ReviewDecisions,
) -> Resume {
    Resume::ByIds(std::iter::once((interrupt_id.into(), decisions.into_payload())).collect())
}

/// What [`resume_review`] accepts: typed [`Decision`]s (a list, an array, one), or JSON (a
/// list of decisions, one decision, or an already complete `{"decisions": [...]}`).
pub trait ReviewDecisions {
    /// The `{"decisions": [...]}` payload.
    fn into_payload(self) -> Value;
}

fn payload(list: Vec<Value>) -> Value {
    json!({ "decisions": list })
}

fn typed(decisions: &[Decision]) -> Value {
    payload(
        decisions
            .iter()
            .map(|d| serde_json::to_value(d).unwrap_or(Value::Null))
            .collect(),
    )
}

impl ReviewDecisions for Vec<Decision> {
    fn into_payload(self) -> Value {
        typed(&self)
    }
}

impl ReviewDecisions for &[Decision] {
    fn into_payload(self) -> Value {
        typed(self)
    }
}

impl<const N: usize> ReviewDecisions for [Decision; N] {
    fn into_payload(self) -> Value {
        typed(&self)
    }
}

impl ReviewDecisions for Decision {
    fn into_payload(self) -> Value {
        typed(std::slice::from_ref(&self))
    }
}

impl ReviewDecisions for Vec<Value> {
    fn into_payload(self) -> Value {
        payload(self)
    }
}

impl ReviewDecisions for Value {
    fn into_payload(self) -> Value {
        match self {
            Value::Array(list) => payload(list),
            Value::Object(map) if map.contains_key("decisions") => Value::Object(map),
            Value::Object(map) if map.contains_key("type") => payload(vec![Value::Object(map)]),
            // Anything else is passed on; the review answers with what is wrong.
            other => other,
        }
    }
}
