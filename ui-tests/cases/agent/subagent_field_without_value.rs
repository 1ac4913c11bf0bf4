// A subagent's field takes a value: a bare `system_prompt` is refused.
#[kit::agent(
    model = "openai:gpt-4o-mini",
    subagents< researcher(description = "Finds", system_prompt) >,
)]
struct Lead;

fn main() {}
