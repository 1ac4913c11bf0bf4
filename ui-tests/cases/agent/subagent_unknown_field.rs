// A subagent's fields are description, system_prompt, tools, model, middleware and agent.
#[kit::agent(model = "openai:gpt-4o-mini", subagents< researcher(description = "Finds", prompt = "x") >)]
struct Lead;

fn main() {}
