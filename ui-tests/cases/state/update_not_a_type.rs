// `update = ..` names a type.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    #[state(reducer = kit::reducers::append, update = 5)]
    log: Vec<String>,
}

fn main() {}
