// The parent model chooses a subagent by its description: it is required.
#[kit::agent(model = "openai:gpt-4o-mini", subagents< researcher(system_prompt = "Research.") >)]
struct Lead;

fn main() {}
