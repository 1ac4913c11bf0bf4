// A subagent's own review gates are a block: `interrupt_on< tool = true >`, not `= true`.
#[kit::agent(
    model = "openai:gpt-4o-mini",
    subagents< researcher(description = "Finds", interrupt_on = true) >,
)]
struct Lead;

fn main() {}
