// The model needs to know what a tool does: no doc comment, no description, no tool.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
struct Lookup {
    /// The key.
    key: String,
}

fn main() {}
