// A graph without a node has nothing to run.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

fn main() {
    let _ = kit::graph! {
        state: S;
    };
}
