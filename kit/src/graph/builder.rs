//! Building graphs at run time.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use super::error::GraphError;
use super::node::{IntoNodeOutput, NodeContext, NodeFn, Send};
use std::borrow::Cow;

use kit_graph_rules::{Edge, Endpoint, Spec};

use super::{CachePolicy, NodeCache, RetryPolicy};

use super::{CompiledNode, END, ErrorKindFn, Graph, GraphInner, Join, START, Target, WhenEdge};
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
        let fut = f(state, ctx);
        Box::pin(async move { fut.await.into_output() })
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
    edges: Vec<EdgeDef<S>>,
    schema: S::Schema,
    checkpointer: Option<Arc<dyn Checkpointer>>,
    interrupt_before: Vec<String>,
    interrupt_after: Vec<String>,
    recursion_limit: Option<usize>,
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
            edges: Vec::new(),
            schema: S::Schema::default(),
            checkpointer: None,
            interrupt_before: Vec::new(),
            interrupt_after: Vec::new(),
            recursion_limit: None,
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

    /// The graph's shape, as the rulebook shared with `graph!` reads it.
    fn shape(&self) -> Spec<'_, ()> {
        fn end(name: &str) -> Endpoint<'_, ()> {
            match name {
                START => Endpoint::Start(()),
                END => Endpoint::End(()),
                _ => Endpoint::Node(Cow::Borrowed(name), ()),
            }
        }
        fn names(list: &[String]) -> Vec<(Cow<'_, str>, ())> {
            list.iter()
                .map(|n| (Cow::Borrowed(n.as_str()), ()))
                .collect()
        }
        let mut edges: Vec<Edge<'_, ()>> = self
            .edges
            .iter()
            .map(|edge| match edge {
                EdgeDef::Static { from, to } => Edge::Plain {
                    from: end(from),
                    to: end(to),
                    when: None,
                },
                EdgeDef::When { from, to, .. } => Edge::Plain {
                    from: end(from),
                    to: end(to),
                    when: Some(()),
                },
                EdgeDef::Route {
                    from, destinations, ..
                } => Edge::Route {
                    from: end(from),
                    targets: destinations.iter().map(|d| end(d)).collect(),
                },
                EdgeDef::Join { from, to } => Edge::Join {
                    from: from.iter().map(|f| end(f)).collect(),
                    to: end(to),
                    when: None,
                    at: (),
                },
            })
            .collect();
        edges.extend(
            self.destinations
                .iter()
                .map(|(node, targets)| Edge::Destinations {
                    node: (Cow::Borrowed(node.as_str()), ()),
                    targets: targets.iter().map(|t| end(t)).collect(),
                }),
        );
        Spec {
            nodes: self
                .nodes
                .iter()
                .map(|(n, _)| (Cow::Borrowed(n.as_str()), ()))
                .collect(),
            edges,
            interrupt_before: names(&self.interrupt_before),
            interrupt_after: names(&self.interrupt_after),
            policies: self
                .retries
                .iter()
                .map(|(n, _)| n)
                .chain(self.caches.iter().map(|(n, _)| n))
                .map(|n| (Cow::Borrowed(n.as_str()), ()))
                .collect(),
            whole: (),
            // A node may `goto` or `Send` to nodes it did not declare: the builder cannot know
            // that a node is never reached.
            check_reachability: false,
        }
    }

    /// Validates the definition (every rule `graph!` checks at compile time, in the same
    /// words, all problems at once) and builds the runnable graph.
    pub fn compile(self) -> Result<Graph<S>, GraphError> {
        let invalid = |message: String| GraphError::Invalid {
            graph: self.name.clone(),
            message,
        };
        let problems = kit_graph_rules::check(&self.shape());
        match problems.len() {
            0 => {}
            1 => return Err(invalid(problems[0].message.clone())),
            n => {
                let list: Vec<String> = problems
                    .iter()
                    .enumerate()
                    .map(|(i, p)| format!("{}) {}", i + 1, p.message))
                    .collect();
                return Err(invalid(format!("{n} problems: {}", list.join("; "))));
            }
        }
        // The rules hold: every name below resolves.
        let index: HashMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.as_str(), i))
            .collect();
        let unresolved = |name: &str| invalid(format!("unknown node `{name}`"));
        let resolve_from = |name: &str| -> Result<Option<usize>, GraphError> {
            if name == START {
                return Ok(None);
            }
            index
                .get(name)
                .copied()
                .map(Some)
                .ok_or_else(|| unresolved(name))
        };
        let resolve_to = |name: &str| -> Result<Target, GraphError> {
            if name == END {
                return Ok(Target::End);
            }
            index
                .get(name)
                .copied()
                .map(Target::Node)
                .ok_or_else(|| unresolved(name))
        };

        let mut nodes: Vec<CompiledNode<S>> = self
            .nodes
            .iter()
            .map(|(name, f)| CompiledNode {
                name: Arc::from(name.as_str()),
                func: f.clone(),
                out: Default::default(),
                joins: Vec::new(),
                interrupt_before: false,
                interrupt_after: false,
                destinations: Vec::new(),
                retry: None,
                cache: None,
            })
            .collect();
        if !self.caches.is_empty() && self.cache.is_none() {
            return Err(invalid(format!(
                "node `{}` has a cache policy but the graph has no cache store: add \
                 `.cache(Arc::new(MemoryCache::new()))` (or `cache_store: ..;` in graph!)",
                self.caches[0].0
            )));
        }
        for (name, policy) in &self.caches {
            let Some(&i) = index.get(name.as_str()) else {
                return Err(unresolved(name));
            };
            nodes[i].cache = Some(Arc::new(policy.clone()));
        }
        for (name, policy) in &self.retries {
            let Some(&i) = index.get(name.as_str()) else {
                return Err(unresolved(name));
            };
            nodes[i].retry = Some(Arc::new(policy.clone()));
        }
        let mut start = super::Outgoing::default();
        let mut joins = Vec::new();

        for edge in &self.edges {
            match edge {
                EdgeDef::Static { from, to } => {
                    let to = resolve_to(to)?;
                    match resolve_from(from)? {
                        None => start.statics.push(to),
                        Some(i) => nodes[i].out.statics.push(to),
                    }
                }
                EdgeDef::When {
                    from,
                    to,
                    label,
                    cond,
                } => {
                    let edge = WhenEdge {
                        target: resolve_to(to)?,
                        label: label.clone(),
                        cond: cond.clone(),
                    };
                    match resolve_from(from)? {
                        None => start.whens.push(edge),
                        Some(i) => nodes[i].out.whens.push(edge),
                    }
                }
                EdgeDef::Route {
                    from,
                    router,
                    destinations,
                } => {
                    let mut targets = Vec::new();
                    for d in destinations {
                        targets.push(resolve_to(d)?);
                    }
                    let route = super::RouteEdge {
                        router: router.clone(),
                        destinations: targets,
                    };
                    match resolve_from(from)? {
                        None => start.routes.push(route),
                        Some(i) => nodes[i].out.routes.push(route),
                    }
                }
                EdgeDef::Join { from, to } => {
                    let target = resolve_to(to)?;
                    let id = joins.len();
                    let mut sources = Vec::new();
                    for (bit, f) in from.iter().enumerate() {
                        let Some(i) = resolve_from(f)? else {
                            return Err(unresolved(f));
                        };
                        nodes[i].joins.push((id, bit as u32));
                        sources.push(i);
                    }
                    joins.push(Join {
                        sources,
                        target,
                        all: if from.len() == 64 {
                            u64::MAX
                        } else {
                            (1u64 << from.len()) - 1
                        },
                    });
                }
            }
        }
        for (node, targets) in &self.destinations {
            let Some(&i) = index.get(node.as_str()) else {
                return Err(unresolved(node));
            };
            for t in targets {
                let t = resolve_to(t)?;
                nodes[i].destinations.push(t);
            }
        }
        for (names, before) in [
            (&self.interrupt_before, true),
            (&self.interrupt_after, false),
        ] {
            for name in names {
                let Some(&i) = index.get(name.as_str()) else {
                    return Err(unresolved(name));
                };
                if before {
                    nodes[i].interrupt_before = true;
                } else {
                    nodes[i].interrupt_after = true;
                }
            }
        }
        // The node names are already shared: the index reuses them.
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        Ok(Graph {
            inner: Arc::new(GraphInner {
                name: Arc::from(self.name.as_str()),
                nodes,
                index,
                start,
                joins,
                schema: self.schema,
                recursion_limit: self.recursion_limit,
                error_kind: self.error_kind.unwrap_or(GraphError::kind),
            }),
            checkpointer: self.checkpointer,
            cache: self.cache,
        })
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
