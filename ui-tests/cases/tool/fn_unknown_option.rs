// #[tool(..)] options are name, description, max_result_chars and crate; others are errors.
/// Adds two numbers.
#[kit::tool(max_chars = 100)]
async fn add(a: i64, b: i64) -> Result<i64, kit::tool::ToolError> {
    Ok(a + b)
}

fn main() {}
