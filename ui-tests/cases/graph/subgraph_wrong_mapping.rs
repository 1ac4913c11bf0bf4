// A subgraph's output mapping gives an update of the parent's state, not of the child's.
use kit::graph::NodeContext;
use kit::{Graph, State};

#[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Parent {
    text: String,
}

#[derive(State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Child {
    found: String,
}

async fn search(_: &Child, _: &NodeContext) -> ChildUpdate {
    ChildUpdate::new()
}

fn child() -> Graph<Child> {
    kit::graph! {
        state: Child;
        node search;
        edge START -> search;
        edge search -> END;
    }
}

fn main() {
    let _ = kit::graph! {
        state: Parent;
        node research = kit::graph::subgraph(
            child(),
            |_: &Parent| ChildUpdate::new(),
            |c: &Child| ChildUpdate::new().found(c.found.clone()),
        );
        edge START -> research;
        edge research -> END;
    };
}
