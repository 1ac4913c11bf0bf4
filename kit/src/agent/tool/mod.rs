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

mod compiled;
mod context;
mod error;
mod output;
mod traced;
mod validate;

pub use context::ToolContext;
pub use error::{IntoToolError, ToolError};
pub use output::{ToolExecution, ToolOutput};
pub(crate) use traced::finish_tool_run;
pub use validate::validate_args;

use compiled::ArgsCheck;

/// The metadata key of an error result's kind ([`ToolError::kind`]): `failed` for a tool that
/// returned an error, `invalid_arguments` for arguments that did not match the schema. Error
/// results a tool returned as its output on purpose have none.
pub const ERROR_KIND_KEY: &str = "error_kind";

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::graph::Pause;
use crate::message::{Content, Message, ToolCall};
use crate::model::ToolSpec;
use crate::text::{clip, json_type, panic_text};

/// Anything an agent takes as a tool: a [`Tool`], or the value `#[tool]` generates for an
/// async function (a unit struct named after it: `#[tool] async fn lookup_order` gives
/// `LookupOrder`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool",
    label = "not a tool",
    note = "an agent takes a `Tool`, the value a `#[tool]` function generates (`#[tool] async fn \
            lookup_order` gives `LookupOrder`), or `Args::tool()` for a `#[derive(Tool)]` struct"
)]
pub trait IntoTool {
    /// The tool.
    fn into_tool(self) -> Tool;
}

impl IntoTool for Tool {
    fn into_tool(self) -> Tool {
        self
    }
}

/// A tool: its spec for the model and its handler. Cheap to clone.
#[derive(Clone)]
pub struct Tool {
    spec: Arc<ToolSpec>,
    /// The spec's `parameters`, compiled for checking calls (built with the spec; the
    /// parameters never change after).
    args_check: Arc<ArgsCheck>,
    max_result_chars: Option<usize>,
    handler: Arc<dyn DynTool>,
    /// Tags of its trace runs.
    tags: Arc<[String]>,
    /// Metadata of its trace runs (redacted like every trace field).
    metadata: Arc<serde_json::Map<String, Value>>,
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

    /// Runs the tool on borrowed arguments: what [`Tool::execute`] calls. The default copies
    /// them into [`call`](Self::call); a tool that only reads its arguments (a derived tool
    /// deserialising them, say) can skip the copy.
    async fn call_ref(&self, args: &Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.call(args.clone(), ctx).await
    }
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
        self.call_ref(&args, ctx).await
    }

    /// Deserialises straight from the borrowed arguments (no copy of the JSON tree).
    async fn call_ref(&self, args: &Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let input = T::deserialize(args).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
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
        let spec = ToolSpec::new(name, description, parameters);
        Tool {
            args_check: Arc::new(ArgsCheck::new(&spec.parameters)),
            spec: Arc::new(spec),
            max_result_chars: None,
            handler: Arc::new(handler),
            tags: Arc::from([]),
            metadata: Arc::default(),
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
        let spec = ToolSpec::new(T::NAME, T::description(), T::parameters());
        Tool {
            args_check: Arc::new(ArgsCheck::new(&spec.parameters)),
            spec: Arc::new(spec),
            max_result_chars: T::MAX_RESULT_CHARS,
            handler: Arc::new(TypedTool::<T>(std::marker::PhantomData)),
            tags: Arc::from([]),
            metadata: Arc::default(),
        }
    }

    /// Asks the provider to hold the model's arguments to the schema exactly (OpenAI's
    /// per-tool `strict`; see [`ToolSpec::strict`](crate::model::ToolSpec::strict)).
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        Arc::make_mut(&mut self.spec).strict = Some(strict);
        self
    }

    /// Caps the result length (characters); longer results are cut with a marker.
    #[must_use]
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
            Value::Object(_) => match self.args_check.validate(&self.spec.parameters, &call.args) {
                Ok(()) => {
                    let fut = self.handler.call_ref(&call.args, ctx);
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
            Value::String(raw) => Err(ToolError::InvalidArguments(
                // Well-formed JSON arrives as text only when it nests too deep to keep.
                if serde_json::from_str::<serde::de::IgnoredAny>(raw).is_ok() {
                    format!(
                        "the arguments nest more than {} levels deep; send flatter arguments",
                        crate::model::MAX_ARGS_DEPTH
                    )
                } else {
                    format!("the arguments are not valid JSON: {}", clip(raw, 200))
                },
            )),
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
            Err(e) => {
                let mut execution = ToolExecution::error(call, e.for_model(&call.name));
                execution
                    .message
                    .metadata
                    .insert(ERROR_KIND_KEY.into(), Value::from(e.kind()));
                Ok(execution)
            }
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
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
