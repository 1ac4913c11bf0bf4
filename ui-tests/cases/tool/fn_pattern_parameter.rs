// Each #[tool] parameter is a plain name: it becomes a property of the tool's arguments.
/// Adds a pair.
#[kit::tool]
async fn add((a, b): (i64, i64)) -> Result<i64, kit::tool::ToolError> {
    Ok(a + b)
}

fn main() {}
