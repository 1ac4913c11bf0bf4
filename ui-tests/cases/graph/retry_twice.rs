// One retry policy per node: a second would silently replace the first.
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
        retry fetch = kit::graph::RetryPolicy::new();
        retry fetch = kit::graph::RetryPolicy::new().max_attempts(5);
        edge START -> fetch;
        edge fetch -> END;
    };
}
