// The tool's type is named after its function: a name without a letter makes none.
/// Does nothing.
#[kit::tool]
async fn __() -> Result<String, kit::tool::ToolError> {
    Ok(String::new())
}

fn main() {}
