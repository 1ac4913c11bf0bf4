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
//! let Outcome::Interrupted(paused) = agent.invoke("Say hi to Ann").options(&opts).await? else {
//!     return Err("expected a review".into());
//! };
//! let request = ReviewRequest::from_interrupt(&paused.interrupts[0])?;
//! assert_eq!(request.action_requests[0].name, "send_email");
//!
//! let done = agent.resume(resume_review([Decision::approve()])).options(&opts).await?;
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
//! **Resuming.** `agent.resume(resume_review(decisions)).options(&opts)` with one [`Decision`] per
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
//! [`ReviewRequest::check`], which returns the same errors typed. The error repeats at most the
//! first 300 characters of a wrong answer, and after [`MAX_WRONG_ANSWERS`] (16) wrong answers
//! in a row the review stops asking and its calls are not run (each gets an error result saying
//! why): every answer is kept with the thread and read again on each resume, so asking forever
//! would let one client grow the thread without end.
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

mod approval;
mod config;
mod decision;
mod error;
mod hooks;
mod resume;

pub use approval::{InterruptMode, TOOL_APPROVAL, ToolApproval};
pub use config::{InterruptOn, InterruptOnConfig, ReviewDescription, ReviewWhen};
pub use decision::{Action, ActionRequest, Decision, DecisionType, ReviewConfig, ReviewRequest};
pub use error::ReviewError;
pub use hooks::MAX_WRONG_ANSWERS;
pub use resume::{ReviewDecisions, resume_review, resume_review_for};

use std::collections::BTreeMap;

use serde_json::Value;

use crate::agent::AgentState;
use crate::message::ToolCall;
use crate::middleware::python::py_repr;
use crate::tool::Tool;

use config::Description;

/// The state channel (a key of `AgentState::custom`) where edited calls wait for the tools
/// node: `{"message_id": <assistant message id>, "edits": {<call id>: {"name", "args"}}}`.
pub const EDITS_KEY: &str = "hitl_edited_tool_calls";

/// The default start of an action request's description.
pub const DEFAULT_DESCRIPTION_PREFIX: &str = "Tool execution requires approval";

/// The middleware's name (and the prefix of its node, `HumanInTheLoopMiddleware.after_model`).
pub const NAME: &str = "HumanInTheLoopMiddleware";

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
    #[must_use]
    pub fn interrupt_mode(mut self, mode: InterruptMode) -> Self {
        self.mode = mode;
        self
    }

    /// How calls of `tool` are reviewed: `true` (all decisions), `false` (no review) or an
    /// [`InterruptOnConfig`].
    #[must_use]
    pub fn interrupt_on(mut self, tool: impl Into<String>, on: impl Into<InterruptOn>) -> Self {
        self.interrupt_on.insert(tool.into(), on.into());
        self
    }

    /// Adds tools to the agent, reviewed with all four decisions unless
    /// [`interrupt_on`](Self::interrupt_on) configures them otherwise.
    #[must_use]
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// The start of each description (default "Tool execution requires approval").
    #[must_use]
    pub fn description_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.description_prefix = prefix.into();
        self
    }

    /// The gate a sync subagent inherits: the same reviews, without the tools this middleware
    /// adds (a child has the tools its spec gives it); those tools stay gated should the child
    /// have them.
    pub(crate) fn for_child(&self) -> Self {
        let mut child = self.clone();
        for tool in std::mem::take(&mut child.tools) {
            child
                .interrupt_on
                .entry(tool.name().to_string())
                .or_insert_with(|| InterruptOn::Review(self.tools_config.clone()));
        }
        child
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
