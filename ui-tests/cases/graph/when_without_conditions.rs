// `when { field: value, .. }` lists at least one condition; an empty one would always hold.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}
async fn b(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a;
        node b;
        edge START -> a;
        edge a -> b when {};
        edge b -> END;
    };
}
