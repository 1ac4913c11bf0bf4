// A node's goto destinations are nodes or END: going back to START (the entry) is refused.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a -> [START, END];
        edge START -> a;
    };
}
