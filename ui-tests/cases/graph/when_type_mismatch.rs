// A `when` value of the wrong type for its field points at the value.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { count: i64 }

async fn a(_s: &S, _c: &NodeContext) {}
async fn b(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a;
        node b;
        edge START -> a;
        edge a -> b when count == "three";
        edge b -> END;
    };
}
