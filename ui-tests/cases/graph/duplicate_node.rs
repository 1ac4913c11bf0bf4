// Declaring a node twice points at the second declaration.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a;
        node a;
        edge START -> a;
        edge a -> END;
    };
}
