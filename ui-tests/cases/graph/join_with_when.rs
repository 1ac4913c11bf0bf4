// A fan-in edge waits for all its sources; a condition on it is ambiguous and refused.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}
async fn b(_s: &S, _c: &NodeContext) {}
async fn c(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a;
        node b;
        node c;
        edge START -> a;
        edge START -> b;
        edge [a, b] -> c when n == 1;
        edge c -> END;
    };
}
