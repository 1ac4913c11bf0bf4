// The error type must convert into a ToolError (any std::error::Error does); the error
// points at the error type.
/// Adds two numbers.
#[kit::tool]
async fn add(a: i64, b: i64) -> Result<i64, String> {
    Ok(a + b)
}

fn main() {}
