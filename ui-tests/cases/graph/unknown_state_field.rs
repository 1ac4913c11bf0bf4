// A `when` condition on a field the state does not have points at the field name.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { kind: String }

async fn a(_s: &S, _c: &NodeContext) {}
async fn b(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node a;
        node b;
        edge START -> a;
        edge a -> b when knd == "x";
        edge b -> END;
    };
}
