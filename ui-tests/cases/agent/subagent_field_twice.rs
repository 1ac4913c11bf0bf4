// Each field of a subagent is given once: the second is an error.
#[kit::agent(
    model = "openai:gpt-4o-mini",
    subagents< researcher(description = "Finds", description = "Digs") >,
)]
struct Lead;

fn main() {}
