// A node function over another state type is an error at the function's name.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &String, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a;
        edge START -> a;
        edge a -> END;
    };
}
