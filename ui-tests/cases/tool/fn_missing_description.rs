// A tool needs a description for the model: a doc comment or `description = ".."`.
#[kit::tool]
async fn add(a: i64, b: i64) -> Result<i64, kit::tool::ToolError> {
    Ok(a + b)
}

fn main() {}
