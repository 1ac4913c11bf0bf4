// An unknown node with no close declared name: the error lists the nodes that are declared.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn draft(_s: &S, _c: &NodeContext) {}
async fn review(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node draft;
        node review;
        edge START -> draft;
        edge draft -> review;
        edge review -> publish;
    };
}
