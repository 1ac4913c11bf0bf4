// A #[tool] function must be async: kit awaits it when the model calls the tool.
/// Adds two numbers.
#[kit::tool]
fn add(a: i64, b: i64) -> Result<i64, kit::tool::ToolError> {
    Ok(a + b)
}

fn main() {}
