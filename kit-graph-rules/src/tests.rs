//! The rules, one test each; every problem carries the location it was given.

use super::*;

fn node(name: &str, at: u32) -> Endpoint<'_, u32> {
    Endpoint::Node(name.into(), at)
}

fn plain<'a>(from: Endpoint<'a, u32>, to: Endpoint<'a, u32>) -> Edge<'a, u32> {
    Edge::Plain {
        from,
        to,
        when: None,
    }
}

fn spec<'a>(nodes: &[(&'a str, u32)], edges: Vec<Edge<'a, u32>>) -> Spec<'a, u32> {
    Spec {
        nodes: nodes.iter().map(|(n, l)| ((*n).into(), *l)).collect(),
        edges,
        interrupt_before: vec![],
        interrupt_after: vec![],
        policies: vec![],
        whole: 0,
        check_reachability: true,
    }
}

fn messages(spec: &Spec<'_, u32>) -> Vec<(u32, String)> {
    check(spec).into_iter().map(|p| (p.at, p.message)).collect()
}

#[test]
fn a_sound_graph_has_no_problem() {
    let s = spec(
        &[("a", 1), ("b", 2)],
        vec![
            plain(Endpoint::Start(10), node("a", 11)),
            Edge::Route {
                from: node("a", 12),
                targets: vec![node("b", 13), Endpoint::End(14)],
            },
            plain(node("b", 15), Endpoint::End(16)),
        ],
    );
    assert!(check(&s).is_empty());
}

#[test]
fn every_problem_is_reported_not_only_the_first() {
    let s = spec(
        &[("a", 1), ("a", 2), ("b", 3)],
        vec![
            plain(Endpoint::Start(10), node("x", 11)),
            plain(node("y", 12), Endpoint::Start(13)),
        ],
    );
    let found = messages(&s);
    assert!(
        found.contains(&(2, "node `a` is declared twice".into())),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(at, m)| *at == 11 && m.starts_with("unknown node `x`"))
    );
    assert!(
        found
            .iter()
            .any(|(at, m)| *at == 12 && m.starts_with("unknown node `y`"))
    );
    assert!(found.contains(&(13, "an edge cannot lead to START".into())));
}

#[test]
fn unknown_names_get_a_did_you_mean_or_the_list() {
    let s = spec(
        &[("approve", 1), ("reject", 2)],
        vec![
            plain(Endpoint::Start(10), node("aprove", 11)),
            plain(Endpoint::Start(12), node("zzz", 13)),
        ],
    );
    let found = messages(&s);
    assert!(found.contains(&(11, "unknown node `aprove`; did you mean `approve`?".into())));
    assert!(found.contains(&(13, "unknown node `zzz`; nodes are: approve, reject".into())));
}

#[test]
fn reserved_and_malformed_names_are_refused() {
    let s = spec(&[(START, 1), ("a|b", 2), ("", 3)], vec![]);
    let found = messages(&s);
    assert!(found[0].1.contains("is reserved"));
    assert!(found[1].1.contains("is invalid"));
    assert!(found[2].1.contains("is invalid"));
}

#[test]
fn end_starts_nothing_and_start_ends_nothing() {
    let s = spec(
        &[("a", 1)],
        vec![
            plain(Endpoint::Start(10), node("a", 11)),
            plain(Endpoint::End(12), node("a", 13)),
            Edge::Route {
                from: Endpoint::End(14),
                targets: vec![Endpoint::Start(15)],
            },
            plain(node("a", 16), Endpoint::End(17)),
        ],
    );
    let found = messages(&s);
    assert!(found.contains(&(12, "an edge cannot start at END".into())));
    assert!(found.contains(&(14, "a route cannot start at END".into())));
    assert!(found.contains(&(15, "a route cannot lead to START".into())));
}

#[test]
fn joins_have_sources_no_start_and_no_condition() {
    let many: Vec<Endpoint<u32>> = (0..65).map(|_| node("a", 2)).collect();
    let s = spec(
        &[("a", 1), ("b", 3)],
        vec![
            plain(Endpoint::Start(10), node("a", 11)),
            Edge::Join {
                from: vec![],
                to: node("b", 12),
                when: None,
                at: 13,
            },
            Edge::Join {
                from: vec![Endpoint::Start(14), node("a", 15)],
                to: node("b", 16),
                when: Some(17),
                at: 18,
            },
            Edge::Join {
                from: many,
                to: node("b", 19),
                when: None,
                at: 20,
            },
            plain(node("b", 21), Endpoint::End(22)),
        ],
    );
    let found = messages(&s);
    assert!(found.contains(&(13, "a join needs at least one source node".into())));
    assert!(found.contains(&(14, "START cannot be part of a join".into())));
    assert!(found.contains(&(
        17,
        "a join `[a, b] -> c` cannot have a `when` condition".into()
    )));
    assert!(found.contains(&(
        20,
        "a join waits for at most 64 nodes, this one lists 65".into()
    )));
}

#[test]
fn something_must_run_first() {
    let s = spec(&[("a", 1)], vec![plain(node("a", 2), Endpoint::End(3))]);
    let found = messages(&s);
    assert!(found.contains(&(
        0,
        "nothing runs first: add an edge from START to the first node".into()
    )));
    let empty = spec(&[], vec![]);
    assert_eq!(
        messages(&empty),
        [(0, "a graph needs at least one node".to_string())]
    );
}

#[test]
fn every_node_needs_a_way_out() {
    let s = spec(&[("a", 1)], vec![plain(Endpoint::Start(10), node("a", 11))]);
    let found = messages(&s);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, 1);
    assert!(found[0].1.starts_with("node `a` has no way out"));
    // Declared goto destinations, a join or a route are ways out too.
    let s = spec(
        &[("a", 1), ("b", 2)],
        vec![
            plain(Endpoint::Start(10), node("a", 11)),
            Edge::Destinations {
                node: ("a".into(), 1),
                targets: vec![node("b", 12)],
            },
            Edge::Join {
                from: vec![node("b", 13)],
                to: Endpoint::End(14),
                when: None,
                at: 15,
            },
        ],
    );
    assert!(check(&s).is_empty(), "{:?}", check(&s));
}

#[test]
fn reachability_is_checked_only_when_asked() {
    let mut s = spec(
        &[("a", 1), ("orphan", 2)],
        vec![
            plain(Endpoint::Start(10), node("a", 11)),
            plain(node("a", 12), Endpoint::End(13)),
            plain(node("orphan", 14), Endpoint::End(15)),
        ],
    );
    let found = messages(&s);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, 2);
    assert!(found[0].1.starts_with("node `orphan` is never reached"));
    s.check_reachability = false;
    assert!(check(&s).is_empty());
}

#[test]
fn a_typo_is_one_problem_not_three() {
    // `b` misspelt: not also "b has no way out" or "b is never reached".
    let s = spec(
        &[("a", 1), ("b", 2)],
        vec![
            plain(Endpoint::Start(10), node("a", 11)),
            plain(node("a", 12), node("bb", 13)),
            plain(node("b", 14), Endpoint::End(15)),
        ],
    );
    let found = messages(&s);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, 13);
}

#[test]
fn interrupts_name_declared_nodes() {
    let mut s = spec(
        &[("review", 1)],
        vec![
            plain(Endpoint::Start(10), node("review", 11)),
            plain(node("review", 12), Endpoint::End(13)),
        ],
    );
    s.interrupt_before = vec![("reveiw".into(), 20)];
    s.interrupt_after = vec![("review".into(), 21)];
    assert_eq!(
        messages(&s),
        [(
            20,
            "unknown node `reveiw`; did you mean `review`?".to_string()
        )]
    );
}

#[test]
fn closest_prefers_the_nearest_and_gives_up_when_far() {
    assert_eq!(closest("aprove", ["approve", "remove"]), Some("approve"));
    assert_eq!(closest("xyz", ["approve"]), None);
    // Long names allow a quarter of their length.
    assert_eq!(
        closest("summarise_all_ticket", ["summarize_all_tickets"]),
        Some("summarize_all_tickets")
    );
}
