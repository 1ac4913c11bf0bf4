// `max_result_chars` takes an integer literal.
/// Reads a file.
#[derive(kit::Tool, serde::Deserialize, schemars::JsonSchema)]
#[tool(max_result_chars = "x")]
struct ReadFile {
    /// The path.
    path: String,
}

fn main() {}
