//! The rulebook for a kit graph's shape, shared by the `graph!` macro (at compile time) and
//! `GraphBuilder::compile` (at run time), so both report the same mistakes in the same words.
//!
//! A front-end describes its graph as a [`Spec`] whose names carry a location of its choice
//! (`L`: a token span for the macro, `()` for the builder) and calls [`check`], which returns
//! every problem found, not only the first.
//!
//! ```
//! use kit_graph_rules::{Edge, Endpoint, Spec, check};
//!
//! let spec = Spec {
//!     nodes: vec![("draft".into(), 1), ("review".into(), 2)],
//!     edges: vec![
//!         Edge::Plain { from: Endpoint::Start(3), to: Endpoint::Node("draft".into(), 4), when: None },
//!         Edge::Plain { from: Endpoint::Node("draft".into(), 5), to: Endpoint::Node("reveiw".into(), 6), when: None },
//!     ],
//!     interrupt_before: vec![],
//!     interrupt_after: vec![],
//!     policies: vec![],
//!     whole: 0,
//!     check_reachability: true,
//! };
//! let problems = check(&spec);
//! assert_eq!(problems[0].at, 6);
//! assert_eq!(problems[0].message, "unknown node `reveiw`; did you mean `review`?");
//! ```
//!
//! The rules:
//!
//! | rule | message starts with |
//! |---|---|
//! | the names of START and END are not node names; names are non-empty, without `|` and `:` | "`START` is reserved", "node name `x` is invalid" |
//! | each node is declared once | "node `x` is declared twice" |
//! | every name refers to a declared node | "unknown node `x`" (with a did-you-mean) |
//! | nothing leads to `START`, nothing leaves `END` | "an edge cannot lead to START", "… cannot start at END" |
//! | a join has 1 to 64 sources, none of them `START`, and no condition | "a join …" |
//! | something runs first | "nothing runs first" |
//! | every node has a way out: an edge, a join, a route or declared goto destinations | "node `x` has no way out" |
//! | every node can be reached (only when the front-end knows every way between nodes) | "node `x` is never reached" |

use std::borrow::Cow;
use std::collections::HashMap;

/// The most sources a join waits for (one bit each in a `u64`).
pub const MAX_JOIN_SOURCES: usize = 64;

/// The name a graph's entry uses.
pub const START: &str = "__start__";
/// The name a graph's exit uses.
pub const END: &str = "__end__";

/// One end of an edge: the graph's entry, its exit, or a node by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint<'a, L> {
    /// The entry.
    Start(L),
    /// The exit.
    End(L),
    /// A node.
    Node(Cow<'a, str>, L),
}

impl<L: Copy> Endpoint<'_, L> {
    /// Where it was written.
    pub fn at(&self) -> L {
        match self {
            Endpoint::Start(l) | Endpoint::End(l) | Endpoint::Node(_, l) => *l,
        }
    }
}

/// A way from one place of the graph to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edge<'a, L> {
    /// `from -> to`, with the location of its `when` condition if it has one.
    Plain {
        /// Where it starts.
        from: Endpoint<'a, L>,
        /// Where it leads.
        to: Endpoint<'a, L>,
        /// The condition, if any.
        when: Option<L>,
    },
    /// `[a, b] -> to`: runs `to` once every source has run.
    Join {
        /// The sources.
        from: Vec<Endpoint<'a, L>>,
        /// Where it leads.
        to: Endpoint<'a, L>,
        /// The condition, if any (a join may not have one).
        when: Option<L>,
        /// Where the join was written.
        at: L,
    },
    /// A routing function from `from` that returns one of `targets` (empty: not declared, so
    /// it may return any node).
    Route {
        /// Where it starts.
        from: Endpoint<'a, L>,
        /// The nodes it may return.
        targets: Vec<Endpoint<'a, L>>,
    },
    /// The nodes a node may go to by itself (`goto`, `Send`).
    Destinations {
        /// The node.
        node: (Cow<'a, str>, L),
        /// Where it may go.
        targets: Vec<Endpoint<'a, L>>,
    },
}

/// A graph's shape, as a front-end describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec<'a, L> {
    /// The declared nodes, in order.
    pub nodes: Vec<(Cow<'a, str>, L)>,
    /// Every edge, route, join and destination list.
    pub edges: Vec<Edge<'a, L>>,
    /// Nodes to pause before.
    pub interrupt_before: Vec<(Cow<'a, str>, L)>,
    /// Nodes to pause after.
    pub interrupt_after: Vec<(Cow<'a, str>, L)>,
    /// Nodes that retry and cache policies name.
    pub policies: Vec<(Cow<'a, str>, L)>,
    /// Where problems of the graph as a whole point (nothing runs first, no nodes).
    pub whole: L,
    /// Whether to report nodes that are never reached. Only a front-end that knows every way
    /// between nodes can say so: the builder lets a node `goto` or `Send` to undeclared
    /// destinations, so it leaves this off.
    pub check_reachability: bool,
}

/// A mistake in a graph's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem<L> {
    /// Where it was made.
    pub at: L,
    /// What is wrong, and how to fix it.
    pub message: String,
}

/// Checks every rule and returns every problem found (empty when the graph is sound).
pub fn check<L: Copy>(spec: &Spec<'_, L>) -> Vec<Problem<L>> {
    let mut checker = Checker {
        problems: Vec::new(),
        declared: HashMap::with_capacity(spec.nodes.len()),
    };
    checker.declare(&spec.nodes);
    // By node position: each name is looked up once, where it is used.
    let mut way_out = vec![false; spec.nodes.len()];
    let mut reached = vec![false; spec.nodes.len()];
    let mut starts = 0usize;
    for edge in &spec.edges {
        match edge {
            Edge::Plain { from, to, when: _ } => {
                starts += checker.source(from, "an edge", &mut way_out);
                checker.target(to, "an edge cannot lead to START", &mut reached);
            }
            Edge::Join { from, to, when, at } => {
                if let Some(when) = when {
                    checker.problem(*when, "a join `[a, b] -> c` cannot have a `when` condition");
                }
                if from.is_empty() {
                    checker.problem(*at, "a join needs at least one source node");
                }
                if from.len() > MAX_JOIN_SOURCES {
                    checker.problem(
                        *at,
                        format!(
                            "a join waits for at most {MAX_JOIN_SOURCES} nodes, this one lists {}",
                            from.len()
                        ),
                    );
                }
                for source in from {
                    match source {
                        Endpoint::Start(l) => {
                            checker.problem(*l, "START cannot be part of a join");
                        }
                        other => {
                            checker.source(other, "an edge", &mut way_out);
                        }
                    }
                }
                checker.target(to, "an edge cannot lead to START", &mut reached);
            }
            Edge::Route { from, targets } => {
                starts += checker.source(from, "a route", &mut way_out);
                for t in targets {
                    checker.target(t, "a route cannot lead to START", &mut reached);
                }
            }
            Edge::Destinations { node, targets } => {
                if let Some(i) = checker.known(&node.0, node.1)
                    && !targets.is_empty()
                {
                    way_out[i] = true;
                }
                for t in targets {
                    checker.target(t, "a node cannot go to START", &mut reached);
                }
            }
        }
    }
    for (name, at) in spec
        .interrupt_before
        .iter()
        .chain(&spec.interrupt_after)
        .chain(&spec.policies)
    {
        checker.known(name, *at);
    }

    // Ways out and reachability only mean something once every name resolves; checking them
    // after a typo would report the typo's consequences as more mistakes.
    let names_ok = checker.problems.is_empty();
    if spec.nodes.is_empty() {
        checker.problem(spec.whole, "a graph needs at least one node");
    } else if starts == 0 {
        checker.problem(
            spec.whole,
            "nothing runs first: add an edge from START to the first node",
        );
    }
    if names_ok {
        for (i, (name, at)) in spec.nodes.iter().enumerate() {
            if !way_out[i] {
                checker.problem(
                    *at,
                    format!(
                        "node `{name}` has no way out: add an edge from it (to END if it is the \
                         last step), a route, or declare its goto destinations"
                    ),
                );
            }
            if spec.check_reachability && !reached[i] {
                checker.problem(
                    *at,
                    format!(
                        "node `{name}` is never reached: add an edge to it (from START or \
                         another node), list it in a route, or in another node's goto \
                         destinations"
                    ),
                );
            }
        }
    }
    checker.problems
}

struct Checker<'a, L> {
    problems: Vec<Problem<L>>,
    /// Each declared name, with its position (the first declaration's).
    declared: HashMap<&'a str, usize>,
}

impl<'a, L: Copy> Checker<'a, L> {
    fn problem(&mut self, at: L, message: impl Into<String>) {
        self.problems.push(Problem {
            at,
            message: message.into(),
        });
    }

    fn declare(&mut self, nodes: &'a [(Cow<'_, str>, L)]) {
        for (i, (name, at)) in nodes.iter().enumerate() {
            let name: &'a str = name;
            if name == START || name == END {
                self.problem(
                    *at,
                    format!("`{name}` is reserved and cannot be a node name"),
                );
            } else if name.is_empty() || name.contains(['|', ':']) {
                self.problem(
                    *at,
                    format!(
                        "node name `{name}` is invalid: names must be non-empty and must not \
                         contain `|` or `:`"
                    ),
                );
            }
            if self.declared.contains_key(name) {
                self.problem(*at, format!("node `{name}` is declared twice"));
            } else {
                self.declared.insert(name, i);
            }
        }
    }

    /// The position of the declared node `name`; reports an unknown one, with a hint.
    fn known(&mut self, name: &str, at: L) -> Option<usize> {
        if let Some(&i) = self.declared.get(name) {
            return Some(i);
        }
        let names: Vec<&str> = self.declared.keys().copied().collect();
        let hint = match closest(name, names.iter().copied()) {
            Some(c) => format!("; did you mean `{c}`?"),
            None if names.is_empty() => "; no node is declared yet".to_string(),
            None => {
                let mut sorted = names;
                sorted.sort_unstable();
                format!("; nodes are: {}", sorted.join(", "))
            }
        };
        self.problem(at, format!("unknown node `{name}`{hint}"));
        None
    }

    /// Checks where `what` starts; returns 1 when it starts at START.
    fn source(&mut self, from: &Endpoint<'_, L>, what: &str, way_out: &mut [bool]) -> usize {
        match from {
            Endpoint::Start(_) => 1,
            Endpoint::End(at) => {
                self.problem(*at, format!("{what} cannot start at END"));
                0
            }
            Endpoint::Node(name, at) => {
                if let Some(i) = self.known(name, *at) {
                    way_out[i] = true;
                }
                0
            }
        }
    }

    fn target(&mut self, to: &Endpoint<'_, L>, into_start: &str, reached: &mut [bool]) {
        match to {
            Endpoint::Start(at) => self.problem(*at, into_start),
            Endpoint::End(_) => {}
            Endpoint::Node(name, at) => {
                if let Some(i) = self.known(name, *at) {
                    reached[i] = true;
                }
            }
        }
    }
}

/// The closest candidate to `name`, for "did you mean" hints: within an edit distance of 2, or
/// of a quarter of the candidate's length for long names.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (levenshtein(name, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min_by_key(|(d, c)| (*d, *c))
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests;
