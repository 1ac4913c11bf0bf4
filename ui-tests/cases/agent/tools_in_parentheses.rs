// `tools` takes a list after `=`: `tools = [SendEmail]`, not `tools(SendEmail)`.
/// Sends an email.
#[kit::tool]
async fn send_email(to: String) -> Result<String, kit::tool::ToolError> {
    Ok(to)
}

#[kit::agent(model = "openai:gpt-4o-mini", tools(SendEmail))]
struct Mailer;

fn main() {}
