//! Agents: a chat model calling tools in a loop, compiled to a graph.
//!
//! ```
//! use kit::agent::Agent;
//! use kit::testing::ScriptedModel;
//! use kit::Message;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::agent::AgentError> {
//! let model = ScriptedModel::new([Message::assistant("Hello!")]);
//! let agent = Agent::builder().name("greeter").model(model).build()?;
//! let out = agent.invoke("Hi").await?;
//! assert_eq!(out.state().final_text(), "Hello!");
//! # Ok(()) }
//! ```
//!
//! The agent is a graph (see [`middleware`] for its shape) run by the same executor as user
//! graphs: with a checkpointer and a thread id, a second `invoke` continues the conversation,
//! interrupts pause it, and `stream_events` streams model tokens, tool calls and middleware
//! events in the same envelopes as graphs.

mod builder;
mod compile;
mod declared;
mod install;
pub mod middleware;
mod state;
mod structured;
pub mod tool;

pub use builder::{AgentBuilder, IntoModelSource, ModelSource};
pub use declared::DeclaredAgent;
pub use install::{BuildContext, IntoMiddleware, Placement};
pub use kit_macros::agent;
pub use middleware::{
    Hook, HookResult, HookUpdate, JumpTo, Middleware, ModelExecution, ModelNext, Runtime, ToolNext,
};
pub use state::{AgentState, AgentStateUpdate, AsyncTask, FileData, Todo, TodoStatus};
pub use structured::{
    StructuredOutput, StructuredOutputError, StructuredStrategy, TypedOutcome, typed_outcome,
};

use std::sync::Arc;

use serde_json::Value;

use crate::event::EventStream;
use futures::future::BoxFuture;

use crate::graph::{
    Graph, GraphError, Invocation, Outcome, Pause, Resume, RunOptions, RunRequest, Runnable,
};
use crate::message::Message;
use crate::model::ModelError;

/// An agent run failed.
///
/// Errors raised by middleware keep their type: [`AgentError::Middleware`] carries the
/// middleware's name and its own error value. The guardrails add helpers to read theirs
/// ([`pii_detected`](AgentError::pii_detected),
/// [`moderation_flagged`](AgentError::moderation_flagged)); for your own middleware use
/// [`downcast_middleware`](AgentError::downcast_middleware).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent definition is invalid.
    #[error("invalid agent: {0}")]
    Build(String),
    /// The model call failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The graph run failed (a checkpoint conflict, the recursion limit, ...).
    #[error(transparent)]
    Graph(GraphError),
    /// A hook jumped somewhere it did not declare in `can_jump_to`.
    #[error(
        "middleware `{middleware}` jumped to `{target}` from {hook} without declaring it; list it \
         in `can_jump_to`"
    )]
    UndeclaredJump {
        /// The middleware.
        middleware: String,
        /// The hook.
        hook: String,
        /// The target.
        target: String,
    },
    /// The model's structured answer never matched the schema (see [`StructuredOutputError`]).
    #[error(transparent)]
    StructuredOutput(StructuredOutputError),
    /// A middleware stopped or failed the run: a guardrail that blocked it, a service it
    /// called that failed. `source` is the middleware's own error value.
    ///
    /// A guardrail's error shows as its own message; a failure (kind `middleware`) as
    /// "middleware `name` failed: …".
    #[error("{}", middleware_text(middleware, kind, source))]
    Middleware {
        /// The middleware.
        middleware: String,
        /// The error's kind, as error events name it (`pii_detected`, or `middleware`).
        kind: &'static str,
        /// The middleware's error.
        #[source]
        source: crate::graph::BoxError,
    },
    /// The pause signal ([`Pause`]): a hook or wrapper paused the run for outside input with
    /// [`Runtime::interrupt`]. Propagate it with `?`; the agent turns it into
    /// [`Outcome::Interrupted`], so callers of `invoke` and `resume` never see it as an error.
    #[error("{0}; propagate this signal with `?` from the hook instead of handling it")]
    Interrupted(Pause),
}

fn middleware_text(middleware: &str, kind: &str, source: &crate::graph::BoxError) -> String {
    if kind == "middleware" {
        format!("middleware `{middleware}` failed: {source}")
    } else {
        source.to_string()
    }
}

/// A middleware failure told as a message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct MiddlewareFailure(String);

impl AgentError {
    /// A middleware failure with a message (kind `middleware`).
    pub fn middleware(middleware: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Self::middleware_error(
            middleware,
            "middleware",
            MiddlewareFailure(message.to_string()),
        )
    }

    /// A middleware's own typed error; `kind` names it in error events (`pii_detected`). Read
    /// it back with [`downcast_middleware`](Self::downcast_middleware).
    pub fn middleware_error(
        middleware: impl Into<String>,
        kind: &'static str,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        AgentError::Middleware {
            middleware: middleware.into(),
            kind,
            source: Box::new(error),
        }
    }

    /// True when the run was cancelled ([`CancelToken`](crate::graph::CancelToken)).
    pub fn is_cancelled(&self) -> bool {
        matches!(self, AgentError::Graph(GraphError::Cancelled))
    }

    /// The error a middleware raised, if it is an `E`.
    pub fn downcast_middleware<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            AgentError::Middleware { source, .. } => source.downcast_ref::<E>(),
            _ => None,
        }
    }

    /// The name of the middleware that raised this error, if one did.
    pub fn middleware_name(&self) -> Option<&str> {
        match self {
            AgentError::Middleware { middleware, .. } => Some(middleware),
            _ => None,
        }
    }

    /// The underlying graph error, if any.
    pub fn graph_error(&self) -> Option<&GraphError> {
        match self {
            AgentError::Graph(e) => Some(e),
            _ => None,
        }
    }

    /// A short machine-readable kind.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentError::Build(_) => "build",
            AgentError::Model(e) => e.kind(),
            AgentError::Graph(e) => e.kind(),
            AgentError::UndeclaredJump { .. } => "undeclared_jump",
            AgentError::StructuredOutput(_) => "structured_output",
            AgentError::Middleware { kind, .. } => kind,
            AgentError::Interrupted(_) => "interrupted",
        }
    }
}

impl From<Pause> for AgentError {
    fn from(pause: Pause) -> Self {
        AgentError::Interrupted(pause)
    }
}

impl From<crate::checkpoint::CheckpointError> for AgentError {
    /// A checkpointer that could not be opened (`checkpointer = Arc::new(
    /// SqliteCheckpointer::open("threads.sqlite")?)` in `#[agent]`) or failed.
    fn from(e: crate::checkpoint::CheckpointError) -> Self {
        AgentError::Graph(GraphError::Checkpoint(e))
    }
}

impl From<crate::store::StoreError> for AgentError {
    /// A store that could not be opened (`store = SqliteStore::open("memory.sqlite")?` in
    /// `#[agent]`).
    fn from(e: crate::store::StoreError) -> Self {
        AgentError::Build(format!("the long-term store could not be set up: {e}"))
    }
}

impl From<GraphError> for AgentError {
    /// Unwraps agent errors raised inside nodes so callers can match on them.
    fn from(e: GraphError) -> Self {
        match e {
            GraphError::NodeFailed { source, node, step } => {
                match source.downcast::<AgentError>() {
                    Ok(agent_error) => *agent_error,
                    Err(source) => AgentError::Graph(GraphError::NodeFailed { node, step, source }),
                }
            }
            other => AgentError::Graph(other),
        }
    }
}

/// The kind of a failed agent run, as its `error` event names it: the agent error a node
/// raised (`pii_detected`, `model_context_length`, ...) rather than `node_failed`.
pub(crate) fn error_kind(e: &GraphError) -> &'static str {
    match e {
        GraphError::NodeFailed { source, .. } => source
            .downcast_ref::<AgentError>()
            .map_or("node_failed", AgentError::kind),
        other => other.kind(),
    }
}

/// The result of an agent run: the final state, or a pause for human input.
pub type AgentOutcome = Outcome<AgentState>;

/// What an agent is invoked with: converts from a user text, a message, messages, a JSON
/// `{"messages": [...]}` map, or a state update.
pub struct AgentInput(pub AgentStateUpdate);

impl From<&str> for AgentInput {
    fn from(text: &str) -> Self {
        AgentInput(AgentStateUpdate::new().messages(vec![Message::user(text)]))
    }
}

impl From<String> for AgentInput {
    fn from(text: String) -> Self {
        AgentInput(AgentStateUpdate::new().messages(vec![Message::user(text)]))
    }
}

impl From<Message> for AgentInput {
    fn from(m: Message) -> Self {
        AgentInput(AgentStateUpdate::new().messages(vec![m]))
    }
}

impl From<Vec<Message>> for AgentInput {
    fn from(messages: Vec<Message>) -> Self {
        AgentInput(AgentStateUpdate::new().messages(messages))
    }
}

impl From<AgentStateUpdate> for AgentInput {
    fn from(update: AgentStateUpdate) -> Self {
        AgentInput(update)
    }
}

impl TryFrom<Value> for AgentInput {
    type Error = AgentError;

    /// Accepts `{"messages": [...]}` with full messages or `{role, content}` objects.
    fn try_from(value: Value) -> Result<Self, AgentError> {
        let Some(list) = value.get("messages").and_then(Value::as_array) else {
            return Err(AgentError::Build(
                "agent input must be an object with a `messages` list".into(),
            ));
        };
        let mut messages = Vec::with_capacity(list.len());
        for (i, m) in list.iter().enumerate() {
            let message = match serde_json::from_value::<Message>(m.clone()) {
                Ok(full) => full,
                Err(_) => {
                    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
                    let content = m.get("content").and_then(Value::as_str).ok_or_else(|| {
                        AgentError::Build(format!("input message {i} has no text `content`"))
                    })?;
                    match role {
                        "user" | "human" => Message::user(content),
                        "assistant" | "ai" => Message::assistant(content),
                        "system" => Message::system(content),
                        other => {
                            return Err(AgentError::Build(format!(
                                "input message {i} has unknown role `{other}`"
                            )));
                        }
                    }
                }
            };
            messages.push(message);
        }
        Ok(AgentInput::from(messages))
    }
}

/// A compiled agent. Cheap to clone and to share between tasks.
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Arc<compile::AgentCore>,
    pub(crate) graph: Graph<AgentState>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.inner.name)
            .field("nodes", &self.graph.node_names())
            .finish()
    }
}

impl Agent {
    /// Starts building an agent.
    pub fn builder() -> AgentBuilder {
        AgentBuilder::default()
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The graph the agent compiles to.
    pub fn graph(&self) -> &Graph<AgentState> {
        &self.graph
    }

    /// The names of the tools the model sees.
    pub fn tool_names(&self) -> Vec<&str> {
        self.inner.tools.iter().map(|t| t.name()).collect()
    }

    fn options(&self, opts: &RunOptions) -> RunOptions {
        let mut opts = opts.clone();
        if opts.recursion_limit.is_none() {
            opts.recursion_limit = self.inner.recursion_limit;
        }
        if opts.tracer.is_none() {
            opts.tracer.clone_from(&self.inner.tracer);
        }
        opts.trace_kind = Some(crate::trace::RunKind::Agent);
        if let Some(sink) = opts.events.take() {
            opts.events = Some(match self.event_filter() {
                Some(filter) => sink.with_filter(filter),
                None => sink,
            });
        }
        opts
    }

    /// A fresh chain of the middleware's event filters for one run, innermost middleware
    /// first: the order in which their `wrap_model_call`s see the model's answer.
    fn event_filter(&self) -> Option<Arc<dyn crate::event::EventFilter>> {
        crate::event::chain(
            self.inner
                .middleware
                .iter()
                .rev()
                .filter_map(|m| m.event_filter())
                .collect(),
        )
    }

    /// Runs the agent on `input` until it answers or pauses: set per-run options on the
    /// returned [`Invocation`] (`.thread_id("t1")` continues that conversation, given a
    /// checkpointer), then `.await` it.
    pub fn invoke(&self, input: impl Into<AgentInput>) -> Invocation<'_, Self> {
        Invocation::new(self, RunRequest::Input(input.into()))
    }

    /// Lets every middleware see (and guard) the input before it is stored.
    fn prepare_input(&self, input: AgentInput) -> Result<AgentStateUpdate, AgentError> {
        let AgentInput(mut update) = input;
        for m in &self.inner.middleware {
            m.transform_input(&mut update)?;
        }
        Ok(update)
    }

    /// Continues a paused run: `payload` answers its interrupts (for human review,
    /// `kit::middleware::review::resume_review` builds it).
    pub fn resume(&self, payload: impl Into<Resume>) -> Invocation<'_, Self> {
        Invocation::new(self, RunRequest::Resume(payload.into()))
    }

    /// Continues a paused run as [`resume`](Self::resume) does, first applying `update` (new
    /// messages, say) to its state: LangGraph's `Command(resume=..., update=...)`. Input
    /// middleware (PII) sees the update as it sees new input.
    pub fn resume_with(
        &self,
        payload: impl Into<Resume>,
        update: impl Into<AgentInput>,
    ) -> Invocation<'_, Self> {
        Invocation::new(
            self,
            RunRequest::Command {
                resume: payload.into(),
                update: update.into(),
            },
        )
    }

    /// Runs the agent and streams its events (model tokens, tool calls, middleware, state
    /// updates, interrupts, errors, completion).
    pub fn stream_events(&self, input: impl Into<AgentInput>, opts: &RunOptions) -> EventStream {
        self.run_streamed(RunRequest::Input(input.into()), opts.clone())
    }

    /// Resumes a paused run and streams its events.
    pub fn stream_resume(&self, payload: impl Into<Resume>, opts: &RunOptions) -> EventStream {
        self.run_streamed(RunRequest::Resume(payload.into()), opts.clone())
    }
}

impl Runnable for Agent {
    type Input = AgentInput;
    type Output = AgentOutcome;
    type Error = AgentError;

    fn run(
        &self,
        request: RunRequest<AgentInput>,
        opts: RunOptions,
    ) -> BoxFuture<'_, Result<AgentOutcome, AgentError>> {
        Box::pin(async move {
            let request = match request {
                RunRequest::Input(input) => RunRequest::Input(self.prepare_input(input)?),
                RunRequest::Resume(resume) => RunRequest::Resume(resume),
                RunRequest::Command { resume, update } => RunRequest::Command {
                    resume,
                    update: self.prepare_input(update)?,
                },
            };
            Ok(self.graph.run(request, self.options(&opts)).await?)
        })
    }

    fn run_streamed(&self, request: RunRequest<AgentInput>, opts: RunOptions) -> EventStream {
        let request = match request {
            RunRequest::Resume(resume) => Ok(RunRequest::Resume(resume)),
            RunRequest::Input(input) => self.prepare_input(input).map(RunRequest::Input),
            RunRequest::Command { resume, update } => self
                .prepare_input(update)
                .map(|update| RunRequest::Command { resume, update }),
        };
        match request {
            Ok(request) => {
                self.graph
                    .stream_input(request.into(), &self.options(&opts), self.event_filter())
            }
            Err(e) => {
                // A refused input: the stream reports it and ends.
                let mut event =
                    crate::event::Event::error(&*self.inner.name, e.to_string(), e.kind());
                event.metadata.thread_id = opts.thread_id.clone();
                Box::pin(futures::stream::once(async move { event }))
            }
        }
    }
}
