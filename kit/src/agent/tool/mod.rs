//! Tools: what a model can call.
//!
//! A [`Tool`] is a name, a description, a JSON Schema for its arguments and a handler. Make one
//! with `#[derive(Tool)]` on an argument struct (the schema comes from `schemars`, the
//! description from the doc comment) or with [`Tool::from_fn`] for tools assembled at run time.
//!
//! Arguments from a model are checked against the schema before the handler runs. A validation
//! failure, a handler error or a panic becomes an *error tool result* with a message the model
//! can act on — never a panic of the agent, never a lost call. Results longer than
//! `max_result_chars` are cut with a visible marker.
//!
//! ```
//! use kit::tool::{Tool, ToolOutput};
//! use serde_json::json;
//!
//! let add = Tool::from_fn(
//!     "add",
//!     "Adds two integers.",
//!     json!({
//!         "type": "object",
//!         "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
//!         "required": ["a", "b"]
//!     }),
//!     |args, _ctx| async move {
//!         let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
//!         Ok(ToolOutput::text(sum.to_string()))
//!     },
//! );
//! assert_eq!(add.name(), "add");
//! ```

mod validate;

pub use validate::validate_args;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{AgentState, AgentStateUpdate};
use crate::graph::{NodeContext, NodeError, Pause};
use crate::message::{Content, Message, ToolCall, ToolStatus};
use crate::model::ToolSpec;
use crate::text::{clip, json_type, panic_text};

/// A tool: its spec for the model and its handler. Cheap to clone.
#[derive(Clone)]
pub struct Tool {
    spec: Arc<ToolSpec>,
    max_result_chars: Option<usize>,
    handler: Arc<dyn DynTool>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.spec.name)
            .finish()
    }
}

/// The object-safe form of a tool, for tools written by hand. Wrap one with [`Tool::new`].
#[async_trait::async_trait]
pub trait DynTool: Send + Sync + 'static {
    /// Runs the tool on already-validated arguments.
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError>;
}

/// What `#[derive(Tool)]` generates for an argument struct: the tool's name, description,
/// schema and result cap.
pub trait ToolDefinition {
    /// The tool name.
    const NAME: &'static str;
    /// The cap on the result length, in characters.
    const MAX_RESULT_CHARS: Option<usize> = None;
    /// The description (the struct's doc comment).
    fn description() -> String;
    /// The JSON Schema of the arguments.
    fn parameters() -> Value;
}

/// The handler of a derived tool: implement it on the argument struct.
///
/// ```
/// use kit::tool::{ToolContext, ToolError, ToolHandler};
///
/// /// Adds two integers.
/// #[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
/// struct Add {
///     /// The first addend.
///     a: i64,
///     /// The second addend.
///     b: i64,
/// }
///
/// impl ToolHandler for Add {
///     type Output = i64;
///     async fn run(self, _ctx: ToolContext) -> Result<i64, ToolError> {
///         Ok(self.a + self.b)
///     }
/// }
///
/// let tool = Add::tool();
/// assert_eq!(tool.name(), "add");
/// assert_eq!(tool.description(), "Adds two integers.");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` derives Tool but has no handler",
    label = "implement `kit::tool::ToolHandler` for `{Self}`",
    note = "the handler is `async fn run(self, ctx: ToolContext) -> Result<Output, ToolError>`"
)]
pub trait ToolHandler: DeserializeOwned + Send + 'static {
    /// What the tool returns; serialised for the model (a string is sent as is).
    type Output: Serialize + Send;
    /// Runs the tool.
    fn run(self, ctx: ToolContext) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;
}

struct TypedTool<T>(std::marker::PhantomData<fn() -> T>);

#[async_trait::async_trait]
impl<T: ToolHandler + ToolDefinition> DynTool for TypedTool<T> {
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let input: T =
            serde_json::from_value(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        let output = input.run(ctx).await?;
        Ok(ToolOutput::json(&output))
    }
}

type Handler =
    dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync;

struct FnTool(Box<Handler>);

#[async_trait::async_trait]
impl DynTool for FnTool {
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        (self.0)(args, ctx).await
    }
}

impl Tool {
    /// A tool from a hand-written [`DynTool`].
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: impl DynTool,
    ) -> Tool {
        Tool {
            spec: Arc::new(ToolSpec {
                name: name.into(),
                description: description.into(),
                parameters,
            }),
            max_result_chars: None,
            handler: Arc::new(handler),
        }
    }

    /// A tool from a function: `handler(args, ctx)` gets the validated JSON arguments.
    pub fn from_fn<F, Fut, O>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        handler: F,
    ) -> Tool
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        let handler: Box<Handler> = Box::new(move |args, ctx| {
            let fut = handler(args, ctx);
            Box::pin(async move { fut.await.map(Into::into) })
        });
        Tool::new(name, description, parameters, FnTool(handler))
    }

    /// The tool of a `#[derive(Tool)]` argument struct.
    pub fn of<T: ToolHandler + ToolDefinition>() -> Tool {
        Tool {
            spec: Arc::new(ToolSpec {
                name: T::NAME.to_string(),
                description: T::description(),
                parameters: T::parameters(),
            }),
            max_result_chars: T::MAX_RESULT_CHARS,
            handler: Arc::new(TypedTool::<T>(std::marker::PhantomData)),
        }
    }

    /// Caps the result length (characters); longer results are cut with a marker.
    pub fn with_max_result_chars(mut self, max: usize) -> Tool {
        self.max_result_chars = Some(max);
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The tool's description.
    pub fn description(&self) -> &str {
        &self.spec.description
    }

    /// The argument schema.
    pub fn parameters(&self) -> &Value {
        &self.spec.parameters
    }

    /// The spec sent to models.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The result cap, if any.
    pub fn max_result_chars(&self) -> Option<usize> {
        self.max_result_chars
    }

    /// Runs the tool on a model's call: validates the arguments, runs the handler (catching
    /// panics), and turns every failure into an error result for the model.
    ///
    /// `Err` is the pause signal: the tool (or a subagent it ran) waits for outside input.
    pub async fn execute(&self, call: &ToolCall, ctx: ToolContext) -> Result<ToolExecution, Pause> {
        let result = match &call.args {
            Value::Object(_) => match validate_args(&self.spec.parameters, &call.args) {
                Ok(()) => {
                    let fut = self.handler.call(call.args.clone(), ctx);
                    match AssertUnwindSafe(fut).catch_unwind().await {
                        Ok(result) => result,
                        Err(panic) => Err(ToolError::Failed(format!(
                            "the tool crashed ({}); this is a bug in the tool, not in your call",
                            panic_text(panic.as_ref()).unwrap_or("panic")
                        ))),
                    }
                }
                Err(problems) => Err(ToolError::InvalidArguments(problems.join("; "))),
            },
            Value::String(raw) => Err(ToolError::InvalidArguments(format!(
                "the arguments are not valid JSON: {}",
                clip(raw, 200)
            ))),
            other => Err(ToolError::InvalidArguments(format!(
                "the arguments must be a JSON object, got {}",
                json_type(other)
            ))),
        };
        match result {
            Ok(output) => {
                let mut message = Message {
                    content: output.content,
                    ..Message::tool(&call.id, "")
                };
                message.name = Some(call.name.clone());
                message.status = Some(output.status);
                if let Some(max) = self.max_result_chars {
                    truncate_content(&mut message.content, max);
                }
                Ok(ToolExecution {
                    message,
                    update: output.update,
                })
            }
            Err(ToolError::Interrupted(pause)) => Err(pause),
            Err(e) => Ok(ToolExecution::error(call, e.for_model(&call.name))),
        }
    }
}

/// The outcome of running one tool call that did not pause.
#[derive(Debug)]
pub struct ToolExecution {
    /// The tool message answering the call (an error result when it failed).
    pub message: Message,
    /// A state update the tool asked for.
    pub update: Option<AgentStateUpdate>,
}

impl ToolExecution {
    /// An error result answering `call`: the model sees `text`.
    pub fn error(call: &ToolCall, text: impl Into<String>) -> Self {
        let text: String = text.into();
        ToolExecution {
            message: Message::tool_error(&call.id, text).with_name(&call.name),
            update: None,
        }
    }
}

/// What a tool returns.
#[derive(Debug, Default)]
pub struct ToolOutput {
    /// The content the model sees.
    pub content: Content,
    /// Success, or an error the model should react to.
    pub status: ToolStatus,
    /// State the tool writes (todos, files, async tasks, custom channels).
    pub update: Option<AgentStateUpdate>,
}

impl ToolOutput {
    /// A text result.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            content: Content::Text(text.into()),
            ..Self::default()
        }
    }

    /// A JSON result (a JSON string is sent as plain text).
    pub fn json<T: Serialize + ?Sized>(value: &T) -> Self {
        match serde_json::to_value(value) {
            Ok(Value::String(s)) => Self::text(s),
            Ok(v) => Self::text(v.to_string()),
            Err(e) => Self::error(format!("the tool's result could not be serialised: {e}")),
        }
    }

    /// An error result: the model is told `text` and that the call failed.
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            content: Content::Text(text.into()),
            status: ToolStatus::Error,
            update: None,
        }
    }

    /// Adds a state update.
    pub fn with_update(mut self, update: AgentStateUpdate) -> Self {
        self.update = Some(update);
        self
    }
}

impl From<String> for ToolOutput {
    fn from(s: String) -> Self {
        ToolOutput::text(s)
    }
}

impl From<&str> for ToolOutput {
    fn from(s: &str) -> Self {
        ToolOutput::text(s)
    }
}

impl From<Value> for ToolOutput {
    fn from(v: Value) -> Self {
        ToolOutput::json(&v)
    }
}

/// A tool failed. Any `std::error::Error` converts into it with `?`.
pub enum ToolError {
    /// The tool failed; the message is shown to the model.
    Failed(String),
    /// The arguments were wrong; the message says how.
    InvalidArguments(String),
    /// The tool (or a subagent it runs) paused for outside input: the [`Pause`] signal.
    Interrupted(Pause),
}

impl ToolError {
    /// A failure with a message for the model.
    pub fn new(message: impl std::fmt::Display) -> Self {
        ToolError::Failed(message.to_string())
    }

    /// Invalid arguments, with what is wrong.
    pub fn invalid_args(message: impl std::fmt::Display) -> Self {
        ToolError::InvalidArguments(message.to_string())
    }

    /// The text the model sees.
    pub fn for_model(&self, tool: &str) -> String {
        match self {
            ToolError::Failed(m) => format!("Error: {m}"),
            ToolError::InvalidArguments(m) => format!(
                "Error: invalid arguments for tool `{tool}`: {m}. Fix the arguments and call \
                 the tool again."
            ),
            ToolError::Interrupted(_) => "interrupted".to_string(),
        }
    }
}

impl std::fmt::Debug for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Failed(m) => write!(f, "Failed({m:?})"),
            ToolError::InvalidArguments(m) => write!(f, "InvalidArguments({m:?})"),
            ToolError::Interrupted(p) => write!(f, "Interrupted({} pending)", p.interrupts().len()),
        }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Failed(m) => f.write_str(m),
            ToolError::InvalidArguments(m) => write!(f, "invalid arguments: {m}"),
            ToolError::Interrupted(p) => write!(f, "{p}"),
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(e: E) -> Self {
        ToolError::Failed(e.to_string())
    }
}

impl From<Pause> for ToolError {
    fn from(pause: Pause) -> Self {
        ToolError::Interrupted(pause)
    }
}

impl From<NodeError> for ToolError {
    fn from(e: NodeError) -> Self {
        match e.into_pause() {
            Ok(pause) => ToolError::Interrupted(pause),
            Err(e) => ToolError::Failed(e.to_string()),
        }
    }
}

/// What a tool knows about the call: the call id, the agent's state at the model turn that made
/// the call, and the node context (for interrupts, events and subagents).
#[derive(Clone)]
pub struct ToolContext {
    call_id: String,
    state: Arc<AgentState>,
    node: Option<NodeContext>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// A context inside an agent run.
    pub fn new(
        call_id: impl Into<String>,
        state: Arc<AgentState>,
        node: Option<NodeContext>,
    ) -> Self {
        ToolContext {
            call_id: call_id.into(),
            state,
            node,
        }
    }

    /// A context outside any agent (tests, direct calls).
    pub fn detached() -> Self {
        Self::new("call_detached", Arc::new(AgentState::default()), None)
    }

    /// The id of the call being answered.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The agent state the call was made in.
    pub fn state(&self) -> &AgentState {
        &self.state
    }

    /// The shared state snapshot.
    pub fn state_arc(&self) -> &Arc<AgentState> {
        &self.state
    }

    /// The graph node context, inside an agent run.
    pub fn node(&self) -> Option<&NodeContext> {
        self.node.as_ref()
    }

    /// Pauses the run for outside input (see [`NodeContext::interrupt`]).
    pub fn interrupt(&self, value: impl Serialize) -> Result<Value, ToolError> {
        match &self.node {
            Some(node) => node.interrupt(value).map_err(ToolError::from),
            None => Err(ToolError::new(
                "this tool asked for human input, but it is not running inside an agent",
            )),
        }
    }
}

/// Cuts text parts so the content has at most `max` characters, with a visible marker.
pub fn truncate_content(content: &mut Content, max: usize) {
    let total: usize = match content {
        Content::Text(t) => t.chars().count(),
        Content::Parts(_) => content.text().chars().count(),
    };
    if total <= max {
        return;
    }
    let text = content.text();
    let kept: String = text.chars().take(max).collect();
    *content = Content::Text(format!(
        "{kept}\n\n[... result truncated: showing {max} of {total} characters]"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn add() -> Tool {
        Tool::from_fn(
            "add",
            "Adds.",
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
            |args, _| async move {
                if args["a"] == 13 {
                    return Err(ToolError::new("unlucky"));
                }
                if args["a"] == 99 {
                    panic!("oops");
                }
                Ok(ToolOutput::text(
                    (args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)).to_string(),
                ))
            },
        )
    }

    async fn run(tool: &Tool, args: Value) -> Message {
        tool.execute(
            &ToolCall::with_id("c1", "add", args),
            ToolContext::detached(),
        )
        .await
        .expect("the tool does not pause")
        .message
    }

    #[tokio::test]
    async fn every_failure_becomes_an_error_result() {
        let t = add();
        let ok = run(&t, json!({"a": 1, "b": 2})).await;
        assert_eq!(ok.text(), "3");
        assert!(!ok.is_error());
        assert_eq!(ok.tool_call_id.as_deref(), Some("c1"));
        let missing = run(&t, json!({"a": 1})).await;
        assert!(missing.is_error());
        assert!(
            missing.text().contains("`b` is required"),
            "{}",
            missing.text()
        );
        let typed = run(&t, json!({"a": "x", "b": 2})).await;
        assert!(
            typed.text().contains("`a`: expected integer"),
            "{}",
            typed.text()
        );
        let raw = run(&t, Value::String("{a: 1".into())).await;
        assert!(raw.text().contains("not valid JSON"), "{}", raw.text());
        let failed = run(&t, json!({"a": 13, "b": 0})).await;
        assert_eq!(failed.text(), "Error: unlucky");
        let panicked = run(&t, json!({"a": 99, "b": 0})).await;
        assert!(panicked.is_error());
        assert!(panicked.text().contains("oops"));
    }

    #[tokio::test]
    async fn long_results_are_truncated_with_a_marker() {
        let t = Tool::from_fn("long", "Long.", json!({"type": "object"}), |_, _| async {
            Ok::<_, ToolError>("é".repeat(50))
        })
        .with_max_result_chars(10);
        let m = t
            .execute(
                &ToolCall::with_id("c", "long", json!({})),
                ToolContext::detached(),
            )
            .await
            .expect("the tool does not pause")
            .message;
        assert!(m.text().starts_with("éééééééééé\n"), "{}", m.text());
        assert!(m.text().contains("showing 10 of 50 characters"));
    }
}
