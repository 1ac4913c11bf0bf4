//! What a node receives ([`NodeContext`]) and returns ([`NodeOutput`]).

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::BoxError;
use super::interrupt::{Interrupt, Pause, Resume};
use super::options::RunOptions;
use crate::event::{Event, EventData, EventKind, EventMetadata, EventSink};
use crate::ids;
use crate::state::State;

/// The future a node returns.
pub type NodeFuture<S> = BoxFuture<'static, Result<NodeOutput<S>, NodeError>>;

/// A node's function, type-erased.
pub type NodeFn<S> = Arc<dyn Fn(Arc<S>, NodeContext) -> NodeFuture<S> + std::marker::Send + Sync>;

/// What a node produces: state updates, and optionally where to go next.
///
/// Most nodes just return their state's update type (it converts into a `NodeOutput`).
/// Return a `NodeOutput` to route from inside the node — LangGraph's `Command(goto, update)`:
///
/// ```
/// # use kit::{State, graph::NodeOutput};
/// # #[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
/// # struct S { n: i64 }
/// let out: NodeOutput<S> = NodeOutput::goto("final").with_update(SUpdate::new().n(1));
/// ```
pub struct NodeOutput<S: State> {
    pub(crate) updates: Vec<S::Update>,
    pub(crate) goto: Vec<Goto>,
    /// True when the output came from the node's cache, not from running it.
    pub(crate) cached: bool,
}

/// A routing instruction carried by a [`NodeOutput`].
#[derive(Debug, Clone)]
pub enum Goto {
    /// Run this node in the next superstep.
    Node(String),
    /// Run a node with its own input in the next superstep.
    Send(Send),
}

impl<S: State> Default for NodeOutput<S> {
    fn default() -> Self {
        NodeOutput {
            updates: Vec::new(),
            goto: Vec::new(),
            cached: false,
        }
    }
}

impl<S: State> std::fmt::Debug for NodeOutput<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeOutput")
            .field("updates", &self.updates.len())
            .field("goto", &self.goto)
            .finish()
    }
}

/// LangGraph's name for a node output that routes: `Command::goto("x").with_update(u)`.
pub type Command<S> = NodeOutput<S>;

impl<S: State> NodeOutput<S> {
    /// An output that writes nothing and routes nowhere beyond the node's edges.
    pub fn new() -> Self {
        Self::default()
    }

    /// An output with one update.
    pub fn update(update: S::Update) -> Self {
        NodeOutput {
            updates: vec![update],
            goto: Vec::new(),
            cached: false,
        }
    }

    /// An output that routes to `node` (in addition to the node's edges).
    pub fn goto(node: impl Into<String>) -> Self {
        NodeOutput {
            updates: Vec::new(),
            goto: vec![Goto::Node(node.into())],
            cached: false,
        }
    }

    /// An output that fans out with [`Send`]s.
    pub fn sends(sends: impl IntoIterator<Item = Send>) -> Self {
        NodeOutput {
            updates: Vec::new(),
            goto: sends.into_iter().map(Goto::Send).collect(),
            cached: false,
        }
    }

    /// Adds an update (applied after the ones before it, in the same superstep).
    #[must_use]
    pub fn with_update(mut self, update: S::Update) -> Self {
        self.updates.push(update);
        self
    }

    /// Adds a node to go to.
    #[must_use]
    pub fn with_goto(mut self, node: impl Into<String>) -> Self {
        self.goto.push(Goto::Node(node.into()));
        self
    }

    /// Adds a [`Send`].
    #[must_use]
    pub fn with_send(mut self, send: Send) -> Self {
        self.goto.push(Goto::Send(send));
        self
    }

    /// The updates, in order.
    pub fn updates(&self) -> &[S::Update] {
        &self.updates
    }
}

/// Converts what a node returns into a [`NodeOutput`].
///
/// Implemented for [`NodeOutput`], `()`, `Vec<Send>`, `Result<T, E>` (for any `T` that converts
/// and any error), and — by `#[derive(State)]` — the state's update type.
#[diagnostic::on_unimplemented(
    message = "a node cannot return `{Self}`",
    label = "this is not a node output",
    note = "a node returns the state's update type (`<State>Update`), a `NodeOutput`, `()`, \
            `Vec<Send>`, or a `Result` of one of those"
)]
pub trait IntoNodeOutput<S: State> {
    /// Performs the conversion.
    fn into_output(self) -> Result<NodeOutput<S>, NodeError>;
}

impl<S: State> IntoNodeOutput<S> for NodeOutput<S> {
    fn into_output(self) -> Result<NodeOutput<S>, NodeError> {
        Ok(self)
    }
}

impl<S: State> IntoNodeOutput<S> for () {
    fn into_output(self) -> Result<NodeOutput<S>, NodeError> {
        Ok(NodeOutput::new())
    }
}

impl<S: State> IntoNodeOutput<S> for Vec<Send> {
    fn into_output(self) -> Result<NodeOutput<S>, NodeError> {
        Ok(NodeOutput::sends(self))
    }
}

impl<S: State, T: IntoNodeOutput<S>, E: Into<NodeError>> IntoNodeOutput<S> for Result<T, E> {
    fn into_output(self) -> Result<NodeOutput<S>, NodeError> {
        match self {
            Ok(v) => v.into_output(),
            Err(e) => Err(e.into()),
        }
    }
}

impl IntoNodeOutput<crate::state::DynState> for crate::state::DynUpdate {
    fn into_output(self) -> Result<NodeOutput<crate::state::DynState>, NodeError> {
        Ok(NodeOutput::update(self))
    }
}

/// Run a node with its own input in the next superstep (dynamic fan-out, map-reduce).
///
/// The node still sees the state snapshot; its own input is read with
/// [`NodeContext::arg`]. Many `Send`s to one node run in the same superstep and their updates
/// merge through the reducers.
#[derive(Clone)]
pub struct Send {
    pub(crate) node: String,
    pub(crate) arg: SendArg,
}

impl std::fmt::Debug for Send {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Send").field("node", &self.node).finish()
    }
}

impl Send {
    /// Sends `arg` to `node`.
    pub fn new<T>(node: impl Into<String>, arg: T) -> Self
    where
        T: Serialize + DeserializeOwned + Clone + std::marker::Send + Sync + 'static,
    {
        Send {
            node: node.into(),
            arg: SendArg::typed(arg),
        }
    }

    /// The target node.
    pub fn node(&self) -> &str {
        &self.node
    }
}

/// The input of a [`Send`]: the typed value while in memory, JSON once restored from a
/// checkpoint.
#[derive(Clone)]
pub(crate) enum SendArg {
    Typed {
        value: Arc<dyn Any + std::marker::Send + Sync>,
        to_json: fn(&(dyn Any + std::marker::Send + Sync)) -> Value,
        write_json: WriteJson,
    },
    Json(Value),
}

/// Appends a typed `Send` argument's JSON to a buffer.
type WriteJson =
    fn(&(dyn Any + std::marker::Send + Sync), &mut Vec<u8>) -> Result<(), serde_json::Error>;

impl SendArg {
    pub(crate) fn typed<T: Serialize + Clone + std::marker::Send + Sync + 'static>(
        value: T,
    ) -> Self {
        fn to_json<T: Serialize + 'static>(v: &(dyn Any + std::marker::Send + Sync)) -> Value {
            v.downcast_ref::<T>()
                .and_then(|v| serde_json::to_value(v).ok())
                .unwrap_or(Value::Null)
        }
        fn write_json<T: Serialize + 'static>(
            v: &(dyn Any + std::marker::Send + Sync),
            out: &mut Vec<u8>,
        ) -> Result<(), serde_json::Error> {
            match v.downcast_ref::<T>() {
                Some(v) => crate::json::write(out, v),
                None => Err(serde::ser::Error::custom("a Send argument of another type")),
            }
        }
        SendArg::Typed {
            value: Arc::new(value),
            to_json: to_json::<T>,
            write_json: write_json::<T>,
        }
    }

    pub(crate) fn to_json(&self) -> Value {
        match self {
            SendArg::Typed { value, to_json, .. } => to_json(value.as_ref()),
            SendArg::Json(v) => v.clone(),
        }
    }

    /// Appends the argument's JSON, for a checkpoint: written straight from the typed value
    /// (every step that sends pays for it), not through a [`Value`] tree. A value that does not
    /// serialise is written `null`, as [`to_json`](Self::to_json) gives it.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let written = match self {
            SendArg::Typed {
                value, write_json, ..
            } => write_json(value.as_ref(), out),
            SendArg::Json(v) => crate::json::write(out, v),
        };
        if written.is_err() {
            out.truncate(start);
            out.extend_from_slice(b"null");
        }
    }
}

/// An error returned by a node. Any `std::error::Error` converts into it with `?`, and so does
/// the signal of [`NodeContext::interrupt`].
pub struct NodeError {
    pub(crate) kind: NodeErrorKind,
}

pub(crate) enum NodeErrorKind {
    Failed(BoxError),
    Interrupt(Pause),
}

impl NodeError {
    /// An error with a message.
    pub fn msg(message: impl std::fmt::Display) -> Self {
        NodeError {
            kind: NodeErrorKind::Failed(message.to_string().into()),
        }
    }

    /// Wraps an error value.
    pub fn from_boxed(error: BoxError) -> Self {
        NodeError {
            kind: NodeErrorKind::Failed(error),
        }
    }

    /// Propagates interrupts raised by a subgraph (a subagent, say) through this node; the
    /// same as `NodeError::from(Pause::new(interrupts))`.
    pub fn interrupted(interrupts: Vec<Interrupt>) -> Self {
        Pause::new(interrupts).into()
    }

    /// True when this is an interrupt signal rather than a failure.
    pub fn is_interrupt(&self) -> bool {
        matches!(self.kind, NodeErrorKind::Interrupt(_))
    }

    /// The interrupts, when this is an interrupt signal.
    pub fn interrupts(&self) -> Option<&[Interrupt]> {
        self.pause().map(Pause::interrupts)
    }

    /// The pause, when this is an interrupt signal.
    pub fn pause(&self) -> Option<&Pause> {
        match &self.kind {
            NodeErrorKind::Interrupt(p) => Some(p),
            NodeErrorKind::Failed(_) => None,
        }
    }

    /// The first error of type `E` along this failure's source chain (what the node returned
    /// with `?`, and what that error wraps).
    pub fn find_source<E: std::error::Error + 'static>(&self) -> Option<&E> {
        let NodeErrorKind::Failed(error) = &self.kind else {
            return None;
        };
        let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error.as_ref());
        while let Some(e) = current {
            if let Some(found) = e.downcast_ref::<E>() {
                return Some(found);
            }
            current = e.source();
        }
        None
    }

    /// Splits the pause from a failure.
    pub fn into_pause(self) -> Result<Pause, NodeError> {
        match self.kind {
            NodeErrorKind::Interrupt(p) => Ok(p),
            kind => Err(NodeError { kind }),
        }
    }
}

impl From<Pause> for NodeError {
    fn from(pause: Pause) -> Self {
        NodeError {
            kind: NodeErrorKind::Interrupt(pause),
        }
    }
}

impl std::fmt::Debug for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            NodeErrorKind::Failed(e) => write!(f, "NodeError({e:?})"),
            NodeErrorKind::Interrupt(p) => write!(f, "NodeError(interrupt {:?})", p.interrupts()),
        }
    }
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            NodeErrorKind::Failed(e) => write!(f, "{e}"),
            NodeErrorKind::Interrupt(p) => {
                write!(f, "interrupted ({} pending)", p.interrupts().len())
            }
        }
    }
}

impl<E: std::error::Error + std::marker::Send + Sync + 'static> From<E> for NodeError {
    fn from(error: E) -> Self {
        NodeError {
            kind: NodeErrorKind::Failed(Box::new(error)),
        }
    }
}

/// What a node knows about its run, and how it talks back: interrupts, custom events, its
/// [`Send`] input, and options for running a subgraph.
///
/// Cheap to clone.
#[derive(Clone)]
pub struct NodeContext {
    pub(crate) task: Arc<TaskContext>,
}

pub(crate) struct TaskContext {
    pub(crate) node: Arc<str>,
    pub(crate) step: i64,
    pub(crate) send_index: Option<usize>,
    pub(crate) run: Arc<RunContext>,
    /// Resume values for this task, by interrupt id.
    pub(crate) resume: HashMap<String, Value>,
    pub(crate) interrupts_raised: AtomicUsize,
    pub(crate) arg: Option<SendArg>,
    /// The task's run id: set up front when the run streams events (they carry it), else
    /// made on first use (a child run's parent, a budget's share).
    pub(crate) run_id: std::sync::OnceLock<String>,
}

/// A task run id set now (`Some`), or left to be made on first use.
pub(crate) fn task_run_id(id: Option<String>) -> std::sync::OnceLock<String> {
    let cell = std::sync::OnceLock::new();
    if let Some(id) = id {
        let _ = cell.set(id);
    }
    cell
}

/// Per-invocation data shared by every task.
pub(crate) struct RunContext {
    pub(crate) graph_name: Arc<str>,
    pub(crate) options: RunOptions,
    /// The store in use: the run's, else the graph's, else the enclosing run's.
    pub(crate) store: Option<Arc<dyn crate::store::Store>>,
    pub(crate) ns: String,
    pub(crate) run_id: String,
}

impl NodeContext {
    /// The context of the next attempt of this task (a retry): the same task, its interrupt
    /// count back at zero.
    pub(crate) fn next_attempt(&self) -> NodeContext {
        let t = &self.task;
        NodeContext {
            task: Arc::new(TaskContext {
                node: t.node.clone(),
                step: t.step,
                send_index: t.send_index,
                run: t.run.clone(),
                resume: t.resume.clone(),
                interrupts_raised: AtomicUsize::new(0),
                arg: t.arg.clone(),
                // The same run id on every attempt (made now if no attempt needed it yet).
                run_id: task_run_id(Some(self.run_id().to_string())),
            }),
        }
    }

    /// The run's cancel token, when the run can be cancelled: a node holding resources can
    /// wait on it to clean up (its future is dropped on cancellation anyway).
    pub fn cancel_token(&self) -> Option<&super::CancelToken> {
        self.task.run.options.cancel.as_ref()
    }

    /// The node's name.
    pub fn node(&self) -> &str {
        &self.task.node
    }

    /// The superstep this task runs in.
    pub fn step(&self) -> i64 {
        self.task.step
    }

    /// The id of this task: stable across a resume, unique within the thread.
    pub fn task_id(&self) -> String {
        task_id(self.task.step, &self.task.node, self.task.send_index)
    }

    /// The thread id of the run, if any.
    pub fn thread_id(&self) -> Option<&str> {
        self.task.run.options.thread_id.as_deref()
    }

    /// The options of the run (thread, checkpointer, limits), e.g. to pass to a subgraph.
    pub fn run_options(&self) -> &RunOptions {
        &self.task.run.options
    }

    /// The long-term store of the run, if any (see [`kit::store`](crate::store)): the run's
    /// ([`RunOptions::store`]), else the graph's, else the enclosing graph's or agent's.
    ///
    /// ```
    /// use kit::graph::{GraphBuilder, NodeContext, NodeError};
    /// use kit::store::{MemoryStore, Namespace, Store};
    /// use kit::{END, START};
    /// use serde_json::json;
    ///
    /// #[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
    /// struct S { seen: u64 }
    ///
    /// async fn count(_s: &S, ctx: &NodeContext) -> Result<SUpdate, NodeError> {
    ///     let store = ctx.store().ok_or_else(|| NodeError::msg("give the graph a store"))?;
    ///     let ns = Namespace::new(["counters"])?;
    ///     let seen = match store.get(&ns, "visits").await? {
    ///         Some(item) => item.value["n"].as_u64().unwrap_or(0) + 1,
    ///         None => 1,
    ///     };
    ///     store.put(&ns, "visits", json!({"n": seen})).await?;
    ///     Ok(SUpdate::new().seen(seen))
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::GraphError> {
    /// let graph = GraphBuilder::<S>::new("counter")
    ///     .node("count", |s, ctx| async move { count(&s, &ctx).await })
    ///     .edge(START, "count")
    ///     .edge("count", END)
    ///     .store(MemoryStore::new())
    ///     .compile()?;
    /// graph.invoke(SUpdate::new()).await?;
    /// let out = graph.invoke(SUpdate::new()).await?;
    /// assert_eq!(out.state().seen, 2); // the count outlived the first run
    /// # Ok(()) }
    /// ```
    pub fn store(&self) -> Option<&Arc<dyn crate::store::Store>> {
        self.task.run.store.as_ref()
    }

    /// The name of the graph running this node.
    pub fn graph_name(&self) -> &str {
        &self.task.run.graph_name
    }

    /// The id of this task's run, used as the parent of events it emits and of child runs
    /// it starts. Unique per task.
    pub fn run_id(&self) -> &str {
        self.task.run_id.get_or_init(ids::random)
    }

    /// The run id of the task that started this run as a child ([`child_options`](Self::child_options)),
    /// if one did.
    pub(crate) fn parent_task_id(&self) -> Option<&str> {
        self.task.run.options.parent_ids.last().map(String::as_str)
    }

    /// The id of this invocation (`invoke`, `resume`, a stream): the same for every task of
    /// one invocation, new for the next. What per-run counters (call limits, budgets) reset
    /// on.
    pub fn invocation_id(&self) -> &str {
        &self.task.run.run_id
    }

    /// The event stream of the run, when someone is listening.
    pub fn events(&self) -> Option<&EventSink> {
        self.task.run.options.events.as_ref()
    }

    /// The event stream of the run, when someone is listening for `kind` events (see
    /// [`StreamMode`](crate::event::StreamMode)): check it before building an event that
    /// costs something to build.
    pub fn events_of(&self, kind: EventKind) -> Option<&EventSink> {
        self.events().filter(|sink| sink.wants(kind))
    }

    /// Pauses the run for outside input.
    ///
    /// The first time, returns an interrupt signal that the node must propagate with `?`; the
    /// run then ends with [`Outcome::Interrupted`](crate::Outcome::Interrupted) carrying
    /// `value` and an interrupt id. When the thread is resumed with a value for that id, the node
    /// runs again **from the top** and this call returns the value. Several interrupts in one
    /// node are matched by their order of calls, so keep the calls in a stable order and the
    /// code before them free of side effects that must not repeat.
    pub fn interrupt(&self, value: impl Serialize) -> Result<Value, Pause> {
        let index = self.task.interrupts_raised.fetch_add(1, Ordering::SeqCst);
        let id = interrupt_id(&self.task.run.ns, &self.task_id(), index);
        if let Some(v) = self.task.resume.get(&id) {
            return Ok(v.clone());
        }
        let value = serde_json::to_value(value).unwrap_or(Value::Null);
        Err(Pause::new(vec![Interrupt {
            id,
            value,
            node: self.task.node.to_string(),
            namespace: self.namespace(),
        }]))
    }

    /// Whether this task was started by a [`Send`], and with what: `None` when it was not,
    /// else its input as a `T` (an error when it is not one).
    pub fn send_input<T: DeserializeOwned + Clone + 'static>(
        &self,
    ) -> Option<Result<T, NodeError>> {
        self.task.arg.as_ref()?;
        Some(self.arg())
    }

    /// The [`Send`] input of this task, borrowed, when it was sent as a `T` (not as JSON, as
    /// a resumed task's input is).
    pub(crate) fn arg_ref<T: 'static>(&self) -> Option<&T> {
        match &self.task.arg {
            Some(SendArg::Typed { value, .. }) => value.downcast_ref::<T>(),
            _ => None,
        }
    }

    /// The [`Send`] input of this task, when it was started by a `Send`.
    pub fn arg<T: DeserializeOwned + Clone + 'static>(&self) -> Result<T, NodeError> {
        match &self.task.arg {
            Some(SendArg::Typed { value, .. }) => match value.downcast_ref::<T>() {
                Some(v) => Ok(v.clone()),
                None => Err(NodeError::msg(format!(
                    "node `{}` asked for its Send input as `{}`, but it was sent another type",
                    self.task.node,
                    std::any::type_name::<T>()
                ))),
            },
            Some(SendArg::Json(v)) => serde_json::from_value(v.clone()).map_err(|e| {
                NodeError::msg(format!(
                    "node `{}`: Send input does not match `{}`: {e}",
                    self.task.node,
                    std::any::type_name::<T>()
                ))
            }),
            None => Err(NodeError::msg(format!(
                "node `{}` was not started by a Send, so it has no Send input",
                self.task.node
            ))),
        }
    }

    /// Emits a custom event (`event: "custom"`) on the run's stream, if anyone listens.
    pub async fn emit(&self, name: impl Into<String>, data: impl Serialize) {
        if let Some(sink) = self.events_of(EventKind::Custom) {
            let payload = serde_json::to_value(data).unwrap_or(Value::Null);
            sink.send(self.event(name, EventData::Custom(payload)))
                .await;
        }
    }

    /// Builds an event stamped with this task's node, step and run ids.
    pub fn event(&self, name: impl Into<String>, data: EventData) -> Event {
        Event {
            data,
            name: name.into(),
            run_id: ids::random(),
            parent_ids: self.parent_ids(),
            metadata: EventMetadata {
                node: Some(self.task.node.to_string()),
                step: u64::try_from(self.task.step).ok(),
                ..EventMetadata::default()
            },
        }
    }

    /// An event about this task itself (`node_start`, `node_retry`): its run id is the
    /// task's, its parents the task's ancestors.
    pub(crate) fn task_event(&self, data: EventData) -> Event {
        let options = &self.task.run.options;
        let mut parent_ids = Vec::with_capacity(options.parent_ids.len() + 1);
        parent_ids.extend_from_slice(&options.parent_ids);
        parent_ids.push(self.task.run.run_id.clone());
        Event {
            data,
            name: self.task.node.to_string(),
            run_id: self.run_id().to_string(),
            parent_ids,
            metadata: EventMetadata {
                node: Some(self.task.node.to_string()),
                step: u64::try_from(self.task.step).ok(),
                ..EventMetadata::default()
            },
        }
    }

    /// Run ids of this task and its ancestors, outermost first.
    pub fn parent_ids(&self) -> Vec<String> {
        let mut ids = self.task.run.options.parent_ids.clone();
        ids.push(self.task.run.run_id.clone());
        ids.push(self.run_id().to_string());
        ids
    }

    /// The namespace path of this task's graph (empty at the top level).
    pub fn namespace(&self) -> Vec<String> {
        split_namespace(&self.task.run.ns)
    }

    /// Options for running a subgraph (a subagent) inside this task: same checkpointer and
    /// thread, a child namespace (`segment`), events forwarded under that namespace, and the
    /// resume values addressed to the subgraph's interrupts.
    ///
    /// Run the child with [`Graph::invoke`](crate::Graph::invoke) when [`Self::child_resume`]
    /// is `None`, else with [`Graph::resume`](crate::Graph::resume).
    pub fn child_options(&self, segment: &str, tool_call_id: Option<String>) -> RunOptions {
        let parent = &self.task.run.options;
        let mut opts = parent.clone();
        opts.checkpoint_id = None;
        opts.namespace = if self.task.run.ns.is_empty() {
            segment.to_string()
        } else {
            format!("{}|{segment}", self.task.run.ns)
        };
        opts.events = parent
            .events
            .as_ref()
            .map(|s| s.nested(segment, tool_call_id));
        opts.parent_ids = self.parent_ids();
        // The child's own store wins; else it uses this run's.
        opts.store = None;
        opts.parent_store = self.task.run.store.clone();
        opts
    }

    /// Resume values addressed to interrupts a subgraph raised through this task, if the run is
    /// being resumed.
    pub fn child_resume(&self) -> Option<Resume> {
        if self.task.resume.is_empty() {
            None
        } else {
            Some(Resume::ByIds(self.task.resume.clone()))
        }
    }
}

/// The stable id of a task.
pub(crate) fn task_id(step: i64, node: &str, send_index: Option<usize>) -> String {
    match send_index {
        Some(i) => format!("{step}:{node}:{i}"),
        None => format!("{step}:{node}"),
    }
}

/// The stable id of the `index`-th interrupt of a task.
pub(crate) fn interrupt_id(ns: &str, task_id: &str, index: usize) -> String {
    let key = format!("{ns}/{task_id}/{index}");
    format!("{:016x}", ids::fnv1a(key.as_bytes()))
}

/// Splits a checkpoint namespace (`a|b`) into its segments.
pub(crate) fn split_namespace(ns: &str) -> Vec<String> {
    ns.split('|')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}
