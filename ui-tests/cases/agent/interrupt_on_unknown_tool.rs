// When every tool of the agent is known at compile time, interrupt_on may only name them.
/// Sends an email.
#[kit::tool]
async fn send_email(to: String) -> Result<String, kit::tool::ToolError> {
    Ok(to)
}

#[kit::agent(
    model = "openai:gpt-4o-mini",
    tools = [SendEmail],
    interrupt_on< send_emial = true >,
)]
struct Mailer;

fn main() {}
