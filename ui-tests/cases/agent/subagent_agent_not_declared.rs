// `agent = ..` names a struct declared with #[agent].
struct Plain;

#[kit::agent(model = "openai:gpt-4o-mini", subagents< researcher(description = "Finds", agent = Plain) >)]
struct Lead;

fn main() {}
