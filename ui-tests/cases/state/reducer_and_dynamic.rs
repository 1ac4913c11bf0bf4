// A dynamic field uses the reducers registered at run time, not a reducer of its own.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    #[state(dynamic, reducer = kit::reducers::append)]
    extra: kit::state::DynState,
}

fn main() {}
