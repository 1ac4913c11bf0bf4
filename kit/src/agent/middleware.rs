//! The middleware system: hooks around the agent loop.
//!
//! ```text
//! START → before_agent* → before_model* → model → after_model* ─┬─ tool calls → tools ─┐
//!                              ↑                                 │                     │
//!                              └─────────────────────────────────┼─────────────────────┘
//!                                                                └─ answer → after_agent* → END
//! ```
//!
//! **Order.** `before_*` hooks run in the order the middleware was given; `after_*` hooks run
//! in **reverse** order; for `wrap_model_call` and `wrap_tool_call` the first middleware is the
//! outermost wrapper. (The same rules as LangChain's `create_agent`.)
//!
//! **Hooks.** Each `before_*` / `after_*` hook of each middleware is its own graph node, so it
//! sees the state as left by the previous hook, can pause the run with an interrupt without
//! re-running the others, and shows up in events and traces as `<middleware>.<hook>`. A hook
//! returns nothing, a [`HookUpdate`] (state changes, and optionally `jump_to`), or an error.
//! Jumping requires declaring the target in [`Middleware::can_jump_to`]; an undeclared jump is
//! an error.
//!
//! **Wrapping.** `wrap_model_call` gets the request and a [`ModelNext`] to call the rest of the
//! chain (any number of times: retries, fallbacks); `wrap_tool_call` likewise with [`ToolNext`].
//!
//! A custom guardrail that ends the run when the user goes off topic:
//!
//! ```
//! use kit::agent::{AgentError, AgentState, Hook, HookResult, HookUpdate, JumpTo, Middleware, Runtime};
//! use kit::Message;
//!
//! struct TopicFilter;
//!
//! #[kit::async_trait]
//! impl Middleware for TopicFilter {
//!     fn name(&self) -> &str { "TopicFilter" }
//!     fn hooks(&self) -> &[Hook] { &[Hook::BeforeAgent] }
//!     fn can_jump_to(&self, _hook: Hook) -> &[JumpTo] { &[JumpTo::End] }
//!     async fn before_agent(&self, state: &AgentState, _rt: &Runtime) -> HookResult {
//!         let asked = state.messages.last().map(|m| m.text()).unwrap_or_default();
//!         if asked.contains("crypto") {
//!             return Ok(Some(HookUpdate::end_with(Message::assistant("I only talk about cooking."))));
//!         }
//!         Ok(None)
//!     }
//! }
//! ```

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::install::{BuildContext, Placement};
use super::{AgentError, AgentState, AgentStateUpdate};
use crate::event::EventFilter;
use crate::graph::{NodeContext, Pause};
use crate::message::{Message, ToolCall};
use crate::model::{ChatModel, ModelRequest, ModelResponse};
use crate::state::DynReducer;
use crate::tool::{Tool, ToolContext, ToolExecution};

/// A node hook of the agent loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    /// Once per invocation, before anything else.
    BeforeAgent,
    /// Before every model call.
    BeforeModel,
    /// After every model call.
    AfterModel,
    /// Once per invocation, after the final answer.
    AfterAgent,
}

impl Hook {
    /// All node hooks.
    pub const ALL: &'static [Hook] = &[
        Hook::BeforeAgent,
        Hook::BeforeModel,
        Hook::AfterModel,
        Hook::AfterAgent,
    ];

    /// The hook's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Hook::BeforeAgent => "before_agent",
            Hook::BeforeModel => "before_model",
            Hook::AfterModel => "after_model",
            Hook::AfterAgent => "after_agent",
        }
    }
}

/// Where a hook can send the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JumpTo {
    /// End the run: go to the `after_agent` hooks (or finish, from them).
    End,
    /// Call the model (again).
    Model,
    /// Run the pending tool calls.
    Tools,
}

impl JumpTo {
    /// The target's name.
    pub fn as_str(self) -> &'static str {
        match self {
            JumpTo::End => "end",
            JumpTo::Model => "model",
            JumpTo::Tools => "tools",
        }
    }
}

/// What a hook changes.
#[derive(Default)]
pub struct HookUpdate {
    /// The state update.
    pub update: AgentStateUpdate,
    /// Where to go next instead of the next hook.
    pub jump_to: Option<JumpTo>,
}

impl std::fmt::Debug for HookUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookUpdate")
            .field("jump_to", &self.jump_to)
            .finish_non_exhaustive()
    }
}

impl HookUpdate {
    /// A state update.
    pub fn new(update: AgentStateUpdate) -> Self {
        HookUpdate {
            update,
            jump_to: None,
        }
    }

    /// Appends (or upserts by id) messages.
    pub fn messages(messages: Vec<Message>) -> Self {
        Self::new(AgentStateUpdate::new().messages(messages))
    }

    /// Ends the run with this message (it is appended first). Declare
    /// `JumpTo::End` in `can_jump_to`.
    pub fn end_with(message: Message) -> Self {
        Self::messages(vec![message]).jump_to(JumpTo::End)
    }

    /// Sets the jump target.
    #[must_use]
    pub fn jump_to(mut self, target: JumpTo) -> Self {
        self.jump_to = Some(target);
        self
    }
}

/// What a hook returns: nothing, an update, or an error that fails the run.
pub type HookResult = Result<Option<HookUpdate>, AgentError>;

/// What hooks know about the run.
pub struct Runtime {
    pub(crate) node: NodeContext,
    pub(crate) agent: Arc<str>,
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) state: Arc<AgentState>,
}

impl Runtime {
    /// The agent's name.
    pub fn agent_name(&self) -> &str {
        &self.agent
    }

    /// The agent's model (to make side calls, e.g. for a summary).
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }

    /// The agent's state as the current step sees it (shared, not copied): what a wrapper
    /// reads its own state channels from.
    pub fn state(&self) -> &AgentState {
        &self.state
    }

    /// The graph node context: thread id, interrupts, events.
    pub fn node(&self) -> &NodeContext {
        &self.node
    }

    /// The thread id of the run, if any.
    pub fn thread_id(&self) -> Option<&str> {
        self.node.thread_id()
    }

    /// The long-term store of the run, if any (see [`NodeContext::store`]).
    pub fn store(&self) -> Option<&Arc<dyn crate::store::Store>> {
        self.node.store()
    }

    /// Pauses the run for outside input, from a hook or a model-call wrapper (see
    /// [`NodeContext::interrupt`] for the rules: the hook re-runs from the top on resume, and
    /// this call then returns the resume value).
    ///
    /// The first time it returns the [`Pause`] signal; propagate it with `?` (it converts into
    /// [`AgentError`]) and the run ends with [`Outcome::Interrupted`](crate::Outcome::Interrupted).
    /// The agent needs a checkpointer (return `true` from [`Middleware::requires_checkpointer`]).
    ///
    /// ```
    /// use kit::agent::{AgentState, Hook, HookResult, HookUpdate, Middleware, Runtime};
    /// use kit::Message;
    ///
    /// struct AskFirst;
    ///
    /// #[kit::async_trait]
    /// impl Middleware for AskFirst {
    ///     fn name(&self) -> &str { "AskFirst" }
    ///     fn hooks(&self) -> &[Hook] { &[Hook::BeforeAgent] }
    ///     fn requires_checkpointer(&self) -> bool { true }
    ///     async fn before_agent(&self, _state: &AgentState, rt: &Runtime) -> HookResult {
    ///         let answer = rt.interrupt(serde_json::json!({"question": "proceed?"}))?;
    ///         let note = format!("The operator said: {answer}");
    ///         Ok(Some(HookUpdate::messages(vec![Message::system(note)])))
    ///     }
    /// }
    /// ```
    pub fn interrupt(&self, value: impl Serialize) -> Result<serde_json::Value, Pause> {
        self.node.interrupt(value)
    }
}

/// What the model-call chain produced: the model's answer, and the state changes the wrappers
/// that produced it want kept with it (overflow recovery keeps the conversation it compacted).
/// The agent appends the answer to `messages` after applying `update`.
#[derive(Debug)]
#[non_exhaustive]
pub struct ModelExecution {
    /// The model's answer.
    pub response: ModelResponse,
    /// State changes to apply with the answer.
    pub update: Option<AgentStateUpdate>,
}

impl ModelExecution {
    /// The answer with a state update.
    #[must_use]
    pub fn with_update(mut self, update: AgentStateUpdate) -> Self {
        self.update = Some(update);
        self
    }
}

impl From<ModelResponse> for ModelExecution {
    fn from(response: ModelResponse) -> Self {
        ModelExecution {
            response,
            update: None,
        }
    }
}

/// The model call at the end of the model-call chain: the request, and the model that serves
/// it.
pub(crate) type ModelBase<'a> = dyn Fn(ModelRequest, Arc<dyn ChatModel>) -> BoxFuture<'a, Result<ModelExecution, AgentError>>
    + Send
    + Sync;

/// The rest of the model-call chain, for `wrap_model_call`. Call it any number of times.
///
/// By default the agent's model answers; [`with_model`](Self::with_model) sends the rest of
/// the chain to another one (what fallbacks and routers do), and the model's trace run and
/// events then name the model that answered.
#[derive(Clone)]
pub struct ModelNext<'a> {
    pub(crate) chain: &'a [Arc<dyn Middleware>],
    pub(crate) base: &'a ModelBase<'a>,
    pub(crate) rt: &'a Runtime,
    pub(crate) model: Option<Arc<dyn ChatModel>>,
}

impl<'a> ModelNext<'a> {
    /// Calls the next wrapper (or the model itself).
    pub async fn call(&self, request: ModelRequest) -> Result<ModelExecution, AgentError> {
        match self.chain.split_first() {
            Some((mw, rest)) => {
                let next = ModelNext {
                    chain: rest,
                    base: self.base,
                    rt: self.rt,
                    model: self.model.clone(),
                };
                mw.wrap_model_call(request, self.rt, next).await
            }
            None => {
                let model = self.model.clone().unwrap_or_else(|| self.rt.model.clone());
                (self.base)(request, model).await
            }
        }
    }

    /// The rest of the chain, answered by `model` instead of the agent's (the wrappers after
    /// this one still run).
    #[must_use]
    pub fn with_model(&self, model: Arc<dyn ChatModel>) -> ModelNext<'a> {
        ModelNext {
            model: Some(model),
            ..self.clone()
        }
    }

    /// The model that will answer: the one an outer wrapper chose, else the agent's.
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        self.model.as_ref().unwrap_or(&self.rt.model)
    }
}

/// The rest of the tool-call chain, for `wrap_tool_call`. Call it any number of times.
#[derive(Clone, Copy)]
pub struct ToolNext<'a> {
    pub(crate) chain: &'a [Arc<dyn Middleware>],
    pub(crate) base: &'a (
            dyn Fn(ToolCall, ToolContext) -> BoxFuture<'a, Result<ToolExecution, Pause>>
                + Send
                + Sync
        ),
    pub(crate) rt: &'a Runtime,
}

impl<'a> ToolNext<'a> {
    /// Calls the next wrapper (or the tool itself). `Err` is the pause signal of a tool (or a
    /// subagent it runs) that waits for outside input: pass it on with `?`.
    pub async fn call(&self, call: ToolCall, ctx: ToolContext) -> Result<ToolExecution, Pause> {
        match self.chain.split_first() {
            Some((mw, rest)) => {
                let next = ToolNext {
                    chain: rest,
                    base: self.base,
                    rt: self.rt,
                };
                mw.wrap_tool_call(call, ctx, self.rt, next).await
            }
            None => (self.base)(call, ctx).await,
        }
    }
}

/// A middleware: hooks around the agent loop, wrappers around model and tool calls, and the
/// tools and state channels it contributes. Implement the methods you need; the rest do
/// nothing.
#[kit::async_trait]
pub trait Middleware: std::any::Any + Send + Sync {
    /// A unique name (shown in events, traces and node names).
    fn name(&self) -> &str;

    /// Where this middleware sits in the chain (default: in the order it was added).
    fn placement(&self) -> Placement {
        Placement::AsAdded
    }

    /// Runs once when the agent is built, after the chain is ordered and before its tools,
    /// system prompt and state channels are read: a capability that needs the agent's model,
    /// tools, checkpointer or other middleware (subagents do) takes them here. An error fails
    /// [`AgentBuilder::build`](super::AgentBuilder::build).
    fn on_build(&self, agent: &BuildContext<'_>) -> Result<(), AgentError> {
        let _ = agent;
        Ok(())
    }

    /// The node hooks this middleware implements. Each gets its own graph node; listing only
    /// the ones you implement saves a superstep (and a checkpoint) per hook you skip.
    fn hooks(&self) -> &[Hook] {
        Hook::ALL
    }

    /// Where `hook` may jump. A jump not listed here is an error.
    fn can_jump_to(&self, hook: Hook) -> &[JumpTo] {
        let _ = hook;
        &[]
    }

    /// What a sync subagent of this agent runs in this middleware's place, or `None` (the
    /// default) when subagents do not inherit it.
    ///
    /// Guardrails return themselves (or a copy set up for a child), so work delegated through
    /// `task` is held to the same rules: kit's review gates, PII middleware, moderation and
    /// topic filter do. A subagent spec can opt out
    /// ([`SubagentSpec::inherit_guardrails`](crate::middleware::subagents::SubagentSpec::inherit_guardrails),
    /// [`without_guardrail`](crate::middleware::subagents::SubagentSpec::without_guardrail)),
    /// and a middleware of the same name among the child's own replaces the inherited one.
    fn for_subagent(&self) -> Option<Arc<dyn Middleware>> {
        None
    }

    /// True when the middleware pauses runs for human input; the agent then needs a
    /// checkpointer, and building one without is an error.
    fn requires_checkpointer(&self) -> bool {
        false
    }

    /// Tools this middleware adds to the agent.
    fn tools(&self) -> Vec<Tool> {
        Vec::new()
    }

    /// Text appended to the agent's system prompt (instructions for this middleware's tools).
    fn system_prompt(&self) -> Option<String> {
        None
    }

    /// State channels this middleware adds (keys of `AgentState::custom`) with their reducers;
    /// a key with no reducer keeps the last value.
    fn state_channels(&self) -> Vec<(String, Option<DynReducer>)> {
        Vec::new()
    }

    /// Sees (and may rewrite or refuse) the input of `invoke` / `stream_events` before anything
    /// is stored: the input checkpoint and the trace only ever hold what this leaves. Input
    /// guardrails (PII) use it; it runs for each middleware in order.
    fn transform_input(&self, input: &mut AgentStateUpdate) -> Result<(), AgentError> {
        let _ = input;
        Ok(())
    }

    /// A filter for the events of one run, asked for at the start of every run that streams
    /// (`stream_events`, or a run given an event sink). It sees every event of the run and of
    /// its subagents before the consumer does; the PII middleware scrubs streamed tokens with
    /// one. Filters of several middleware apply innermost first (the last middleware's
    /// filter sees an event first), like the answers their `wrap_model_call`s see.
    fn event_filter(&self) -> Option<Arc<dyn EventFilter>> {
        None
    }

    /// Runs once per invocation, first.
    async fn before_agent(&self, state: &AgentState, rt: &Runtime) -> HookResult {
        let _ = (state, rt);
        Ok(None)
    }

    /// Runs before every model call.
    async fn before_model(&self, state: &AgentState, rt: &Runtime) -> HookResult {
        let _ = (state, rt);
        Ok(None)
    }

    /// Runs after every model call.
    async fn after_model(&self, state: &AgentState, rt: &Runtime) -> HookResult {
        let _ = (state, rt);
        Ok(None)
    }

    /// Runs once per invocation, after the final answer.
    async fn after_agent(&self, state: &AgentState, rt: &Runtime) -> HookResult {
        let _ = (state, rt);
        Ok(None)
    }

    /// Wraps the model call: change the request, retry, fall back, or answer without the model
    /// (`ModelResponse { .. }.into()`). A wrapper may add a state update to what it returns.
    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let _ = rt;
        next.call(request).await
    }

    /// Wraps each tool call: change the call, short-circuit it, or post-process the result.
    /// Pause the run (human review) by returning the [`Pause`] of [`Runtime::interrupt`].
    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        let _ = rt;
        next.call(call, ctx).await
    }
}

/// Runs one hook of one middleware.
pub(crate) async fn run_hook(
    mw: &dyn Middleware,
    hook: Hook,
    state: &AgentState,
    rt: &Runtime,
) -> HookResult {
    match hook {
        Hook::BeforeAgent => mw.before_agent(state, rt).await,
        Hook::BeforeModel => mw.before_model(state, rt).await,
        Hook::AfterModel => mw.after_model(state, rt).await,
        Hook::AfterAgent => mw.after_agent(state, rt).await,
    }
}
