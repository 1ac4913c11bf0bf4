// A tool name is what the providers accept: 1-64 letters, digits, `_` or `-`.
/// Adds two numbers.
#[kit::tool(name = "add numbers")]
async fn add(a: i64, b: i64) -> Result<i64, kit::tool::ToolError> {
    Ok(a + b)
}

fn main() {}
