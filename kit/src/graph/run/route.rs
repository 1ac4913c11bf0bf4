//! Choosing the next step: edges, conditions, routes, joins and `Send`s.

use super::{Exec, TaskSpec};
use crate::graph::error::GraphError;
use crate::graph::node::Goto;
use crate::graph::{END, Outgoing, Target};
use crate::state::State;

impl<S: State> Exec<S> {
    /// The tasks triggered by a node that just ran (or by START when `node` is `None`).
    pub(super) fn route_from(
        &mut self,
        node: Option<usize>,
        goto: &[Goto],
    ) -> Result<(Vec<usize>, Vec<TaskSpec>), GraphError> {
        let graph = self.graph.inner.clone();
        let (name, out): (&str, &Outgoing<S>) = match node {
            Some(i) => (&graph.nodes[i].name, &graph.nodes[i].out),
            None => (crate::graph::START, &graph.start),
        };
        let mut next = Vec::new();
        let mut sends = Vec::new();
        let mut fired = !out.statics.is_empty();
        for t in &out.statics {
            if let Target::Node(i) = t {
                next.push(*i);
            }
        }
        for w in &out.whens {
            if (w.cond)(&self.state) {
                fired = true;
                if let Target::Node(i) = w.target {
                    next.push(i);
                }
            }
        }
        for r in &out.routes {
            fired = true;
            match (r.router)(&self.state) {
                crate::graph::Route::To(names) => {
                    for target in names {
                        if target == END {
                            continue;
                        }
                        let i = self.node_index(&target, name)?;
                        if !r.destinations.is_empty() && !r.destinations.contains(&Target::Node(i))
                        {
                            return Err(GraphError::UnknownNode {
                                from: name.to_string(),
                                target,
                                known: "(not among the route's declared destinations)".into(),
                            });
                        }
                        next.push(i);
                    }
                }
                crate::graph::Route::Sends(list) => {
                    for s in list {
                        let i = self.node_index(&s.node, name)?;
                        sends.push(TaskSpec {
                            node: i,
                            send_index: None,
                            arg: Some(s.arg),
                        });
                    }
                }
            }
        }
        for g in goto {
            fired = true;
            match g {
                Goto::Node(target) => {
                    if target != END {
                        next.push(self.node_index(target, name)?);
                    }
                }
                Goto::Send(s) => {
                    let i = self.node_index(&s.node, name)?;
                    sends.push(TaskSpec {
                        node: i,
                        send_index: None,
                        arg: Some(s.arg.clone()),
                    });
                }
            }
        }
        if let Some(i) = node {
            for &(join, bit) in &graph.nodes[i].joins {
                fired = true;
                self.joins[join] |= 1 << bit;
                if self.joins[join] == graph.joins[join].all {
                    self.joins[join] = 0;
                    if let Target::Node(t) = graph.joins[join].target {
                        next.push(t);
                    }
                }
            }
        }
        if !fired && !out.whens.is_empty() {
            return Err(GraphError::NoRoute {
                node: name.to_string(),
                step: self.step,
            });
        }
        Ok((next, sends))
    }
}

/// Static-trigger tasks in node order (each node once), then `Send` tasks in order.
pub(super) fn merge_tasks(
    triggered: Vec<usize>,
    sends: Vec<TaskSpec>,
    nodes: usize,
) -> Vec<TaskSpec> {
    let mut tasks: Vec<TaskSpec> = Vec::with_capacity(triggered.len() + sends.len());
    if triggered.len() <= 1 {
        tasks.extend(triggered.into_iter().map(|node| TaskSpec {
            node,
            send_index: None,
            arg: None,
        }));
    } else {
        let mut seen = vec![false; nodes];
        for n in triggered {
            seen[n] = true;
        }
        tasks.extend(
            seen.iter()
                .enumerate()
                .filter(|(_, s)| **s)
                .map(|(node, _)| TaskSpec {
                    node,
                    send_index: None,
                    arg: None,
                }),
        );
    }
    for (i, mut send) in sends.into_iter().enumerate() {
        send.send_index = Some(i);
        tasks.push(send);
    }
    tasks
}
