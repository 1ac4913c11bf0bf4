// A retry policy names a declared node.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    n: i64,
}

async fn fetch(_: &S, _: &NodeContext) -> SUpdate {
    SUpdate::new()
}

fn main() {
    let _ = kit::graph! {
        state: S;
        node fetch;
        retry fecth = kit::graph::RetryPolicy::new();
        edge START -> fetch;
        edge fetch -> END;
    };
}
