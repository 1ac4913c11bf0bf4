// `update = Type` only makes sense with a reducer.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    #[state(update = Vec<String>)]
    log: Vec<String>,
}

fn main() {}
