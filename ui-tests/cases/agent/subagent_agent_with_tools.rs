// A subagent that is another declared agent keeps that agent's own tools.
#[kit::agent(model = "openai:gpt-4o-mini")]
struct Researcher;

#[kit::agent(
    model = "openai:gpt-4o-mini",
    subagents< researcher(description = "Finds", agent = Researcher, tools = []) >,
)]
struct Lead;

fn main() {}
