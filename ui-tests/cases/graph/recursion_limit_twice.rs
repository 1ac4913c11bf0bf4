// A graph has one recursion limit: giving `recursion_limit` twice is an error at the second.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        recursion_limit: 10;
        recursion_limit: 20;
        node a;
        edge START -> a;
        edge a -> END;
    };
}
