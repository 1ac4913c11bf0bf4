// A subagent needs at least its description: `researcher(description = "..")`.
#[kit::agent(model = "openai:gpt-4o-mini", subagents< researcher >)]
struct Lead;

fn main() {}
