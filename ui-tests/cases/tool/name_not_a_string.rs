// A tool's name is a string literal: `name = "lookup"`, not a path.
/// Looks a key up.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
#[tool(name = lookup)]
struct Lookup {
    /// The key.
    key: String,
}

fn main() {}
