// An edge to a node when no node is declared: the error says so (and the graph, without a
// node, has nothing to run).
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

fn main() {
    let _ = kit::graph! {
        state: S;
        edge START -> work;
    };
}
