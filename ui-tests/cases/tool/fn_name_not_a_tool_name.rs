// A tool named after its function must have a name the providers accept.
/// Says hello.
#[kit::tool]
async fn café() -> Result<String, kit::tool::ToolError> {
    Ok(String::new())
}

fn main() {}
