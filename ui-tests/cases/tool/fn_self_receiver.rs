// A #[tool] function is a free function: a method's `self` is not something the model sends.
/// Looks up an order.
#[kit::tool]
async fn lookup(self, id: String) -> Result<String, kit::tool::ToolError> {
    Ok(id)
}

fn main() {}
