// Channels are restored by name and type, so a state cannot be generic.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S<T> {
    value: T,
}

fn main() {}
