//! Graphs: nodes, edges, supersteps, checkpoints, interrupts and streaming.
//!
//! A graph runs in **supersteps** (bulk-synchronous, like LangGraph's Pregel loop):
//!
//! 1. the nodes triggered for a step run concurrently, all reading the *same* snapshot of the
//!    state (a node never sees a sibling's writes);
//! 2. at the barrier, their updates are applied through the reducers in a deterministic order —
//!    the order of the tasks, which is node declaration order, then `Send`s in the order they
//!    were made — never in completion order;
//! 3. a checkpoint is taken (with a checkpointer and a thread id);
//! 4. edges are evaluated on the new state to pick the next step's nodes.
//!
//! Edges are fixed ([`GraphBuilder::edge`]), conditional ([`GraphBuilder::edge_when`], `when`
//! in [`graph!`](crate::graph!)), routing functions ([`GraphBuilder::route`]), fan-in joins
//! ([`GraphBuilder::join`]: wait for all sources), dynamic fan-out ([`Send`]) and routing from
//! inside a node ([`NodeOutput::goto`], LangGraph's `Command`). A node triggered by several
//! edges in one step runs once.
//!
//! A node that fails ends the run with [`GraphError::NodeFailed`]; with a checkpointer, the
//! writes of its siblings that succeeded are kept as pending writes, and
//! [`Graph::resume`] with [`Resume::Continue`] re-runs only the failed node.
//!
//! Nodes run concurrently on the calling task (not spawned), so a step of many small nodes costs
//! no thread hops; a node doing heavy CPU work should use `tokio::task::spawn_blocking`.

mod builder;
mod cache;
mod cancel;
mod error;
mod interrupt;
mod invocation;
mod mermaid;
mod node;
mod options;
mod retry;
mod run;
mod subgraph;

pub use builder::{GraphBuilder, Route};
#[cfg(feature = "postgres")]
pub use cache::PostgresCache;
#[cfg(feature = "sqlite")]
pub use cache::SqliteCache;
pub use cache::{CacheError, CachePolicy, MemoryCache, NodeCache};
pub use cancel::CancelToken;
pub use error::{BoxError, GraphError};
pub use interrupt::{Interrupt, Interrupted, Outcome, Pause, Resume};
pub use invocation::{Invocation, RunRequest, Runnable};
pub use node::{
    Command, Goto, IntoNodeOutput, NodeContext, NodeError, NodeFuture, NodeOutput, Send,
};
pub use options::{DEFAULT_RECURSION_LIMIT, Durability, RunOptions};
pub use retry::RetryPolicy;
pub use run::{DEFAULT_WARM_THREADS, DriverNext, StepDriver, StepTask, TaskResult};
pub use subgraph::subgraph;

pub use node::NodeFn;

#[doc(hidden)]
pub mod builder_support {
    pub(crate) use super::builder::async_node;
}

use std::sync::Arc;

use futures::future::BoxFuture;

use builder::{Condition, Router};
use run::RunInput;

use crate::checkpoint::{CheckpointMeta, Checkpointer};
use crate::event::{EventFilter, EventSink, EventStream};
use crate::state::State;
use crate::store::Store;

/// The name of the entry point in edges.
pub const START: &str = kit_graph_rules::START;
/// The name of the exit in edges.
pub const END: &str = kit_graph_rules::END;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Node(usize),
    End,
}

pub(crate) struct WhenEdge<S> {
    pub(crate) target: Target,
    pub(crate) label: String,
    pub(crate) cond: Condition<S>,
}

pub(crate) struct RouteEdge<S> {
    pub(crate) router: Router<S>,
    pub(crate) destinations: Vec<Target>,
}

pub(crate) struct Outgoing<S> {
    pub(crate) statics: Vec<Target>,
    pub(crate) whens: Vec<WhenEdge<S>>,
    pub(crate) routes: Vec<RouteEdge<S>>,
}

impl<S> Default for Outgoing<S> {
    fn default() -> Self {
        Outgoing {
            statics: Vec::new(),
            whens: Vec::new(),
            routes: Vec::new(),
        }
    }
}

pub(crate) struct Join {
    pub(crate) sources: Vec<usize>,
    pub(crate) target: Target,
    pub(crate) all: u64,
}

pub(crate) struct CompiledNode<S: State> {
    pub(crate) name: Arc<str>,
    pub(crate) func: NodeFn<S>,
    pub(crate) out: Outgoing<S>,
    /// (join id, bit) for every join this node feeds.
    pub(crate) joins: Vec<(usize, u32)>,
    pub(crate) interrupt_before: bool,
    pub(crate) interrupt_after: bool,
    pub(crate) destinations: Vec<Target>,
    /// How a failure is retried; `None` (the default) costs nothing.
    pub(crate) retry: Option<Arc<RetryPolicy>>,
    /// How the output is cached; `None` (the default) costs nothing.
    pub(crate) cache: Option<Arc<CachePolicy<S>>>,
}

pub(crate) struct GraphInner<S: State> {
    pub(crate) name: Arc<str>,
    pub(crate) nodes: Vec<CompiledNode<S>>,
    pub(crate) index: crate::hash::FastMap<Arc<str>, usize>,
    pub(crate) start: Outgoing<S>,
    pub(crate) joins: Vec<Join>,
    pub(crate) schema: S::Schema,
    /// The graph's default recursion limit (a run's own wins).
    pub(crate) recursion_limit: Option<usize>,

    /// Names a run's failure in its `error` event.
    pub(crate) error_kind: ErrorKindFn,
    /// The states of threads this graph finished, for the next run on each.
    pub(crate) warm: run::WarmThreads<S>,
}

/// Names a run's failure (the `kind` of its `error` event).
pub(crate) type ErrorKindFn = fn(&GraphError) -> &'static str;

/// A compiled, runnable graph over the state `S`. Cheap to clone and to share between tasks.
///
/// Build one with [`GraphBuilder`] or the [`graph!`](crate::graph!) macro.
pub struct Graph<S: State> {
    pub(crate) inner: Arc<GraphInner<S>>,
    pub(crate) checkpointer: Option<Arc<dyn Checkpointer>>,
    /// Where the outputs of nodes with a cache policy are kept.
    pub(crate) cache: Option<Arc<dyn NodeCache>>,
    /// The long-term store its nodes reach through their context.
    pub(crate) store: Option<Arc<dyn Store>>,
}

impl<S: State> Clone for Graph<S> {
    fn clone(&self) -> Self {
        Graph {
            inner: self.inner.clone(),
            checkpointer: self.checkpointer.clone(),
            cache: self.cache.clone(),
            store: self.store.clone(),
        }
    }
}

impl<S: State> std::fmt::Debug for Graph<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("name", &self.inner.name)
            .field(
                "nodes",
                &self
                    .inner
                    .nodes
                    .iter()
                    .map(|n| &*n.name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The state of a thread at a checkpoint.
#[derive(Debug, Clone)]
pub struct StateSnapshot<S> {
    /// The state values.
    pub values: S,
    /// The nodes due to run next (empty when the run finished).
    pub next: Vec<String>,
    /// The checkpoint.
    pub checkpoint: CheckpointMeta,
    /// Interrupts pending at this checkpoint.
    pub interrupts: Vec<Interrupt>,
    /// Errors recorded at this checkpoint, by task id (a failed step).
    pub errors: Vec<(String, String)>,
    /// The tasks of the step this checkpoint leads to (LangGraph's `StateSnapshot.tasks`): for
    /// a step that stopped half-way, which finished (their writes are saved), which failed and
    /// which paused.
    pub tasks: Vec<TaskSnapshot>,
}

/// One task of a [`StateSnapshot`]: a node due in the next step, and what it left behind if
/// that step already ran and stopped.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TaskSnapshot {
    /// The task's id (`<step>:<node>`, or `<step>:<node>:<send index>`).
    pub id: String,
    /// The node.
    pub name: String,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// What it waits for, if it paused.
    pub interrupts: Vec<Interrupt>,
    /// True when it finished and its writes are saved: it will not run again.
    pub writes_saved: bool,
    /// What it wrote (`{"updates": [..], "goto": [..]}`), when its writes are saved.
    pub result: Option<serde_json::Value>,
}

impl<S: State> Graph<S> {
    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The node names, in declaration order.
    pub fn node_names(&self) -> Vec<&str> {
        self.inner.nodes.iter().map(|n| &*n.name).collect()
    }

    /// The same graph with a different cache store for its nodes' cache policies (see
    /// [`CachePolicy`]).
    #[must_use]
    pub fn with_cache(&self, cache: Arc<dyn NodeCache>) -> Graph<S> {
        Graph {
            inner: self.inner.clone(),
            checkpointer: self.checkpointer.clone(),
            cache: Some(cache),
            store: self.store.clone(),
        }
    }

    /// The same graph with a different default checkpointer.
    #[must_use]
    pub fn with_checkpointer(&self, checkpointer: Arc<dyn Checkpointer>) -> Graph<S> {
        Graph {
            inner: self.inner.clone(),
            checkpointer: Some(checkpointer),
            cache: self.cache.clone(),
            store: self.store.clone(),
        }
    }

    /// The same graph with a different default long-term store (see [`kit::store`](crate::store)).
    #[must_use]
    pub fn with_store(&self, store: impl crate::store::IntoStore) -> Graph<S> {
        Graph {
            inner: self.inner.clone(),
            checkpointer: self.checkpointer.clone(),
            cache: self.cache.clone(),
            store: Some(store.into_store()),
        }
    }

    /// The graph's default long-term store.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// The graph's default checkpointer.
    pub fn checkpointer(&self) -> Option<&Arc<dyn Checkpointer>> {
        self.checkpointer.as_ref()
    }

    /// Runs the graph on `input` until it finishes or pauses: set per-run options on the
    /// returned [`Invocation`], then `.await` it.
    ///
    /// With a checkpointer and a thread id, the run continues the thread: `input` is applied on
    /// top of its latest state (pending tasks of an earlier paused run are dropped; use
    /// [`resume`](Self::resume) to continue those).
    pub fn invoke(&self, input: S::Update) -> Invocation<'_, Self> {
        Invocation::new(self, RunRequest::Input(input))
    }

    /// Continues a paused (or failed) thread: answers its interrupts with `resume` and runs on.
    ///
    /// A thread paused at a breakpoint (`interrupt_before`) runs the paused node, also after
    /// its state was edited with [`update_state`](Self::update_state): going on does not pause
    /// at the same place again.
    pub fn resume(&self, resume: impl Into<Resume>) -> Invocation<'_, Self> {
        Invocation::new(self, RunRequest::Resume(resume.into()))
    }

    /// Continues a paused thread as [`resume`](Self::resume) does, first applying `update` to
    /// its state (LangGraph's `Command(resume=..., update=...)`): the resumed nodes see it, and
    /// it is saved with their step.
    pub fn resume_with(
        &self,
        resume: impl Into<Resume>,
        update: S::Update,
    ) -> Invocation<'_, Self> {
        Invocation::new(
            self,
            RunRequest::Command {
                resume: resume.into(),
                update,
            },
        )
    }

    /// Runs the graph and streams its events. The stream ends after `run_end` (or `error`).
    /// Dropping the stream cancels the run.
    pub fn stream_events(&self, input: S::Update, opts: &RunOptions) -> EventStream {
        self.stream_input(RunInput::Input(input), opts, None)
    }

    /// Resumes a thread and streams its events.
    pub fn stream_resume(&self, resume: impl Into<Resume>, opts: &RunOptions) -> EventStream {
        self.stream_input(RunInput::Resume(resume.into(), None), opts, None)
    }

    /// Streams a run of `input`, every event passed through `filter`.
    pub(crate) fn stream_input(
        &self,
        input: RunInput<S>,
        opts: &RunOptions,
        filter: Option<Arc<dyn EventFilter>>,
    ) -> EventStream {
        let (sink, rx) = EventSink::channel(256);
        let mut sink = sink.with_thread_id(opts.get_thread_id().map(str::to_string));
        if let Some(filter) = filter {
            sink = sink.with_filter(filter);
        }
        let opts = opts.clone().events(sink);
        let graph = self.clone();
        // Boxed so the spawned task stays small (the executor's future is a few KB).
        let handle = tokio::spawn(async move {
            // The run reports its outcome (run_end or error) on the stream.
            let _ = Box::pin(run::run_leased(&graph, opts, input)).await;
        });
        crate::event::stream_from(rx, handle)
    }

    /// The state of a thread at its head (or at the options' checkpoint); `None` for an unknown
    /// thread.
    pub async fn get_state(
        &self,
        opts: &RunOptions,
    ) -> Result<Option<StateSnapshot<S>>, GraphError> {
        run::get_state(self, opts).await
    }

    /// The thread's checkpoints, newest first, each with its state.
    pub async fn state_history(
        &self,
        opts: &RunOptions,
        limit: Option<usize>,
    ) -> Result<Vec<StateSnapshot<S>>, GraphError> {
        run::state_history(self, opts, limit).await
    }

    /// Edits a thread's state as if `as_node` had returned `update` (or, without `as_node`,
    /// keeping the tasks that were due). Returns the new checkpoint id.
    pub async fn update_state(
        &self,
        opts: &RunOptions,
        update: S::Update,
        as_node: Option<&str>,
    ) -> Result<String, GraphError> {
        run::update_state(self, opts, update, as_node).await
    }

    /// Forks a thread at `opts.checkpoint_id`: a new head with that checkpoint's state and due
    /// tasks. Later runs continue from the fork. Returns the new checkpoint id.
    pub async fn fork(&self, opts: &RunOptions) -> Result<String, GraphError> {
        run::fork(self, opts).await
    }

    /// Who holds the thread's lease and how many runs wait for it (`None`: idle). Only runs
    /// given a [`multitask_strategy`](RunOptions::multitask_strategy) take the lease.
    ///
    /// ```
    /// use kit::checkpoint::{MemoryCheckpointer, MultitaskStrategy};
    /// use kit::graph::{GraphBuilder, NodeError};
    /// use kit::{END, RunOptions, START};
    /// use std::sync::Arc;
    ///
    /// #[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
    /// struct S { n: u64 }
    ///
    /// async fn add(s: &S) -> Result<SUpdate, NodeError> {
    ///     Ok(SUpdate::new().n(s.n + 1))
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::GraphError> {
    /// let graph = GraphBuilder::<S>::new("counter")
    ///     .node("add", |s, _ctx| async move { add(&s).await })
    ///     .edge(START, "add")
    ///     .edge("add", END)
    ///     .compile()?
    ///     .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    /// let opts = RunOptions::new().thread_id("t1");
    /// let out = graph
    ///     .invoke(SUpdate::new())
    ///     .options(&opts)
    ///     .multitask_strategy(MultitaskStrategy::Reject)
    ///     .await?;
    /// assert_eq!(out.state().n, 1);
    /// assert!(graph.thread_activity(&opts).await?.is_none()); // the run left the thread
    /// # Ok(()) }
    /// ```
    pub async fn thread_activity(
        &self,
        opts: &RunOptions,
    ) -> Result<Option<crate::checkpoint::ThreadActivity>, GraphError> {
        let (cp, thread) = self.thread_store(opts, "thread_activity")?;
        Ok(cp.thread_activity(thread).await?)
    }

    /// Deletes a thread from the checkpointer, with everything stored for it.
    pub async fn delete_thread(&self, opts: &RunOptions) -> Result<(), GraphError> {
        let (cp, thread) = self.thread_store(opts, "delete_thread")?;
        cp.delete_thread(thread).await?;
        Ok(())
    }

    /// Prunes a thread's history as `strategy` says ([`Checkpointer::prune`]): a paused
    /// thread still resumes afterwards.
    pub async fn prune_thread(
        &self,
        opts: &RunOptions,
        strategy: crate::checkpoint::PruneStrategy,
    ) -> Result<crate::checkpoint::PruneReport, GraphError> {
        let (cp, thread) = self.thread_store(opts, "prune_thread")?;
        Ok(cp.prune(thread, strategy).await?)
    }

    /// The checkpointer and thread id an operation on a stored thread uses.
    fn thread_store<'a>(
        &self,
        opts: &'a RunOptions,
        operation: &'static str,
    ) -> Result<(Arc<dyn Checkpointer>, &'a str), GraphError> {
        let cp = opts
            .checkpointer
            .clone()
            .or_else(|| self.checkpointer.clone())
            .ok_or(GraphError::MissingCheckpointer(operation))?;
        let thread = opts
            .thread_id
            .as_deref()
            .ok_or(GraphError::MissingThread(operation))?;
        Ok((cp, thread))
    }

    /// Renders the graph as a Mermaid flowchart.
    pub fn draw_mermaid(&self) -> String {
        mermaid::draw(&self.inner)
    }
}

impl<S: State> Runnable for Graph<S> {
    type Input = S::Update;
    type Output = Outcome<S>;
    type Error = GraphError;

    fn run(
        &self,
        request: RunRequest<S::Update>,
        opts: RunOptions,
    ) -> BoxFuture<'_, Result<Outcome<S>, GraphError>> {
        // One box for the whole run: a caller holding many runs (a spawned task per run, say)
        // holds a pointer to the executor's large state machine, not a copy of it.
        Box::pin(run::run_leased(self, opts, request.into()))
    }

    fn run_streamed(&self, request: RunRequest<S::Update>, opts: RunOptions) -> EventStream {
        self.stream_input(request.into(), &opts, None)
    }
}

impl<S: State> From<RunRequest<S::Update>> for RunInput<S> {
    fn from(request: RunRequest<S::Update>) -> Self {
        match request {
            RunRequest::Input(input) => RunInput::Input(input),
            RunRequest::Resume(resume) => RunInput::Resume(resume, None),
            RunRequest::Command { resume, update } => RunInput::Resume(resume, Some(update)),
        }
    }
}
