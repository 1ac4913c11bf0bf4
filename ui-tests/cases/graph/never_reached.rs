// A node nothing leads to is dead code: an error at the node.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}
async fn orphan(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a;
        node orphan;
        edge START -> a;
        edge a -> END;
        edge orphan -> END;
    };
}
