// The state type is required.
use kit::graph::NodeContext;

async fn a(_s: &i64, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        node a;
        edge START -> a;
        edge a -> END;
    };
}
