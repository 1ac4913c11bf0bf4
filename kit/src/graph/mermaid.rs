//! Mermaid rendering of a compiled graph.

use std::fmt::Write;

use super::{END, GraphInner, Outgoing, START, Target};
use crate::state::State;

/// Renders `graph` as a Mermaid flowchart (`graph TD`).
pub(crate) fn draw<S: State>(graph: &GraphInner<S>) -> String {
    let mut out = String::from("graph TD;\n");
    let _ = writeln!(out, "\t{START}([<p>__start__</p>]):::first");
    for node in &graph.nodes {
        let _ = writeln!(out, "\t{}({})", id(&node.name), node.name);
    }
    let _ = writeln!(out, "\t{END}([<p>__end__</p>]):::last");
    let name_of = |t: &Target| match t {
        Target::Node(i) => id(&graph.nodes[*i].name),
        Target::End => END.to_string(),
    };
    let mut edges = |from: &str, out_edges: &Outgoing<S>, destinations: &[Target]| {
        for t in &out_edges.statics {
            let _ = writeln!(out, "\t{from} --> {};", name_of(t));
        }
        for w in &out_edges.whens {
            let _ = writeln!(
                out,
                "\t{from} -. \"{}\" .-> {};",
                w.label.replace('"', "'"),
                name_of(&w.target)
            );
        }
        for r in &out_edges.routes {
            for t in &r.destinations {
                let _ = writeln!(out, "\t{from} -.-> {};", name_of(t));
            }
        }
        for t in destinations {
            let _ = writeln!(out, "\t{from} -. goto .-> {};", name_of(t));
        }
    };
    edges(START, &graph.start, &[]);
    for node in &graph.nodes {
        edges(&id(&node.name), &node.out, &node.destinations);
    }
    for join in &graph.joins {
        for source in &join.sources {
            let _ = writeln!(
                out,
                "\t{} == join ==> {};",
                id(&graph.nodes[*source].name),
                name_of(&join.target)
            );
        }
    }
    out.push_str("\tclassDef default fill:#f2f0ff,line-height:1.2\n");
    out.push_str("\tclassDef first fill-opacity:0\n");
    out.push_str("\tclassDef last fill:#bfb6fc\n");
    out
}

/// A Mermaid-safe node id.
fn id(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
