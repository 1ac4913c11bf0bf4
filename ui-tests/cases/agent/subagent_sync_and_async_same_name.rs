// Subagent names are unique across subagents< > and async_subagents< >.
#[kit::agent(
    model = "openai:gpt-4o-mini",
    subagents< researcher(description = "Finds") >,
    async_subagents< researcher(description = "Digs", graph_id = "g", url = "http://127.0.0.1:1") >,
)]
struct Lead;

fn main() {}
