// An edge naming a node that was not declared is an error at the misspelt name.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn classify(_s: &S, _c: &NodeContext) {}
async fn approve(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node classify;
        node approve;
        edge START -> classify;
        edge classify -> aprove;
        edge approve -> END;
    };
}
