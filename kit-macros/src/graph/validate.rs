//! Checks a parsed `graph!` before expansion: every error points at the user's token.

use std::collections::{HashMap, HashSet};

use super::parse::{Endpoint, GraphDef};
use crate::common::{Errors, closest};

pub fn validate(def: &GraphDef) -> Result<(), syn::Error> {
    let mut errors = Errors::default();
    if def.state.is_none() {
        errors.at(
            proc_macro2::Span::call_site(),
            "graph! needs the state type: add `state: MyState;` (a #[derive(State)] struct)",
        );
    }

    let mut declared: HashMap<String, &syn::Ident> = HashMap::new();
    for node in &def.nodes {
        let name = node.name.to_string();
        match declared.entry(name) {
            std::collections::hash_map::Entry::Occupied(e) => errors.at(
                node.name.span(),
                format!("node `{}` is declared twice", e.key()),
            ),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(&node.name);
            }
        }
    }
    let names: Vec<&str> = declared.keys().map(String::as_str).collect();
    let unknown = |errors: &mut Errors, ident: &syn::Ident| {
        let name = ident.to_string();
        if declared.contains_key(&name) {
            return;
        }
        let hint = match closest(&name, names.iter().copied()) {
            Some(c) => format!("; did you mean `{c}`?"),
            None if names.is_empty() => "; declare it with `node name;`".to_string(),
            None => {
                let mut sorted = names.clone();
                sorted.sort_unstable();
                format!("; nodes are: {}", sorted.join(", "))
            }
        };
        errors.at(ident.span(), format!("unknown node `{name}`{hint}"));
    };

    let mut has_way_out: HashSet<String> = HashSet::new();
    let mut reached: HashSet<String> = HashSet::new();
    let mut start_edges = 0usize;

    for node in &def.nodes {
        for d in &node.destinations {
            match d {
                Endpoint::Start(span) => errors.at(*span, "a node cannot go to START"),
                Endpoint::End(_) => {
                    has_way_out.insert(node.name.to_string());
                }
                Endpoint::Node(target) => {
                    unknown(&mut errors, target);
                    has_way_out.insert(node.name.to_string());
                    reached.insert(target.to_string());
                }
            }
        }
    }

    for edge in &def.edges {
        if edge.join
            && edge.when_span.is_some()
            && let Some(span) = edge.when_span
        {
            errors.at(
                span,
                "a fan-in edge `[a, b] -> c` cannot have a `when` condition",
            );
        }
        if edge.join && edge.from.is_empty() {
            errors.at(
                edge.to.span(),
                "a fan-in edge needs at least one source node",
            );
        }
        for from in &edge.from {
            match from {
                Endpoint::End(span) => errors.at(*span, "an edge cannot start at END"),
                Endpoint::Start(span) => {
                    if edge.join {
                        errors.at(*span, "START cannot be part of a fan-in edge");
                    }
                    start_edges += 1;
                }
                Endpoint::Node(ident) => {
                    unknown(&mut errors, ident);
                    has_way_out.insert(ident.to_string());
                }
            }
        }
        match &edge.to {
            Endpoint::Start(span) => errors.at(*span, "an edge cannot lead to START"),
            Endpoint::End(_) => {}
            Endpoint::Node(ident) => {
                unknown(&mut errors, ident);
                reached.insert(ident.to_string());
            }
        }
    }

    for route in &def.routes {
        match &route.from {
            Endpoint::End(span) => errors.at(*span, "a route cannot start at END"),
            Endpoint::Start(_) => start_edges += 1,
            Endpoint::Node(ident) => {
                unknown(&mut errors, ident);
                has_way_out.insert(ident.to_string());
            }
        }
        if route.targets.is_empty() {
            errors.at(
                route.from.span(),
                "a route needs the list of nodes it may return: `route a -> [b, c] by pick;`",
            );
        }
        for t in &route.targets {
            match t {
                Endpoint::Start(span) => errors.at(*span, "a route cannot lead to START"),
                Endpoint::End(_) => {}
                Endpoint::Node(ident) => {
                    unknown(&mut errors, ident);
                    reached.insert(ident.to_string());
                }
            }
        }
    }

    for ident in def.interrupt_before.iter().chain(&def.interrupt_after) {
        unknown(&mut errors, ident);
    }

    // Reachability and ways out are only meaningful once every name resolves; checking them
    // after a typo would report the typo's consequences as extra errors.
    let names_ok = errors.is_empty();
    if start_edges == 0 && !def.nodes.is_empty() {
        errors.at(
            proc_macro2::Span::call_site(),
            "nothing runs first: add `edge START -> first_node;`",
        );
    }
    if def.nodes.is_empty() {
        errors.at(
            proc_macro2::Span::call_site(),
            "graph! needs at least one node: `node name;`",
        );
    }
    for node in def.nodes.iter().filter(|_| names_ok) {
        let name = node.name.to_string();
        if !has_way_out.contains(&name) {
            errors.at(
                node.name.span(),
                format!(
                    "node `{name}` has no way out: add `edge {name} -> END;` (or to the next \
                     node), a `route {name} -> [..] by f;`, or its goto destinations \
                     `node {name} = f -> [..];`"
                ),
            );
        }
        if !reached.contains(&name) {
            errors.at(
                node.name.span(),
                format!(
                    "node `{name}` is never reached: add an edge to it (`edge START -> {name};`), \
                     list it in a route, or in another node's goto destinations"
                ),
            );
        }
    }
    errors.into_result()
}
