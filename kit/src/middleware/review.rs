//! Human review of tool calls (human in the loop): the model's calls of chosen tools pause the
//! run until a person approves, edits, rejects or answers them.
//!
//! ```
//! use std::sync::Arc;
//!
//! use kit::agent::Agent;
//! use kit::middleware::review::{resume_review, Decision, HumanReviewMiddleware, ReviewRequest};
//! use kit::testing::ScriptedModel;
//! use kit::tool::{Tool, ToolOutput};
//! use kit::{MemoryCheckpointer, Message, Outcome, RunOptions, ToolCall};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let send_email = Tool::from_fn("send_email", "Sends an email.", json!({"type": "object"}), |args, _| async move {
//!     Ok::<_, kit::tool::ToolError>(ToolOutput::text(format!("sent to {}", args["to"])))
//! });
//! let model = ScriptedModel::new([
//!     Message::assistant_with_tool_calls("", vec![ToolCall::with_id(
//!         "c1", "send_email", json!({"to": "ann@example.com", "body": "hi"}),
//!     )]),
//!     Message::assistant("Sent."),
//! ]);
//! let agent = Agent::builder()
//!     .model(model)
//!     .tool(send_email)
//!     .middleware(HumanReviewMiddleware::new().interrupt_on("send_email", true))
//!     .checkpointer(Arc::new(MemoryCheckpointer::new()))
//!     .build()?;
//! let opts = RunOptions::new().thread_id("t1");
//!
//! let Outcome::Interrupted(paused) = agent.invoke("Say hi to Ann", &opts).await? else {
//!     return Err("expected a review".into());
//! };
//! let request = ReviewRequest::from_interrupt(&paused.interrupts[0])?;
//! assert_eq!(request.action_requests[0].name, "send_email");
//!
//! let done = agent.resume(resume_review([Decision::approve()]), &opts).await?;
//! assert_eq!(done.state().final_text(), "Sent.");
//! # Ok(()) }
//! ```
//!
//! **Configuration.** [`HumanReviewMiddleware::interrupt_on`] maps a tool name to `true` (all
//! four decisions allowed), `false` (runs without review, the same as leaving it out) or an
//! [`InterruptOnConfig`] listing the allowed decisions, with optionally a description (fixed,
//! or written per call with [`describe_with`](InterruptOnConfig::describe_with)) and a
//! condition ([`when`](InterruptOnConfig::when): only refunds above a limit, say; the other
//! calls of the tool run without review). Tools given with
//! [`HumanReviewMiddleware::tools`] are added to the agent and reviewed with all decisions
//! unless `interrupt_on` says otherwise. The agent needs a checkpointer: building it without
//! one is an error.
//!
//! **The interrupt.** After each model turn that calls a reviewed tool, the run pauses with
//! one interrupt (from the node `HumanInTheLoopMiddleware.after_model`) whose value is the
//! anchor's payload, one entry per reviewed call in call order ([`ReviewRequest`]):
//!
//! ```json
//! {"action_requests": [{"name": "send_email", "args": {"body": "hi", "to": "a@x"},
//!                       "description": "Tool execution requires approval\n\nTool: send_email\nArgs: {'body': 'hi', 'to': 'a@x'}"}],
//!  "review_configs":  [{"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject", "respond"]}]}
//! ```
//!
//! Calls of tools that are not reviewed wait too, and run once the review is resumed.
//!
//! **Resuming.** `agent.resume(resume_review(decisions), &opts)` with one [`Decision`] per
//! action request, in order:
//!
//! | decision | the tool | the model sees |
//! |---|---|---|
//! | `approve` | runs | its result |
//! | `edit` | runs the edited call instead | the edited call's result, after the anchor's note ("Note: a human reviewer replaced this tool call before it ran. … Executed instead: `name` with arguments {…}.\n\nTool response:\n…"); its own message keeps the call it made |
//! | `reject` with a message | does not run | error result "User rejected the tool call for \`name\` with reason: {message}" |
//! | `reject` without | does not run | error result "User rejected the tool call for \`name\` with id {id}. The tool was not executed. Do not retry this tool call unless the user explicitly requests it." |
//! | `respond` | does not run | the human's message, as a successful result |
//!
//! Every reviewed call ends with exactly one tool result, and the tools node never runs a
//! call that already has one (the anchor's dangling ids and re-run rejected calls, langchain
//! #40492, cannot happen).
//!
//! **Wrong decisions keep the thread resumable.** A decision type the tool does not allow, a
//! number of decisions that differs from the number of action requests, or a malformed
//! decision does not fail the run: the review is asked again — `resume` returns
//! [`Outcome::Interrupted`](crate::Outcome::Interrupted) with the same request plus an
//! `error` field saying what was wrong (the anchor's texts, e.g. "Number of human decisions (1)
//! does not match number of hanging tool calls (2)."), and the next `resume` answers it.
//! (Failing the run instead would record the bad answer as the interrupt's resume value, and
//! the thread could not be resumed again.) To check decisions before resuming, use
//! [`ReviewRequest::check`], which returns the same errors typed.
//!
//! **Per-call mode.** With [`interrupt_mode(InterruptMode::PerCall)`](HumanReviewMiddleware::interrupt_mode)
//! there is one interrupt per reviewed call instead, raised by the call's own tools task as it
//! is about to run ([`ToolApproval`]):
//!
//! ```json
//! {"type": "tool_approval", "tool_call_id": "c1", "name": "send_email",
//!  "args": {"body": "hi", "to": "a@x"}, "description": "Tool execution requires approval\n\n…",
//!  "allowed_decisions": ["approve", "edit", "reject", "respond"]}
//! ```
//!
//! Calls that are not reviewed run at once. Each interrupt is answered with one decision,
//! addressed by its id (`resume_review_for(id, decision)`, or `Resume::ByIds` to answer
//! several at once); calls left unanswered ask again. An edit may change the arguments only,
//! not the tool. Wrong answers are asked again, with an `error` field, as in batched mode.
//!
//! **Order with other middleware.** `after_model` hooks run in reverse order: a middleware
//! listed *after* this one sees the model's calls before the review. PII middleware scrubs
//! tool-call arguments as the answer leaves the model call, so a reviewer sees scrubbed
//! arguments whatever the order.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::agent::{
    AgentState, AgentStateUpdate, Hook, HookResult, HookUpdate, Middleware, Runtime, ToolNext,
};
use crate::graph::Pause;
use crate::graph::{Interrupt, Resume};
use crate::message::{Content, ContentPart, Message, ToolCall};
use crate::middleware::python::{py_json, py_repr};
use crate::state::{DynReducer, DynUpdate};
use crate::tool::{Tool, ToolContext, ToolError, ToolExecution};

/// The state channel (a key of `AgentState::custom`) where edited calls wait for the tools
/// node: `{"message_id": <assistant message id>, "edits": {<call id>: {"name", "args"}}}`.
pub const EDITS_KEY: &str = "hitl_edited_tool_calls";

/// The default start of an action request's description.
pub const DEFAULT_DESCRIPTION_PREFIX: &str = "Tool execution requires approval";

/// The middleware's name (and the prefix of its node, `HumanInTheLoopMiddleware.after_model`).
pub const NAME: &str = "HumanInTheLoopMiddleware";

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
                    decision: serde_json::to_string(decision).unwrap_or_default(),
                    decision_type: kind,
                    tool: config.action_name.clone(),
                    allowed: config.allowed_decisions.clone(),
                });
            }
        }
        Ok(())
    }

    /// Parses a resume value (`{"decisions": [...]}` or a bare list) and checks it.
    fn accept(&self, value: &Value) -> Result<Vec<Decision>, ReviewError> {
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
                    message: e.to_string(),
                }
            })?;
            decisions.push(decision);
        }
        self.check(&decisions)?;
        Ok(decisions)
    }
}

/// How a review is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InterruptMode {
    /// One interrupt per model turn listing every reviewed call ([`ReviewRequest`]); the
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
                decision: serde_json::to_string(decision).unwrap_or_default(),
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
                edited: edited_action.name.clone(),
            });
        }
        Ok(())
    }

    /// Parses a resume value (one decision, or `{"decisions": [one]}`) and checks it.
    fn accept(&self, value: &Value) -> Result<Decision, ReviewError> {
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
                message: e.to_string(),
            }
        })?;
        self.check(&decision)?;
        Ok(decision)
    }
}

fn clip(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 200 {
        format!("{}…", text.chars().take(200).collect::<String>())
    } else {
        text
    }
}

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
    allowed: Vec<DecisionType>,
    description: Option<Description>,
    when: Option<ReviewWhen>,
}

#[derive(Clone)]
enum Description {
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
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(Description::Text(text.into()));
        self
    }

    /// A description written for each call from the call and the agent's state.
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
    fn applies(&self, call: &ToolCall, state: &AgentState) -> bool {
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

/// Pauses the run for a person to review the model's calls of chosen tools (see the
/// [module documentation](self)).
///
/// ```
/// use kit::middleware::review::{DecisionType, HumanReviewMiddleware, InterruptOnConfig};
/// use serde_json::json;
///
/// let review = HumanReviewMiddleware::new()
///     .interrupt_on("send_email", true)
///     .interrupt_on("read_file", false)
///     .interrupt_on(
///         "delete_file",
///         InterruptOnConfig::allow([DecisionType::Approve, DecisionType::Reject]).unwrap(),
///     );
/// // The same from configuration:
/// let same = HumanReviewMiddleware::from_json(&json!({
///     "send_email": true,
///     "read_file": false,
///     "delete_file": {"allowed_decisions": ["approve", "reject"]}
/// }))
/// .unwrap();
/// assert_eq!(format!("{review:?}"), format!("{same:?}"));
/// ```
#[derive(Clone)]
pub struct HumanReviewMiddleware {
    interrupt_on: BTreeMap<String, InterruptOn>,
    tools: Vec<Tool>,
    /// How the tools given with `tools` are reviewed when `interrupt_on` does not say.
    tools_config: InterruptOnConfig,
    description_prefix: String,
    mode: InterruptMode,
}

/// LangChain's name for [`HumanReviewMiddleware`].
pub type HumanInTheLoopMiddleware = HumanReviewMiddleware;

impl std::fmt::Debug for HumanReviewMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HumanReviewMiddleware")
            .field("interrupt_on", &self.interrupt_on)
            .field("tools", &self.tools)
            .field("description_prefix", &self.description_prefix)
            .field("mode", &self.mode)
            .finish()
    }
}

impl Default for HumanReviewMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl HumanReviewMiddleware {
    /// Reviews nothing yet: add tools with [`interrupt_on`](Self::interrupt_on).
    pub fn new() -> Self {
        HumanReviewMiddleware {
            interrupt_on: BTreeMap::new(),
            tools: Vec::new(),
            tools_config: InterruptOnConfig::all(),
            description_prefix: DEFAULT_DESCRIPTION_PREFIX.to_string(),
            mode: InterruptMode::Batched,
        }
    }

    /// One interrupt per model turn (the default) or one per reviewed call.
    ///
    /// ```
    /// use kit::middleware::review::{HumanReviewMiddleware, InterruptMode};
    /// let review = HumanReviewMiddleware::new()
    ///     .interrupt_on("send_email", true)
    ///     .interrupt_mode(InterruptMode::PerCall);
    /// # let _ = review;
    /// ```
    pub fn interrupt_mode(mut self, mode: InterruptMode) -> Self {
        self.mode = mode;
        self
    }

    /// How calls of `tool` are reviewed: `true` (all decisions), `false` (no review) or an
    /// [`InterruptOnConfig`].
    pub fn interrupt_on(mut self, tool: impl Into<String>, on: impl Into<InterruptOn>) -> Self {
        self.interrupt_on.insert(tool.into(), on.into());
        self
    }

    /// Adds tools to the agent, reviewed with all four decisions unless
    /// [`interrupt_on`](Self::interrupt_on) configures them otherwise.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// The start of each description (default "Tool execution requires approval").
    pub fn description_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.description_prefix = prefix.into();
        self
    }

    /// Reads an `interrupt_on` map as the anchor writes it: tool → `true`, `false` or
    /// `{"allowed_decisions": [...], "description"?: "..."}`.
    pub fn from_json(interrupt_on: &Value) -> Result<Self, ReviewError> {
        let Some(map) = interrupt_on.as_object() else {
            return Err(ReviewError::InvalidConfig {
                tool: String::new(),
                message: format!(
                    "interrupt_on must be an object of tool names, got {interrupt_on}"
                ),
            });
        };
        let mut review = Self::new();
        for (tool, entry) in map {
            let invalid = |message: String| ReviewError::InvalidConfig {
                tool: tool.clone(),
                message,
            };
            let on = match entry {
                Value::Bool(b) => InterruptOn::from(*b),
                Value::Object(config) => {
                    if let Some(key) = config
                        .keys()
                        .find(|k| !matches!(k.as_str(), "allowed_decisions" | "description"))
                    {
                        return Err(invalid(format!(
                            "unknown key `{key}`; the keys are allowed_decisions and description"
                        )));
                    }
                    let Some(list) = config.get("allowed_decisions").and_then(Value::as_array)
                    else {
                        return Err(invalid(
                            "`allowed_decisions` must be a list such as [\"approve\", \"reject\"]"
                                .to_string(),
                        ));
                    };
                    let mut decisions = Vec::with_capacity(list.len());
                    for d in list {
                        let name = d.as_str().unwrap_or_default();
                        decisions.push(name.parse::<DecisionType>().map_err(|_| {
                            invalid(format!(
                                "unknown decision {d}; use approve, edit, reject or respond"
                            ))
                        })?);
                    }
                    let mut config_value =
                        InterruptOnConfig::allow(decisions).map_err(|e| invalid(e.to_string()))?;
                    if let Some(text) = config.get("description") {
                        let Some(text) = text.as_str() else {
                            return Err(invalid("`description` must be a string".to_string()));
                        };
                        config_value = config_value.description(text);
                    }
                    InterruptOn::Review(config_value)
                }
                other => {
                    return Err(invalid(format!(
                        "expected true, false or {{\"allowed_decisions\": [...]}}, got {other}"
                    )));
                }
            };
            review = review.interrupt_on(tool.clone(), on);
        }
        Ok(review)
    }

    /// How `tool` is reviewed, if it is.
    fn config_for(&self, tool: &str) -> Option<&InterruptOnConfig> {
        match self.interrupt_on.get(tool) {
            Some(InterruptOn::Review(config)) => Some(config),
            Some(InterruptOn::Never) => None,
            None => self
                .tools
                .iter()
                .any(|t| t.name() == tool)
                .then_some(&self.tools_config),
        }
    }

    fn describe(&self, call: &ToolCall, config: &InterruptOnConfig, state: &AgentState) -> String {
        match &config.description {
            Some(Description::Text(text)) => text.clone(),
            Some(Description::Fn(describe)) => describe(call, state),
            None => format!(
                "{}\n\nTool: {}\nArgs: {}",
                self.description_prefix,
                call.name,
                py_repr(&call.args)
            ),
        }
    }
}

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

/// The anchor's note before the result of an edited call.
fn edit_note(name: &str, args: &Value) -> String {
    format!(
        "Note: a human reviewer replaced this tool call before it ran. The call recorded in your \
         message is the one you produced, not the one that executed. This was intentional and \
         authorized. Do not re-issue your original call. Executed instead: {name} with arguments \
         {}.\n\nTool response:\n",
        py_json(args)
    )
}

#[crate::async_trait]
impl Middleware for HumanReviewMiddleware {
    fn name(&self) -> &str {
        NAME
    }

    fn hooks(&self) -> &[Hook] {
        match self.mode {
            InterruptMode::Batched => &[Hook::AfterModel],
            // Each reviewed call asks from its own tools task.
            InterruptMode::PerCall => &[],
        }
    }

    fn requires_checkpointer(&self) -> bool {
        true
    }

    fn tools(&self) -> Vec<Tool> {
        self.tools.clone()
    }

    fn state_channels(&self) -> Vec<(String, Option<DynReducer>)> {
        match self.mode {
            InterruptMode::Batched => vec![(EDITS_KEY.to_string(), None)],
            InterruptMode::PerCall => Vec::new(),
        }
    }

    /// Asks for a review of the reviewed calls of the model's last turn, then answers rejected
    /// and responded calls and stashes edited ones for the tools node.
    async fn after_model(&self, state: &AgentState, rt: &Runtime) -> HookResult {
        let Some(ai_index) = state.last_ai_index() else {
            return Ok(None);
        };
        let ai = &state.messages[ai_index];
        let reviewed: Vec<(&ToolCall, &InterruptOnConfig)> = state
            .pending_tool_calls()
            .into_iter()
            .filter_map(|call| {
                self.config_for(&call.name)
                    .filter(|config| config.applies(call, state))
                    .map(|config| (call, config))
            })
            .collect();
        let stale = state.custom.get(EDITS_KEY).is_some_and(|v| !v.is_null());
        if reviewed.is_empty() {
            // Edits of an earlier turn have been used: drop them from the state.
            return Ok(stale.then(|| {
                HookUpdate::new(
                    AgentStateUpdate::new().custom(DynUpdate::new().set(EDITS_KEY, Value::Null)),
                )
            }));
        }
        let request = ReviewRequest {
            action_requests: reviewed
                .iter()
                .map(|(call, config)| ActionRequest {
                    name: call.name.clone(),
                    args: call.args.clone(),
                    description: self.describe(call, config, state),
                })
                .collect(),
            review_configs: reviewed
                .iter()
                .map(|(call, config)| ReviewConfig {
                    action_name: call.name.clone(),
                    allowed_decisions: config.allowed.clone(),
                })
                .collect(),
            error: None,
        };
        // A wrong answer asks again (a further interrupt of this node, with the reason), so
        // the thread stays resumable; see the module documentation.
        let mut answer = rt.interrupt(&request)?;
        let decisions = loop {
            match request.accept(&answer) {
                Ok(decisions) => break decisions,
                Err(e) => {
                    let again = ReviewRequest {
                        error: Some(e.to_string()),
                        ..request.clone()
                    };
                    answer = rt.interrupt(&again)?;
                }
            }
        };

        let mut results = Vec::new();
        let mut edits = Map::new();
        for ((call, _), decision) in reviewed.iter().zip(decisions) {
            match decision {
                Decision::Approve => {}
                Decision::Edit { edited_action } => {
                    edits.insert(
                        call.id.clone(),
                        json!({"name": edited_action.name, "args": edited_action.args}),
                    );
                }
                Decision::Reject { message } => results.push(rejected(call, message)),
                Decision::Respond { message } => {
                    results.push(Message::tool(&call.id, message).with_name(&call.name));
                }
            }
        }
        let mut update = AgentStateUpdate::new();
        if !results.is_empty() {
            update = update.messages(results);
        }
        if !edits.is_empty() {
            update = update.custom(
                DynUpdate::new().set(EDITS_KEY, json!({"message_id": ai.id, "edits": edits})),
            );
        } else if stale {
            update = update.custom(DynUpdate::new().set(EDITS_KEY, Value::Null));
        }
        Ok(Some(HookUpdate::new(update)))
    }

    /// Runs the reviewer's edited call in place of the model's, with the anchor's note before
    /// its result.
    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        _rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        if self.mode == InterruptMode::PerCall {
            return self.review_call(call, ctx, next).await;
        }
        match edit_for(ctx.state(), &call.id) {
            Some(edit) => run_edited(call.id, edit, ctx, next).await,
            None => next.call(call, ctx).await,
        }
    }
}

impl HumanReviewMiddleware {
    /// Per-call mode: asks about this call (if it is reviewed) from its own tools task, then
    /// carries out the decision.
    async fn review_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        let config = self
            .config_for(&call.name)
            .filter(|config| config.applies(&call, ctx.state()));
        let Some(config) = config else {
            return next.call(call, ctx).await;
        };
        let approval = ToolApproval {
            kind: TOOL_APPROVAL.to_string(),
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            args: call.args.clone(),
            description: self.describe(&call, config, ctx.state()),
            allowed_decisions: config.allowed.clone(),
            error: None,
        };
        // As in batched mode, a wrong answer asks again, so the thread stays resumable.
        let mut asked = approval.clone();
        let decision = loop {
            let answer = match ctx.interrupt(&asked) {
                Ok(answer) => answer,
                Err(ToolError::Interrupted(pause)) => return Err(pause),
                Err(e) => return Ok(ToolExecution::error(&call, e.for_model(&call.name))),
            };
            match approval.accept(&answer) {
                Ok(decision) => break decision,
                Err(e) => {
                    asked = ToolApproval {
                        error: Some(e.to_string()),
                        ..approval.clone()
                    }
                }
            }
        };
        let message = match decision {
            Decision::Approve => return next.call(call, ctx).await,
            Decision::Edit { edited_action } => {
                return run_edited(call.id, edited_action, ctx, next).await;
            }
            Decision::Reject { message } => rejected(&call, message),
            Decision::Respond { message } => Message::tool(&call.id, message).with_name(&call.name),
        };
        Ok(ToolExecution {
            message,
            update: None,
        })
    }
}

/// The error result of a rejected call, in the anchor's words.
fn rejected(call: &ToolCall, reason: Option<String>) -> Message {
    let text = match reason {
        Some(reason) => format!(
            "User rejected the tool call for `{}` with reason: {reason}",
            call.name
        ),
        None => format!(
            "User rejected the tool call for `{}` with id {}. The tool was not executed. Do not \
             retry this tool call unless the user explicitly requests it.",
            call.name, call.id
        ),
    };
    Message::tool_error(&call.id, text).with_name(&call.name)
}

/// Runs the reviewer's edited call under the original call id, with the anchor's note before
/// its result.
async fn run_edited(
    call_id: String,
    edit: Action,
    ctx: ToolContext,
    next: ToolNext<'_>,
) -> Result<ToolExecution, Pause> {
    let note = edit_note(&edit.name, &edit.args);
    let executed = ToolCall {
        id: call_id,
        name: edit.name,
        args: edit.args,
    };
    let mut execution = next.call(executed, ctx).await?;
    match &mut execution.message.content {
        Content::Text(text) => text.insert_str(0, &note),
        Content::Parts(parts) => parts.insert(0, ContentPart::text(note)),
    }
    Ok(execution)
}

/// The reviewer's edit of `call_id`, if the last assistant message's calls were edited.
fn edit_for(state: &AgentState, call_id: &str) -> Option<Action> {
    let stash = state.custom.get(EDITS_KEY)?;
    let ai = &state.messages[state.last_ai_index()?];
    if stash.get("message_id").and_then(Value::as_str) != Some(ai.id.as_str()) {
        return None;
    }
    serde_json::from_value(stash.get("edits")?.get(call_id)?.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_are_checked_against_the_request() {
        let request = ReviewRequest {
            action_requests: vec![ActionRequest {
                name: "delete_file".into(),
                args: json!({}),
                description: String::new(),
            }],
            review_configs: vec![ReviewConfig {
                action_name: "delete_file".into(),
                allowed_decisions: vec![DecisionType::Approve, DecisionType::Reject],
            }],
            error: None,
        };
        assert!(request.check(&[Decision::reject()]).is_ok());
        assert_eq!(
            request
                .check(&[Decision::respond("no")])
                .unwrap_err()
                .to_string(),
            "Unexpected human decision: {\"type\":\"respond\",\"message\":\"no\"}. Decision type \
             'respond' is not allowed for tool 'delete_file'. Expected one of ['approve', \
             'reject'] based on the tool's configuration."
        );
        assert_eq!(
            request.check(&[]).unwrap_err(),
            ReviewError::CountMismatch {
                given: 0,
                expected: 1
            }
        );
        let err = request
            .accept(&json!({"decisions": [{"type": "aprove"}]}))
            .unwrap_err();
        assert!(
            matches!(err, ReviewError::InvalidDecision { index: 0, .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains("unknown variant `aprove`"),
            "{err}"
        );
        let err = request.accept(&json!("yes")).unwrap_err();
        assert!(matches!(err, ReviewError::InvalidPayload(_)), "{err}");
        assert_eq!(
            request.accept(&json!([{"type": "approve"}])).unwrap(),
            [Decision::Approve]
        );
    }

    #[test]
    fn configuration_errors() {
        let err = HumanReviewMiddleware::from_json(&json!({"rm": {"allowed_decisions": []}}))
            .unwrap_err();
        assert!(err.to_string().contains("at least one decision"), "{err}");
        let err =
            HumanReviewMiddleware::from_json(&json!({"rm": {"allowed_decisions": ["aprove"]}}))
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid interrupt_on entry for tool `rm`: unknown decision \"aprove\"; use approve, \
             edit, reject or respond"
        );
        let err =
            HumanReviewMiddleware::from_json(&json!({"rm": {"allowed": ["approve"]}})).unwrap_err();
        assert!(err.to_string().contains("unknown key `allowed`"), "{err}");
        let err = HumanReviewMiddleware::from_json(&json!({"rm": "yes"})).unwrap_err();
        assert!(err.to_string().contains("expected true, false"), "{err}");
    }
}
