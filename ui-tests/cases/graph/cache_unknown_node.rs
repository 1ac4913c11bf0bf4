// A cache policy names a declared node.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn fetch(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        cache_store: std::sync::Arc::new(kit::graph::MemoryCache::new());
        node fetch;
        cache fecth = kit::graph::CachePolicy::new();
        edge START -> fetch;
        edge fetch -> END;
    };
}
