// A state is its channels, one per field: a struct without fields has nothing to hold.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {}

fn main() {}
