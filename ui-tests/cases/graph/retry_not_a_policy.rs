// `retry node = ..` takes a RetryPolicy.
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
        retry fetch = 3;
        edge START -> fetch;
        edge fetch -> END;
    };
}
