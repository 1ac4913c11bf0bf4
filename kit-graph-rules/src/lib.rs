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
//!     nodes: vec![("draft".to_string(), 1), ("review".to_string(), 2)],
//!     edges: vec![
//!         Edge::Plain { from: Endpoint::Start(3), to: Endpoint::Node("draft".into(), 4), when: None },
//!         Edge::Plain { from: Endpoint::Node("draft".into(), 5), to: Endpoint::Node("reveiw".into(), 6), when: None },
//!     ],
//!     interrupt_before: vec![],
//!     interrupt_after: vec![],
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

use std::collections::{HashMap, HashSet};

/// The most sources a join waits for (one bit each in a `u64`).
pub const MAX_JOIN_SOURCES: usize = 64;

/// The name a graph's entry uses.
pub const START: &str = "__start__";
/// The name a graph's exit uses.
pub const END: &str = "__end__";

/// One end of an edge: the graph's entry, its exit, or a node by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint<L> {
    /// The entry.
    Start(L),
    /// The exit.
    End(L),
    /// A node.
    Node(String, L),
}

impl<L: Copy> Endpoint<L> {
    /// Where it was written.
    pub fn at(&self) -> L {
        match self {
            Endpoint::Start(l) | Endpoint::End(l) | Endpoint::Node(_, l) => *l,
        }
    }
}

/// A way from one place of the graph to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edge<L> {
    /// `from -> to`, with the location of its `when` condition if it has one.
    Plain {
        /// Where it starts.
        from: Endpoint<L>,
        /// Where it leads.
        to: Endpoint<L>,
        /// The condition, if any.
        when: Option<L>,
    },
    /// `[a, b] -> to`: runs `to` once every source has run.
    Join {
        /// The sources.
        from: Vec<Endpoint<L>>,
        /// Where it leads.
        to: Endpoint<L>,
        /// The condition, if any (a join may not have one).
        when: Option<L>,
        /// Where the join was written.
        at: L,
    },
    /// A routing function from `from` that returns one of `targets` (empty: not declared, so
    /// it may return any node).
    Route {
        /// Where it starts.
        from: Endpoint<L>,
        /// The nodes it may return.
        targets: Vec<Endpoint<L>>,
    },
    /// The nodes a node may go to by itself (`goto`, `Send`).
    Destinations {
        /// The node.
        node: (String, L),
        /// Where it may go.
        targets: Vec<Endpoint<L>>,
    },
}

/// A graph's shape, as a front-end describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec<L> {
    /// The declared nodes, in order.
    pub nodes: Vec<(String, L)>,
    /// Every edge, route, join and destination list.
    pub edges: Vec<Edge<L>>,
    /// Nodes to pause before.
    pub interrupt_before: Vec<(String, L)>,
    /// Nodes to pause after.
    pub interrupt_after: Vec<(String, L)>,
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
pub fn check<L: Copy>(spec: &Spec<L>) -> Vec<Problem<L>> {
    let mut checker = Checker {
        problems: Vec::new(),
        declared: HashMap::new(),
    };
    checker.declare(&spec.nodes);
    let mut way_out: HashSet<&str> = HashSet::new();
    let mut reached: HashSet<&str> = HashSet::new();
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
                if checker.known(&node.0, node.1) && !targets.is_empty() {
                    way_out.insert(&node.0);
                }
                for t in targets {
                    checker.target(t, "a node cannot go to START", &mut reached);
                }
            }
        }
    }
    for (name, at) in spec.interrupt_before.iter().chain(&spec.interrupt_after) {
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
        for (name, at) in &spec.nodes {
            if !way_out.contains(name.as_str()) {
                checker.problem(
                    *at,
                    format!(
                        "node `{name}` has no way out: add an edge from it (to END if it is the \
                         last step), a route, or declare its goto destinations"
                    ),
                );
            }
            if spec.check_reachability && !reached.contains(name.as_str()) {
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
    declared: HashMap<&'a str, L>,
}

impl<'a, L: Copy> Checker<'a, L> {
    fn problem(&mut self, at: L, message: impl Into<String>) {
        self.problems.push(Problem {
            at,
            message: message.into(),
        });
    }

    fn declare(&mut self, nodes: &'a [(String, L)]) {
        for (name, at) in nodes {
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
            if self.declared.insert(name, *at).is_some() {
                self.problem(*at, format!("node `{name}` is declared twice"));
            }
        }
    }

    /// True when `name` is a declared node; otherwise reports it with a hint.
    fn known(&mut self, name: &str, at: L) -> bool {
        if self.declared.contains_key(name) {
            return true;
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
        false
    }

    /// Checks where `what` starts; returns 1 when it starts at START.
    fn source<'n>(
        &mut self,
        from: &'n Endpoint<L>,
        what: &str,
        way_out: &mut HashSet<&'n str>,
    ) -> usize {
        match from {
            Endpoint::Start(_) => 1,
            Endpoint::End(at) => {
                self.problem(*at, format!("{what} cannot start at END"));
                0
            }
            Endpoint::Node(name, at) => {
                if self.known(name, *at) {
                    way_out.insert(name);
                }
                0
            }
        }
    }

    fn target<'n>(
        &mut self,
        to: &'n Endpoint<L>,
        into_start: &str,
        reached: &mut HashSet<&'n str>,
    ) {
        match to {
            Endpoint::Start(at) => self.problem(*at, into_start),
            Endpoint::End(_) => {}
            Endpoint::Node(name, at) => {
                if self.known(name, *at) {
                    reached.insert(name);
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
