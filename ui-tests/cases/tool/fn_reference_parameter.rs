// A parameter the model fills must be owned: the arguments are deserialized from JSON.
/// Greets someone.
#[kit::tool]
async fn greet(name: &str) -> Result<String, kit::tool::ToolError> {
    Ok(format!("hi {name}"))
}

fn main() {}
