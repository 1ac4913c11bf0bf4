//! A review configured or answered wrongly.

use serde_json::Value;

use super::DecisionType;

/// A review was configured or answered wrongly.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ReviewError {
    /// An `allowed_decisions` list is empty.
    #[error(
        "a reviewed tool must allow at least one decision (approve, edit, reject, respond); to \
         run a tool without review, map it to false"
    )]
    NoDecisions,
    /// A decision type that does not exist.
    #[error("unknown decision type `{0}`: use approve, edit, reject or respond")]
    UnknownDecisionType(String),
    /// An `interrupt_on` entry that is not `true`, `false` or `{"allowed_decisions": [...]}`.
    #[error("invalid interrupt_on entry for tool `{tool}`: {message}")]
    InvalidConfig {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// The number of decisions differs from the number of action requests.
    #[error(
        "Number of human decisions ({given}) does not match number of hanging tool calls \
         ({expected}). Resume with one decision per action request, in their order."
    )]
    CountMismatch {
        /// Decisions given.
        given: usize,
        /// Action requests.
        expected: usize,
    },
    /// A decision type the tool does not allow.
    #[error(
        "Unexpected human decision: {decision}. Decision type '{decision_type}' is not allowed \
         for tool '{tool}'. Expected one of {} based on the tool's configuration.",
        py_list(.allowed)
    )]
    NotAllowed {
        /// The decision, as JSON.
        decision: String,
        /// Its type.
        decision_type: DecisionType,
        /// The tool.
        tool: String,
        /// What the tool allows.
        allowed: Vec<DecisionType>,
    },
    /// A decision that does not parse.
    #[error(
        "decision {index} is not a valid decision: {message}. A decision is {{\"type\": \
         \"approve\"}}, {{\"type\": \"edit\", \"edited_action\": {{\"name\": ..., \"args\": \
         {{...}}}}}}, {{\"type\": \"reject\", \"message\": ... (optional)}} or {{\"type\": \
         \"respond\", \"message\": ...}}"
    )]
    InvalidDecision {
        /// Its position.
        index: usize,
        /// The parser's message.
        message: String,
    },
    /// A resume value that is not a list of decisions.
    #[error(
        "a review is resumed with {{\"decisions\": [...]}} (build it with resume_review); got \
         {0}"
    )]
    InvalidPayload(String),
    /// An interrupt that is not a review request.
    #[error("not a human review request: {0}")]
    NotAReview(String),
    /// A per-call review answered with something other than one decision.
    #[error(
        "a tool approval is answered with one decision, e.g. {{\"type\": \"approve\"}} \
         (build it with resume_review_for(interrupt_id, decision)); got {0}"
    )]
    InvalidApproval(String),
    /// A per-call edit that names another tool.
    #[error(
        "an edit of a `{tool}` call must keep the tool, but it names `{edited}`; change the \
         arguments only, or reject the call"
    )]
    EditChangesTool {
        /// The reviewed call's tool.
        tool: String,
        /// The tool the edit named.
        edited: String,
    },
}

fn py_list(items: &[DecisionType]) -> String {
    let quoted: Vec<String> = items.iter().map(|d| format!("'{d}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// A JSON value cut for an error message.
pub(super) fn clip(value: &Value) -> String {
    crate::text::clip(&value.to_string(), 200)
}
