//! Choosing the next step: edges, conditions, routes, joins and `Send`s.

use super::{Exec, TaskSpec};
use crate::graph::error::GraphError;
use crate::graph::node::Goto;
use crate::graph::{END, Outgoing, Target};
use crate::state::State;

/// The next step's tasks in the making. Kept by the run and reused from step to step, so
/// routing allocates nothing once the run's widest step has been seen.
#[derive(Default)]
pub(super) struct Routing {
    /// Nodes triggered by edges, conditions, routes and joins (repeats allowed).
    triggered: Vec<usize>,
    /// `Send` tasks, in the order they were sent.
    sends: Vec<TaskSpec>,
    /// A finished step's task list, emptied, to become a next one.
    spare: Vec<TaskSpec>,
}

impl Routing {
    /// Static-trigger tasks in node order (each node once), then `Send` tasks in order.
    fn merge(&mut self) -> Vec<TaskSpec> {
        let mut tasks = std::mem::take(&mut self.spare);
        tasks.clear();
        // Sorting what fired, rather than marking every node of the graph, keeps a step's
        // cost independent of the graph's size.
        self.triggered.sort_unstable();
        self.triggered.dedup();
        tasks.reserve(self.triggered.len() + self.sends.len());
        tasks.extend(self.triggered.drain(..).map(|node| TaskSpec {
            node,
            send_index: None,
            arg: None,
        }));
        tasks.extend(self.sends.drain(..).enumerate().map(|(i, mut send)| {
            send.send_index = Some(i);
            send
        }));
        tasks
    }

    /// Keeps a finished step's task list for a later step.
    pub(super) fn recycle(&mut self, mut tasks: Vec<TaskSpec>) {
        tasks.clear();
        self.spare = tasks;
    }
}

impl<S: State> Exec<S> {
    /// Routes from the nodes that just ran (START for `None`), each with the `goto`s its
    /// output carried, and makes what they trigger the next step's tasks.
    pub(super) fn schedule<'a>(
        &mut self,
        ran: impl IntoIterator<Item = (Option<usize>, &'a [Goto])>,
    ) -> Result<(), GraphError> {
        let mut routing = std::mem::take(&mut self.routing);
        routing.triggered.clear();
        routing.sends.clear();
        let routed = ran
            .into_iter()
            .try_for_each(|(node, goto)| self.route_from(node, goto, &mut routing));
        if routed.is_ok() {
            self.next = routing.merge();
        }
        self.routing = routing;
        routed
    }

    /// Adds the tasks triggered by a node that just ran (or by START when `node` is `None`).
    fn route_from(
        &mut self,
        node: Option<usize>,
        goto: &[Goto],
        into: &mut Routing,
    ) -> Result<(), GraphError> {
        let graph = &*self.graph.inner;
        let (name, out): (&str, &Outgoing<S>) = match node {
            Some(i) => (&graph.nodes[i].name, &graph.nodes[i].out),
            None => (crate::graph::START, &graph.start),
        };
        let next = &mut into.triggered;
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
                    into.sends.reserve(list.len());
                    // A fan-out sends to one node, mostly: its name is looked up once.
                    let mut last: Option<(String, usize)> = None;
                    for s in list {
                        let i = match &last {
                            Some((node, i)) if *node == s.node => *i,
                            _ => {
                                let i = self.node_index(&s.node, name)?;
                                last = Some((s.node, i));
                                i
                            }
                        };
                        into.sends.push(TaskSpec {
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
                    into.sends.push(TaskSpec {
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(node: usize) -> TaskSpec {
        TaskSpec {
            node,
            send_index: None,
            arg: None,
        }
    }

    #[test]
    fn merge_gives_each_triggered_node_once_in_node_order_then_the_sends_numbered() {
        let mut routing = Routing::default();
        routing.triggered.extend([3, 1, 3, 0, 1]);
        routing.sends.extend([send(2), send(1)]);
        let tasks = routing.merge();
        let shape: Vec<(usize, Option<usize>)> =
            tasks.iter().map(|t| (t.node, t.send_index)).collect();
        assert_eq!(
            shape,
            [(0, None), (1, None), (3, None), (2, Some(0)), (1, Some(1))]
        );
        assert!(routing.triggered.is_empty() && routing.sends.is_empty());

        // A finished step's list becomes the next one: no new allocation.
        let buffer = tasks.as_ptr();
        routing.recycle(tasks);
        routing.triggered.extend([4, 4]);
        let next = routing.merge();
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].node, 4);
        assert_eq!(next.as_ptr(), buffer);
    }
}
