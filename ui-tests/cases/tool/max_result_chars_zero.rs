// A cap of zero characters would hide every result.
/// Reads a file.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
#[tool(max_result_chars = 0)]
struct ReadFile {
    /// The path.
    path: String,
}

fn main() {}
