// A misspelt attribute key is an error with a suggestion.
/// Looks a key up.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
#[tool(nmae = "lookup")]
struct Lookup {
    /// The key.
    key: String,
}

fn main() {}
