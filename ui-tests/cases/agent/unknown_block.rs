// The blocks are subagents, async_subagents, interrupt_on and pii; a misspelt one gets a hint.
#[kit::agent(model = "openai:gpt-4o-mini", interupt_on< send_email = true >)]
struct Mailer;

fn main() {}
