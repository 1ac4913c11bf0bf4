//! Compiling a [`GraphBuilder`]: every rule `graph!` checks, then the runnable graph.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use kit_graph_rules::{Edge, Endpoint, Spec};

use super::{EdgeDef, GraphBuilder};
use crate::graph::error::GraphError;
use crate::graph::run::WarmThreads;
use crate::graph::{CompiledNode, END, Graph, GraphInner, Join, START, Target, WhenEdge};
use crate::state::State;

impl<S: State> GraphBuilder<S> {
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
        let mut start = crate::graph::Outgoing::default();
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
                    let route = crate::graph::RouteEdge {
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
                warm: WarmThreads::new(self.warm_threads),
            }),
            checkpointer: self.checkpointer,
            cache: self.cache,
            store: self.store,
        })
    }
}
