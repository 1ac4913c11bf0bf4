// The runtime crate's path is given once: `crate` twice is an error at the second.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn a(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        crate: ::kit;
        crate: ::kit;
        state: S;
        node a;
        edge START -> a;
        edge a -> END;
    };
}
