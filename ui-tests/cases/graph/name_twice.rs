// A graph has one name: giving `name` twice is an error at the second.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        name: "support";
        name: "triage";
        state: S;
        node a;
        edge START -> a;
        edge a -> END;
    };
}
