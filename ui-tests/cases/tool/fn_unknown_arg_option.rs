// #[arg(..)] takes description and default; a misspelt key is an error with a hint.
/// Adds two numbers.
#[kit::tool]
async fn add(#[arg(descripton = "first")] a: i64, b: i64) -> Result<i64, kit::tool::ToolError> {
    Ok(a + b)
}

fn main() {}
