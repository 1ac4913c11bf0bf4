// One mistake is one error: after a graph! error, the graph value keeps its type.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    n: i64,
}

async fn step(_: &S, _: &kit::NodeContext) -> SUpdate {
    SUpdate::new()
}

fn main() {
    let graph: kit::Graph<S> = kit::graph! {
        state: S;
        node step;
        edge START -> stpe;
        edge step -> END;
    };
    let _ = graph.invoke(SUpdate::new().n(1));
}
