// A field named like a method of the generated update builder would clash with it.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    new: i64,
}

fn main() {}
