//! Per-run options: thread, checkpointer, limits, durability, streaming, tracing.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::CancelToken;
use crate::checkpoint::{Checkpointer, LeaseOptions, MultitaskStrategy};
use crate::event::{EventKind, EventKinds, EventSink, StreamMode};
use crate::store::{IntoStore, Store};
use crate::trace::TraceOptions;

/// The default recursion limit, in supersteps.
///
/// High enough that no legitimate graph meets it (an agent turn costs two to four supersteps,
/// so this allows hundreds of model calls), low enough to stop a runaway loop before it burns
/// real money. Override per run with [`RunOptions::recursion_limit`].
pub const DEFAULT_RECURSION_LIMIT: usize = 1000;

/// When checkpoints are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Each step's checkpoint is written before the next step starts.
    Sync,
    /// Each step's checkpoint is written while the next step runs; the run never reports
    /// success (or an interrupt) before every checkpoint is durable. The default.
    #[default]
    Async,
    /// Only the final checkpoint (with all channel data) is written, when the run ends or
    /// pauses. Fastest; a crash mid-run loses the run.
    Exit,
}

/// Options of one invocation. Cheap to clone.
///
/// ```
/// use kit::RunOptions;
/// let opts = RunOptions::new().thread_id("support-42").recursion_limit(50);
/// assert_eq!(opts.get_thread_id(), Some("support-42"));
/// ```
#[derive(Clone, Default)]
pub struct RunOptions {
    /// The conversation thread; with a checkpointer, state persists under it.
    pub(crate) thread_id: Option<String>,
    /// Start from this checkpoint instead of the thread's head (time travel; the run forks).
    pub(crate) checkpoint_id: Option<String>,
    /// Overrides the graph's checkpointer for this run.
    pub(crate) checkpointer: Option<Arc<dyn Checkpointer>>,
    /// Maximum supersteps (default [`DEFAULT_RECURSION_LIMIT`]).
    pub(crate) recursion_limit: Option<usize>,
    /// When checkpoints are written.
    pub(crate) durability: Durability,
    /// The kinds of event the run's stream carries by its stream modes.
    pub(crate) stream_kinds: EventKinds,
    /// Also stream `values` events, whatever the modes.
    pub(crate) stream_values: bool,
    /// Free-form metadata stored with checkpoints and traces.
    pub(crate) metadata: Map<String, Value>,
    /// Trace options (name, user, session, custom fields); `None` uses the defaults. Boxed:
    /// rarely set, and every run and subgraph clones its options.
    pub(crate) trace: Option<Box<TraceOptions>>,
    /// The tracer of this run (default: the process's global tracer).
    pub(crate) tracer: Option<crate::trace::Tracer>,
    /// What the root run of this invocation is in traces (agents set `Agent`).
    pub(crate) trace_kind: Option<crate::trace::RunKind>,
    /// Checkpoint namespace, set for subgraphs (`a|b`); empty at the top level.
    pub(crate) namespace: String,
    /// Where events go, when streaming.
    pub(crate) events: Option<EventSink>,
    /// Run ids of the enclosing runs (for event `parent_ids`).
    pub(crate) parent_ids: Vec<String>,
    /// Cancels the run (and the runs it starts: they inherit the options).
    pub(crate) cancel: Option<CancelToken>,
    /// Overrides the graph's store for this run.
    pub(crate) store: Option<Arc<dyn Store>>,
    /// The store of the enclosing run (a subgraph's, a subagent's): used when neither the run
    /// nor the graph names one.
    pub(crate) parent_store: Option<Arc<dyn Store>>,
    /// What the run does when its thread is busy; `None`: no lease is taken.
    pub(crate) multitask: Option<MultitaskStrategy>,
    /// The id of this run in its events (a leased run uses its lease id, so
    /// `GraphError::ThreadBusy::holder` names a run its events name); `None`: a random one.
    pub(crate) run_id: Option<String>,
    /// How the run holds its thread's lease.
    pub(crate) lease: LeaseOptions,
    /// The most tasks of one step that run at once; `None`: all of them.
    pub(crate) max_concurrency: Option<usize>,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("thread_id", &self.thread_id)
            .field("checkpoint_id", &self.checkpoint_id)
            .field("checkpointer", &self.checkpointer.is_some())
            .field("store", &self.store.is_some())
            .field("recursion_limit", &self.recursion_limit)
            .field("durability", &self.durability)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl RunOptions {
    /// Default options: no thread, the graph's checkpointer, async durability.
    pub fn new() -> Self {
        Self::default()
    }

    /// Options from a LangGraph-style config: `{"configurable": {"thread_id": "..",
    /// "checkpoint_id": ".."}, "recursion_limit": n}`.
    pub fn from_config(config: &Value) -> Self {
        let mut opts = Self::default();
        if let Some(c) = config.get("configurable") {
            opts.thread_id = c.get("thread_id").and_then(value_to_string);
            opts.checkpoint_id = c.get("checkpoint_id").and_then(value_to_string);
        }
        opts.recursion_limit = config
            .get("recursion_limit")
            .and_then(Value::as_u64)
            .map(|n| n as usize);
        opts.max_concurrency = config
            .get("max_concurrency")
            .and_then(Value::as_u64)
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX).max(1));
        opts
    }

    /// Runs at most `n` tasks of a step at once (LangGraph's `max_concurrency`): of the tool
    /// calls of one answer, the branches of a fan-out, the nodes of a step. The others start
    /// in order as places free; results and updates are the same as with no limit. A waiting
    /// task's start event and trace span begin when it is created, so its time includes the
    /// wait. The subgraphs and subagents the run starts inherit the limit, each for its own
    /// steps (two levels of subagents may run `n × n` tasks). `0` counts as 1.
    ///
    /// A model can answer with thousands of tool calls (each `task` call a whole subagent
    /// run): this bounds how many hold memory, connections and model calls at once.
    ///
    /// ```
    /// use kit::RunOptions;
    /// let opts = RunOptions::new().max_concurrency(8);
    /// assert_eq!(opts.get_max_concurrency(), Some(8));
    /// ```
    #[must_use]
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = Some(n.max(1));
        self
    }

    /// The most tasks of a step that run at once, if limited.
    pub fn get_max_concurrency(&self) -> Option<usize> {
        self.max_concurrency
    }

    /// Sets the thread id.
    #[must_use]
    pub fn thread_id(mut self, thread_id: impl Into<String>) -> Self {
        self.thread_id = Some(thread_id.into());
        self
    }

    /// Starts from an earlier checkpoint (forks the thread).
    #[must_use]
    pub fn checkpoint_id(mut self, checkpoint_id: impl Into<String>) -> Self {
        self.checkpoint_id = Some(checkpoint_id.into());
        self
    }

    /// Reads or runs the subgraph at this checkpoint namespace (`research:0:research`, as an
    /// interrupt's `namespace` gives it; nested ones joined by `|`): with a subgraph's own graph,
    /// `get_state` returns the subgraph's state.
    #[must_use]
    pub fn checkpoint_ns(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Cancels the run when `token` is cancelled (see [`CancelToken`]).
    #[must_use]
    pub fn cancel_token(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Uses this checkpointer for the run.
    #[must_use]
    pub fn checkpointer(mut self, checkpointer: Arc<dyn Checkpointer>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// Uses this long-term store for the run (see [`kit::store`](crate::store)): nodes, tools
    /// and middleware reach it through their context. Subgraphs and subagents without a store
    /// of their own use it too.
    #[must_use]
    pub fn store(mut self, store: impl IntoStore) -> Self {
        self.store = Some(store.into_store());
        self
    }

    /// Sets the recursion limit in supersteps.
    #[must_use]
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = Some(limit);
        self
    }

    /// Sets the durability mode.
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Also stream `values` events (the whole state after each step), whatever the
    /// [`stream_mode`](Self::stream_mode), set before or after it.
    #[must_use]
    pub fn stream_values(mut self, on: bool) -> Self {
        self.stream_values = on;
        self.narrow_sink();
        self
    }

    /// Streams only the events of `modes` (LangGraph's `stream_mode`), and the run's
    /// lifecycle (`run_start`, `interrupt`, `error`, `cancelled`, `run_end`). The run builds
    /// no other event: [`StreamMode::Updates`] alone costs about half of a full stream, and an
    /// agent without [`StreamMode::Messages`] calls its model without streaming tokens.
    /// Without a mode, a stream carries every kind but `values`.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use kit::event::{EventKind, StreamMode};
    /// use kit::graph::{GraphBuilder, NodeContext};
    /// use kit::{END, RunOptions, START, State};
    ///
    /// #[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
    /// struct Count {
    ///     n: i64,
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let graph = GraphBuilder::<Count>::new("count")
    ///     .sync_node("add", |s: &Count, _: &NodeContext| CountUpdate::new().n(s.n + 1))
    ///     .edge(START, "add")
    ///     .edge("add", END)
    ///     .compile()?;
    /// let opts = RunOptions::new().stream_mode([StreamMode::Updates]);
    /// let kinds: Vec<EventKind> = graph
    ///     .stream_events(CountUpdate::new(), &opts)
    ///     .map(|e| e.kind())
    ///     .collect()
    ///     .await;
    /// assert_eq!(kinds, [EventKind::RunStart, EventKind::NodeEnd, EventKind::RunEnd]);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn stream_mode(mut self, modes: impl IntoIterator<Item = StreamMode>) -> Self {
        self.stream_kinds = EventKinds::of_modes(modes);
        self.narrow_sink();
        self
    }

    /// What the run's stream carries: its modes' kinds, and `values` when asked for.
    fn streamed_kinds(&self) -> EventKinds {
        if self.stream_values {
            self.stream_kinds.with(EventKind::Values)
        } else {
            self.stream_kinds
        }
    }

    /// Narrows the run's sink, when it has one, to what it streams.
    fn narrow_sink(&mut self) {
        let kinds = self.streamed_kinds();
        self.events = self.events.take().map(|sink| sink.with_kinds(kinds));
    }

    /// Adds a metadata entry.
    #[must_use]
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Sets the trace options.
    #[must_use]
    pub fn trace(mut self, trace: TraceOptions) -> Self {
        self.trace = Some(Box::new(trace));
        self
    }

    /// Records this run with `tracer` instead of the global one.
    #[must_use]
    pub fn tracer(mut self, tracer: crate::trace::Tracer) -> Self {
        self.tracer = Some(tracer);
        self
    }

    /// What this run does when another run is on its thread ("double texting"; LangGraph's
    /// `multitask_strategy`): [`Reject`](MultitaskStrategy::Reject) it,
    /// [`Enqueue`](MultitaskStrategy::Enqueue) behind it,
    /// [`Interrupt`](MultitaskStrategy::Interrupt) it or [`Rollback`](MultitaskStrategy::Rollback)
    /// it. The run then holds a lease on the thread in the checkpointer while it runs, so the
    /// strategy holds across processes sharing the checkpointer (see
    /// [`lease`](crate::checkpoint::lease)). Without a strategy no lease is taken, and two
    /// runs at once on one thread end with one of them failing with a conflict.
    ///
    /// ```
    /// use kit::RunOptions;
    /// use kit::checkpoint::MultitaskStrategy;
    /// let opts = RunOptions::new()
    ///     .thread_id("support-42")
    ///     .multitask_strategy(MultitaskStrategy::Enqueue);
    /// assert_eq!(opts.get_multitask_strategy(), Some(MultitaskStrategy::Enqueue));
    /// ```
    #[must_use]
    pub fn multitask_strategy(mut self, strategy: MultitaskStrategy) -> Self {
        self.multitask = Some(strategy);
        self
    }

    /// How the run holds its thread's lease (time to live, renewal interval); only used with
    /// a [`multitask_strategy`](Self::multitask_strategy).
    #[must_use]
    pub fn lease(mut self, lease: LeaseOptions) -> Self {
        self.lease = lease;
        self
    }

    /// The strategy set with [`multitask_strategy`](Self::multitask_strategy).
    pub fn get_multitask_strategy(&self) -> Option<MultitaskStrategy> {
        self.multitask
    }

    /// Sends the run's events to `sink` (what `stream_events` does for you), those its
    /// [`stream_mode`](Self::stream_mode) asks for.
    #[must_use]
    pub fn events(mut self, sink: EventSink) -> Self {
        self.events = Some(sink.with_kinds(self.streamed_kinds()));
        self
    }

    /// The checkpoint namespace (empty at the top level).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The run's cancel token, if it has one.
    pub fn get_cancel_token(&self) -> Option<&CancelToken> {
        self.cancel.as_ref()
    }

    // Getters are `get_*` because the setters own the plain names, as in
    // `std::process::Command`.

    /// The thread id, if set.
    pub fn get_thread_id(&self) -> Option<&str> {
        self.thread_id.as_deref()
    }

    /// The checkpoint to start from, if set.
    pub fn get_checkpoint_id(&self) -> Option<&str> {
        self.checkpoint_id.as_deref()
    }

    /// The checkpointer set for this run, if any.
    pub fn get_checkpointer(&self) -> Option<&Arc<dyn Checkpointer>> {
        self.checkpointer.as_ref()
    }

    /// The store set for this run, if any.
    pub fn get_store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// The recursion limit, if set.
    pub fn get_recursion_limit(&self) -> Option<usize> {
        self.recursion_limit
    }

    /// The durability mode.
    pub fn get_durability(&self) -> Durability {
        self.durability
    }

    /// The metadata stored with checkpoints and traces.
    pub fn get_metadata(&self) -> &Map<String, Value> {
        &self.metadata
    }
}

fn value_to_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
