// The schema sent to the model must be concrete.
/// Stores a value.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
struct Store<T> {
    /// The value.
    value: T,
}

fn main() {}
