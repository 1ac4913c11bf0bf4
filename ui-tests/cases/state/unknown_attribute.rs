// A misspelt attribute key is an error with a suggestion.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    #[state(reduce = kit::reducers::append)]
    log: Vec<String>,
}

fn main() {}
