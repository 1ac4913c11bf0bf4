// A cache policy needs a store for the outputs: `cache_store: ..;`.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    n: i64,
}

async fn sum(_: &S, _: &NodeContext) -> SUpdate {
    SUpdate::new()
}

fn main() {
    let _ = kit::graph! {
        state: S;
        node sum;
        cache sum = kit::graph::CachePolicy::new();
        edge START -> sum;
        edge sum -> END;
    };
}
