// Every async subagent needs a description and a graph_id.
#[kit::agent(
    model = "openai:gpt-4o-mini",
    async_subagents< researcher(description = "digs", url = "http://127.0.0.1:1") >,
)]
struct Supervisor;

fn main() {}
