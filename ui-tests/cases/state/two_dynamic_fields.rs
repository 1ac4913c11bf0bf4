// Only one field can hold the dynamic (run-time) channels.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    #[state(dynamic)]
    a: kit::state::DynState,
    #[state(dynamic)]
    b: kit::state::DynState,
}

fn main() {}
