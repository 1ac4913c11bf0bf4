// A tool's description is text for the model: a string literal.
/// Looks a key up.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
#[tool(description = 5)]
struct Lookup {
    /// The key.
    key: String,
}

fn main() {}
