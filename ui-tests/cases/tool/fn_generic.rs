// A #[tool] function cannot be generic: the schema sent to the model must be concrete.
/// Echoes a value.
#[kit::tool]
async fn echo<T: serde::de::DeserializeOwned>(value: T) -> Result<String, kit::tool::ToolError> {
    let _ = value;
    Ok(String::new())
}

fn main() {}
