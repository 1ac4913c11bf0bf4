// One mistake is one error: after a #[derive(State)] error, the state type and its update
// type's builder methods still resolve.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    #[state(reduce = kit::reducers::append)]
    log: Vec<String>,
    count: i64,
}

fn main() {
    let _ = SUpdate::new().log(vec!["x".to_string()]).count(1);
    let _ = kit::GraphBuilder::<S>::new("g");
}
