// A join `[a, b] -> c` waits for its sources: an empty list waits for nothing and is refused.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a;
        edge START -> a;
        edge [] -> a;
        edge a -> END;
    };
}
