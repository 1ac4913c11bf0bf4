// `__start__` and `__end__` are the names of START and END: a node cannot take them.
use kit::graph::NodeContext;

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn step(_s: &S, _c: &NodeContext) {}

fn main() {
    let _ = kit::graph! {
        state: S;
        node __start__ = step;
        edge START -> __start__;
        edge __start__ -> END;
    };
}
