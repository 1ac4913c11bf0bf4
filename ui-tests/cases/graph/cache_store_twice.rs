// A graph keeps its cached outputs in one store: `cache_store` twice is an error at the second.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        cache_store: std::sync::Arc::new(kit::graph::MemoryCache::new());
        cache_store: std::sync::Arc::new(kit::graph::MemoryCache::new());
        node a;
        cache a = kit::graph::CachePolicy::new();
        edge START -> a;
        edge a -> END;
    };
}
