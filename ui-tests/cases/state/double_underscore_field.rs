// Channel names starting with `__` are kit's own (`__output__`, `__interrupt__`, ..): a field
// cannot take one.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    __version: i64,
}

fn main() {}
