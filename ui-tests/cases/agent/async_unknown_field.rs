// Unknown fields of an async subagent are errors with a suggestion.
#[kit::agent(
    model = "openai:gpt-4o-mini",
    async_subagents< researcher(description = "digs", graph_id = "g", ulr = "http://x") >,
)]
struct Supervisor;

fn main() {}
