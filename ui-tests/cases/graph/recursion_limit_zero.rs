// A graph's recursion limit is at least one superstep.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    n: i64,
}

async fn step(_: &S, _: &kit::NodeContext) -> SUpdate {
    SUpdate::new()
}

fn main() {
    let _ = kit::graph! {
        state: S;
        recursion_limit: 0;
        node step;
        edge START -> step;
        edge step -> END;
    };
}
