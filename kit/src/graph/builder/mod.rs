//! Building graphs at run time.

mod compile;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;

#[cfg(doc)]
use super::START;
use super::node::{IntoNodeOutput, NodeContext, NodeFn, Send};
use super::{CachePolicy, DEFAULT_WARM_THREADS, END, ErrorKindFn, Graph, NodeCache, RetryPolicy};
use crate::checkpoint::Checkpointer;
use crate::state::{DynChannel, DynSchema, IntoDynChannel, State};

/// Where a routing function sends the run.
#[derive(Debug, Clone)]
pub enum Route {
    /// These nodes run next ([`END`] ends this branch).
    To(Vec<String>),
    /// Fan out: each `Send` runs its node with its own input.
    Sends(Vec<Send>),
}

impl Route {
    /// Route to one node.
    pub fn to(node: impl Into<String>) -> Self {
        Route::To(vec![node.into()])
    }

    /// Route to several nodes (they run in the same superstep).
    pub fn to_all<I: IntoIterator<Item = S>, S: Into<String>>(nodes: I) -> Self {
        Route::To(nodes.into_iter().map(Into::into).collect())
    }

    /// End this branch.
    pub fn end() -> Self {
        Route::To(vec![END.to_string()])
    }
}

impl From<&str> for Route {
    fn from(node: &str) -> Self {
        Route::to(node)
    }
}

impl From<String> for Route {
    fn from(node: String) -> Self {
        Route::To(vec![node])
    }
}

impl From<Vec<Send>> for Route {
    fn from(sends: Vec<Send>) -> Self {
        Route::Sends(sends)
    }
}

impl From<Vec<&str>> for Route {
    fn from(nodes: Vec<&str>) -> Self {
        Route::to_all(nodes)
    }
}

/// Erases an async node closure.
pub(crate) fn async_node<S, F, Fut, R>(f: F) -> NodeFn<S>
where
    S: State,
    F: Fn(Arc<S>, NodeContext) -> Fut + std::marker::Send + Sync + 'static,
    Fut: Future<Output = R> + std::marker::Send + 'static,
    R: IntoNodeOutput<S> + 'static,
{
    Arc::new(move |state, ctx| {
        // `map`, not an `async` block awaiting `fut`: that would hold the node's future twice.
        Box::pin(f(state, ctx).map(IntoNodeOutput::into_output))
    })
}

pub(crate) type Condition<S> = Arc<dyn Fn(&S) -> bool + std::marker::Send + Sync>;
pub(crate) type Router<S> = Arc<dyn Fn(&S) -> Route + std::marker::Send + Sync>;

enum EdgeDef<S> {
    Static {
        from: String,
        to: String,
    },
    When {
        from: String,
        to: String,
        label: String,
        cond: Condition<S>,
    },
    Route {
        from: String,
        router: Router<S>,
        destinations: Vec<String>,
    },
    Join {
        from: Vec<String>,
        to: String,
    },
}

/// Builds a [`Graph`] node by node and edge by edge.
///
/// ```
/// use kit::graph::{GraphBuilder, NodeContext, START, END};
/// use kit::{RunOptions, State};
/// use std::sync::Arc;
///
/// #[derive(State, Clone, Default, Debug, serde::Serialize, serde::Deserialize)]
/// struct Count { n: i64 }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let graph = GraphBuilder::<Count>::new("counter")
///     .node("inc", |s: Arc<Count>, _ctx: NodeContext| async move { CountUpdate::new().n(s.n + 1) })
///     .edge(START, "inc")
///     .edge("inc", END)
///     .compile()
///     .unwrap();
/// let out = graph.invoke(CountUpdate::new().n(41)).await.unwrap();
/// assert_eq!(out.state().n, 42);
/// # }
/// ```
#[must_use = "a builder does nothing until compiled"]
pub struct GraphBuilder<S: State> {
    name: String,
    nodes: Vec<(String, NodeFn<S>)>,
    destinations: HashMap<String, Vec<String>>,
    retries: Vec<(String, RetryPolicy)>,
    caches: Vec<(String, CachePolicy<S>)>,
    cache: Option<Arc<dyn NodeCache>>,
    store: Option<Arc<dyn crate::store::Store>>,
    edges: Vec<EdgeDef<S>>,
    schema: S::Schema,
    checkpointer: Option<Arc<dyn Checkpointer>>,
    interrupt_before: Vec<String>,
    interrupt_after: Vec<String>,
    recursion_limit: Option<usize>,
    warm_threads: usize,
    error_kind: Option<ErrorKindFn>,
}

impl<S: State> GraphBuilder<S> {
    /// An empty graph with a name (used in events, traces and errors).
    pub fn new(name: impl Into<String>) -> Self {
        GraphBuilder {
            name: name.into(),
            nodes: Vec::new(),
            destinations: HashMap::new(),
            retries: Vec::new(),
            caches: Vec::new(),
            cache: None,
            store: None,
            edges: Vec::new(),
            schema: S::Schema::default(),
            checkpointer: None,
            interrupt_before: Vec::new(),
            interrupt_after: Vec::new(),
            recursion_limit: None,
            warm_threads: DEFAULT_WARM_THREADS,
            error_kind: None,
        }
    }

    /// How the `kind` of a failed run's `error` event is named (for agents: the kind of the
    /// agent error a node raised, such as `pii_detected`, rather than `node_failed`).
    pub(crate) fn error_kind(mut self, kind: ErrorKindFn) -> Self {
        self.error_kind = Some(kind);
        self
    }

    /// Adds an async node: `|state: Arc<S>, ctx: NodeContext| async move { ... }`.
    ///
    /// The node sees the snapshot of the state at the start of its superstep and returns an
    /// update (or anything [`IntoNodeOutput`]).
    pub fn node<F, Fut, R>(mut self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(Arc<S>, NodeContext) -> Fut + std::marker::Send + Sync + 'static,
        Fut: Future<Output = R> + std::marker::Send + 'static,
        R: IntoNodeOutput<S> + 'static,
    {
        self.nodes.push((name.into(), async_node(f)));
        self
    }

    /// Adds a compiled graph as the node `name` (see [`subgraph`](super::subgraph)): `input`
    /// maps this graph's state to the child's input, `output` the child's final state to an
    /// update of this graph.
    pub fn subgraph<C, I, O>(
        self,
        name: impl Into<String>,
        graph: Graph<C>,
        input: I,
        output: O,
    ) -> Self
    where
        C: State,
        I: Fn(&S) -> C::Update + std::marker::Send + Sync + 'static,
        O: Fn(&C) -> S::Update + std::marker::Send + Sync + 'static,
    {
        self.node(name, super::subgraph(graph, input, output))
    }

    /// Adds a synchronous node: `|state: &S, ctx: &NodeContext| update`.
    pub fn sync_node<F, R>(mut self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&S, &NodeContext) -> R + std::marker::Send + Sync + 'static,
        R: IntoNodeOutput<S> + 'static,
    {
        let f = Arc::new(f);
        let node: NodeFn<S> = Arc::new(move |state, ctx| {
            let f = f.clone();
            // Called inside the future so a panic is caught like an async node's.
            Box::pin(async move { f(&state, &ctx).into_output() })
        });
        self.nodes.push((name.into(), node));
        self
    }

    /// Adds a node from an already type-erased function (used by `graph!` and agents).
    #[doc(hidden)]
    pub fn node_fn(mut self, name: impl Into<String>, f: NodeFn<S>) -> Self {
        self.nodes.push((name.into(), f));
        self
    }

    /// Declares the nodes a node may reach with `goto` (for validation and drawing).
    pub fn destinations<I, T>(mut self, node: impl Into<String>, targets: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.destinations
            .entry(node.into())
            .or_default()
            .extend(targets.into_iter().map(Into::into));
        self
    }

    /// A fixed edge: after `from` runs, `to` runs in the next superstep. Use [`START`] and
    /// [`END`] for the entry and the exit.
    pub fn edge(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.edges.push(EdgeDef::Static {
            from: from.into(),
            to: to.into(),
        });
        self
    }

    /// A conditional edge: `to` runs if `cond` holds on the state after `from`'s superstep.
    /// `label` describes the condition in drawings.
    pub fn edge_when<F>(
        mut self,
        from: impl Into<String>,
        to: impl Into<String>,
        label: impl Into<String>,
        cond: F,
    ) -> Self
    where
        F: Fn(&S) -> bool + std::marker::Send + Sync + 'static,
    {
        self.edges.push(EdgeDef::When {
            from: from.into(),
            to: to.into(),
            label: label.into(),
            cond: Arc::new(cond),
        });
        self
    }

    /// A routing function: after `from`'s superstep, `router` picks the next nodes (or
    /// [`Send`]s). `destinations` lists the nodes it may return, for validation and drawing; a
    /// router returning another name fails the run with a clear error.
    pub fn route<F, R, I, T>(mut self, from: impl Into<String>, destinations: I, router: F) -> Self
    where
        F: Fn(&S) -> R + std::marker::Send + Sync + 'static,
        R: Into<Route>,
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.edges.push(EdgeDef::Route {
            from: from.into(),
            router: Arc::new(move |s| router(s).into()),
            destinations: destinations.into_iter().map(Into::into).collect(),
        });
        self
    }

    /// A fan-in edge: `to` runs once every node in `from` has run (in any supersteps).
    pub fn join<I, T>(mut self, from: I, to: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.edges.push(EdgeDef::Join {
            from: from.into_iter().map(Into::into).collect(),
            to: to.into(),
        });
        self
    }

    /// The long-term store the graph's nodes reach with
    /// [`NodeContext::store`](crate::NodeContext::store) (see [`kit::store`](crate::store)); a
    /// run's own ([`RunOptions::store`](crate::RunOptions::store)) wins.
    pub fn store(mut self, store: impl crate::store::IntoStore) -> Self {
        self.store = Some(store.into_store());
        self
    }

    /// The default checkpointer of the graph's runs.
    pub fn checkpointer(mut self, checkpointer: Arc<dyn Checkpointer>) -> Self {
        self.checkpointer = Some(checkpointer);
        self
    }

    /// The most supersteps a run of this graph may take, unless the run sets its own
    /// ([`RunOptions::recursion_limit`](crate::RunOptions::recursion_limit)). Default
    /// [`DEFAULT_RECURSION_LIMIT`](crate::graph::DEFAULT_RECURSION_LIMIT).
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = Some(limit);
        self
    }

    /// How many finished threads the graph keeps warm (default
    /// [`DEFAULT_WARM_THREADS`]); `0` turns it off.
    ///
    /// The next run on a warm thread goes on from the state the last run left instead of
    /// loading the thread, after checking with the checkpointer (one small read) that nothing
    /// moved the thread since. That makes an invoke on a long thread cost the same as on a
    /// short one. Each warm thread holds its state in memory: lower this for graphs whose
    /// states are large, raise it for a process serving many threads at once. A state whose
    /// serialisation loses something (a `#[serde(skip)]` field) keeps it on a warm thread and
    /// loses it on a loaded one: turn warm threads off for such a state, or make it round-trip.
    ///
    /// ```
    /// use kit::graph::GraphBuilder;
    /// use kit::{END, START};
    ///
    /// #[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
    /// struct S { n: i64 }
    ///
    /// let graph = GraphBuilder::<S>::new("counter")
    ///     .node("inc", |s, _ctx| async move { SUpdate::new().n(s.n + 1) })
    ///     .edge(START, "inc")
    ///     .edge("inc", END)
    ///     .warm_threads(0) // large states, many threads: always load
    ///     .compile()?;
    /// # let _ = graph;
    /// # Ok::<(), kit::GraphError>(())
    /// ```
    pub fn warm_threads(mut self, threads: usize) -> Self {
        self.warm_threads = threads;
        self
    }

    /// Runs `node` again when it fails, as `policy` says (see [`RetryPolicy`]). A later call for
    /// the same node replaces the policy.
    pub fn retry(mut self, node: impl Into<String>, policy: RetryPolicy) -> Self {
        let node = node.into();
        self.retries.retain(|(n, _)| *n != node);
        self.retries.push((node, policy));
        self
    }

    /// Caches `node`'s output as `policy` says (see [`CachePolicy`]); the graph needs a cache
    /// store ([`cache`](Self::cache)). A later call for the same node replaces the policy.
    pub fn cache_policy(mut self, node: impl Into<String>, policy: CachePolicy<S>) -> Self {
        let node = node.into();
        self.caches.retain(|(n, _)| *n != node);
        self.caches.push((node, policy));
        self
    }

    /// Where the outputs of nodes with a cache policy are kept ([`MemoryCache`](super::MemoryCache),
    /// `SqliteCache`, `PostgresCache`, or a [`NodeCache`] of your own).
    pub fn cache(mut self, cache: Arc<dyn NodeCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Pause before these nodes run (static interrupt).
    pub fn interrupt_before<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.interrupt_before
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Pause after these nodes ran (static interrupt).
    pub fn interrupt_after<I: IntoIterator<Item = T>, T: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Adds a reducer schema: its reducers join (and for the same key, replace) the ones added
    /// before, so setting a schema never drops them.
    pub fn schema(mut self, schema: S::Schema) -> Self {
        S::merge_schema(&mut self.schema, schema);
        self
    }
}

impl<S: State<Schema = DynSchema>> GraphBuilder<S> {
    /// Registers the reducer of a dynamic key: `fun(existing, update)` merges in place.
    pub fn add_reducer<F>(mut self, key: impl Into<String>, fun: F) -> Self
    where
        F: Fn(&mut serde_json::Value, serde_json::Value) + std::marker::Send + Sync + 'static,
    {
        self.schema.add_channel(key, DynChannel::reducer(fun));
        self
    }

    /// Declares a dynamic key with its reducer and starting value: a shipped one
    /// ([`dyn_reducers::add_messages()`](crate::state::dyn_reducers::add_messages), `append()`,
    /// `merge()`, `merge_or_remove()`) or a [`DynChannel`] of your own.
    pub fn add_channel(mut self, key: impl Into<String>, channel: impl IntoDynChannel) -> Self {
        self.schema.add_channel(key, channel);
        self
    }

    /// The value a dynamic key reads as in a new thread, before its first write.
    pub fn initial(mut self, key: impl Into<String>, value: impl Into<serde_json::Value>) -> Self {
        self.schema.set_initial(key, value);
        self
    }
}
