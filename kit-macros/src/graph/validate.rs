//! Checks a parsed `graph!` before expansion, with the rulebook `GraphBuilder` uses too
//! (`kit-graph-rules`); every error points at the user's token.

use kit_graph_rules::{Edge, Spec, check};
use proc_macro2::Span;

use super::parse::{Endpoint, GraphDef};
use crate::common::Errors;

pub fn validate(def: &GraphDef) -> Result<(), syn::Error> {
    let mut errors = Errors::default();
    if def.state.is_none() {
        errors.at(
            Span::call_site(),
            "graph! needs the state type: add `state: MyState;` (a #[derive(State)] struct)",
        );
    }
    for route in &def.routes {
        if route.targets.is_empty() {
            errors.at(
                route.from.span(),
                "a route needs the list of nodes it may return: `route a -> [b, c] by pick;`",
            );
        }
    }
    if def.cache_store.is_none()
        && let Some(first) = def.caches.first()
    {
        errors.at(
            first.node.span(),
            "a cache policy needs a store for the outputs: add `cache_store: \
             Arc::new(MemoryCache::new());` (or a SqliteCache, a PostgresCache)",
        );
    }
    // One retry policy and one cache policy per node: a second would silently replace the
    // first.
    for (policies, what) in [(&def.retries, "retry"), (&def.caches, "cache")] {
        let mut seen = std::collections::HashSet::new();
        for policy in policies.iter() {
            if !seen.insert(crate::common::name_of(&policy.node)) {
                errors.at(
                    policy.node.span(),
                    format!(
                        "node `{}` already has a {what} policy; give each node one",
                        crate::common::name_of(&policy.node)
                    ),
                );
            }
        }
    }
    for problem in check(&shape(def)) {
        errors.at(problem.at, problem.message);
    }
    errors.into_result()
}

/// The graph's shape, as the shared rulebook reads it.
fn shape(def: &GraphDef) -> Spec<'static, Span> {
    let mut edges: Vec<Edge<'static, Span>> = Vec::new();
    for node in &def.nodes {
        if !node.destinations.is_empty() {
            edges.push(Edge::Destinations {
                node: (crate::common::name_of(&node.name).into(), node.name.span()),
                targets: node.destinations.iter().map(endpoint).collect(),
            });
        }
    }
    for edge in &def.edges {
        if edge.join {
            edges.push(Edge::Join {
                from: edge.from.iter().map(endpoint).collect(),
                to: endpoint(&edge.to),
                when: edge.when_span,
                at: edge.to.span(),
            });
        } else {
            for from in &edge.from {
                edges.push(Edge::Plain {
                    from: endpoint(from),
                    to: endpoint(&edge.to),
                    when: edge.when_span,
                });
            }
        }
    }
    for route in &def.routes {
        edges.push(Edge::Route {
            from: endpoint(&route.from),
            targets: route.targets.iter().map(endpoint).collect(),
        });
    }
    let names = |list: &[syn::Ident]| {
        list.iter()
            .map(|i| (crate::common::name_of(i).into(), i.span()))
            .collect()
    };
    Spec {
        nodes: def
            .nodes
            .iter()
            .map(|n| (crate::common::name_of(&n.name).into(), n.name.span()))
            .collect(),
        edges,
        interrupt_before: names(&def.interrupt_before),
        interrupt_after: names(&def.interrupt_after),
        policies: def
            .retries
            .iter()
            .chain(&def.caches)
            .map(|r| (crate::common::name_of(&r.node).into(), r.node.span()))
            .collect(),
        whole: Span::call_site(),
        // graph! lists every way between nodes (edges, routes, goto destinations).
        check_reachability: true,
    }
}

fn endpoint(e: &Endpoint) -> kit_graph_rules::Endpoint<'static, Span> {
    match e {
        Endpoint::Start(span) => kit_graph_rules::Endpoint::Start(*span),
        Endpoint::End(span) => kit_graph_rules::Endpoint::End(*span),
        Endpoint::Node(ident) => {
            kit_graph_rules::Endpoint::Node(crate::common::name_of(ident).into(), ident.span())
        }
    }
}
